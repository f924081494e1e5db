"""The wrapper cells hand states to any Keras cell as `keras.layers.RNN` does."""

import keras
import numpy as np
import pytest
from keras import ops
from keras.layers import LSTMCell

import tf_memlayers
from tests.support import as_numpy, assert_close
from tf_memlayers.layers import AssociativeMemoryCell, NGramConcatCell, SlidingWindowAttentionCell
from tf_memlayers.layers.memory_cell_wrapper import step_runner

WRAPPERS = {
    "window": lambda cell: SlidingWindowAttentionCell(cell, window=3),
    "ngram": lambda cell: NGramConcatCell(cell, n=3, units=4),
}


class IndexingCell(keras.layers.Layer):
    """The `keras.layers.RNN` docstring's cell: int `state_size`, reads ``states[0]``."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent = self.add_weight(shape=(self.units, self.units), name="recurrent")

    def call(self, inputs, states):
        output = ops.tanh(ops.matmul(inputs, self.kernel) + ops.matmul(states[0], self.recurrent))
        return output, [output]


def stacked_lstm():
    return keras.layers.StackedRNNCells([keras.layers.LSTMCell(6), keras.layers.LSTMCell(4)])


def final_states(cell, inputs):
    outputs = keras.layers.RNN(cell, return_state=True)(inputs)
    return [as_numpy(s) for s in keras.tree.flatten(outputs[1:])]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("make", [lambda: IndexingCell(4), stacked_lstm], ids=["int", "nested"])
def test_wrapped_cell_runs_as_in_keras_rnn(wrapper, make):
    inputs, cell = np.random.default_rng(0).normal(size=(3, 6, 4)).astype("float32"), make()
    plain = final_states(cell, inputs)
    wrapped = final_states(WRAPPERS[wrapper](cell), inputs)  # the same cell: the same weights
    assert len(wrapped) == len(plain) + 1  # the wrapped cell's states, then the memory
    assert_close(wrapped[:-1], plain, atol=1e-6, rtol=1e-6)


def test_associative_memory_cell_flattens_nested_states_and_needs_no_output_size():
    inputs = np.random.default_rng(1).normal(size=(2, 5, 3)).astype("float32")
    lstm = keras.layers.LSTMCell(6)
    direct, stack = AssociativeMemoryCell(lstm, num_copies=2), keras.layers.StackedRNNCells([lstm])
    stacked = AssociativeMemoryCell(stack, num_copies=2, memory_state_index=1)
    assert stacked.state_size == direct.state_size
    expected = keras.layers.RNN(direct)(inputs)
    stacked.build((None, 3))
    stacked.key_kernel.assign(direct.key_kernel)
    got = keras.layers.RNN(stacked)(inputs)
    np.testing.assert_allclose(as_numpy(got), as_numpy(expected), rtol=1e-6, atol=1e-6)
    # A cell without `output_size` gives its state's size.
    cell = AssociativeMemoryCell(IndexingCell(4), num_copies=2)
    assert cell.output_size == 4 and tuple(keras.layers.RNN(cell)(inputs).shape) == (2, 4)
    cell = AssociativeMemoryCell(lstm, num_copies=2, dtype="float64")  # the LSTM's float32
    assert as_numpy(keras.layers.RNN(cell, dtype="float64")(inputs)).dtype == np.float64


def test_step_runner_leaves_out_keras_layer_call_on_torch_where_a_step_needs_none_of_it():
    x, torch = ops.ones((2, 4)), keras.backend.backend() == "torch"
    plain, mixed = keras.layers.GRUCell(3), keras.layers.GRUCell(3, dtype="mixed_float16")
    assert step_runner(plain, x) is plain  # not built: its first call builds it
    plain(x, [ops.zeros((2, 3))]), mixed(ops.cast(x, "float16"), [ops.zeros((2, 3), "float16")])
    assert step_runner(plain, x) == (plain.call if torch else plain)
    assert step_runner(mixed, ops.cast(x, "float16")) is mixed  # autocasts its weights


@pytest.mark.parametrize("stacked", [False, True], ids=["alone", "stacked"])
@pytest.mark.parametrize("wrapper", [*WRAPPERS, "associative", "resettable"])
def test_keras_rnn_refuses_to_train_a_dropout_cell_in_a_wrapper(wrapper, stacked):
    wrap = WRAPPERS | {"associative": lambda c: AssociativeMemoryCell(c, num_copies=2)}
    lstm = keras.layers.LSTMCell(6, dropout=0.3, recurrent_dropout=0.2)
    cell = wrap.get(wrapper, tf_memlayers.ResettableCell)(lstm)
    cell = keras.layers.StackedRNNCells([cell, keras.layers.GRUCell(3)]) if stacked else cell
    x = np.ones((2, 5, 3), "float32")
    keras.layers.RNN(cell)(x)  # inference draws no masks
    # Drawn in the loop, the masks would escape it (TensorFlow, JAX) or serve every later call.
    with pytest.raises(ValueError, match=r"'lstm_cell\w*' .* dropout=0.3, recurrent_dropout=0.2"):
        keras.layers.RNN(cell)(x, training=True)
    trained = [as_numpy(tf_memlayers.ResettableRNN(cell)(x, training=True)) for _ in range(2)]
    assert not np.allclose(*trained)  # masks drawn for each call


REMAT = {  # on TensorFlow, a keyword's tensor and a cell's bound tensors took no gradient
    "dual": lambda cell: tf_memlayers.DualAssociativeEncoder(6),
    "attention": lambda cell: tf_memlayers.AttentionRNN(tf_memlayers.AttentionWrapper(cell)),
    "window_cell": lambda cell: tf_memlayers.ResettableRNN(SlidingWindowAttentionCell(cell, 2)),
    "am_gru": lambda cell: tf_memlayers.AssociativeGRU(4, fused_loop=False),
}


@pytest.mark.parametrize("name", sorted(REMAT))
def test_layers_built_in_a_remat_scope_train_as_those_built_outside(name):
    if keras.backend.backend() == "jax" and name in ("attention", "window_cell"):
        pytest.skip("keras.layers.RNN over a Keras cell fails under keras.RematScope on JAX")
    x, m = (np.random.default_rng(0).normal(size=(2, t, 4)).astype("float32") for t in (5, 3))
    x[0, 3:] = 0  # masked: compiled, TensorFlow's recomputation takes no boolean tensor
    ms = []
    for mode in (None, "full"):
        i, j, cell = keras.Input((5, 4)), keras.Input((3, 4)), LSTMCell(4)
        with keras.RematScope(mode=mode):  # only the layer: Keras's cells and ops fail in it
            layer, h = REMAT[name](cell), keras.layers.Masking()(i)
        memory = {"memory": keras.layers.Dense(4)(j)} if name == "attention" else {}  # a projection
        ms.append(keras.Model([i, j], layer([j, h])[1] if name == "dual" else layer(h, **memory)))
        ms[-1].compile(keras.optimizers.SGD(1.0), lambda _, out: ops.sum(out**2))
    ms[1].set_weights(ms[0].get_weights())  # one compiled step: the weights move by the gradients
    [model.fit([x, m], np.zeros((2, 1)), verbose=0) for model in ms]
    assert_close(ms[1].get_weights(), ms[0].get_weights(), 1e-5)


def test_a_float32_cell_in_a_float16_wrapper_returns_float16():
    cell = AssociativeMemoryCell(keras.layers.GRUCell(4, dtype="float32"), dtype="mixed_float16")
    states = [np.zeros((2, n), "float16") for n in cell.state_size]
    output, _ = cell(np.ones((2, 5), "float16"), states)
    assert keras.backend.standardize_dtype(output.dtype) == "float16"
