"""The generic AM-RNN cell (paper §3.2, eqs. 8-12) around Keras cells."""

import os

import keras
import numpy as np
import pytest

from tests.am_gru_reference import permutations
from tests.layer_test_case import (
    CELL_SPEC,
    RNN_MASKING,
    CellTests,
    LayerTestCase,
    ResetCellTests,
    rnn_case,
    user_rnn,
)
from tests.support import masked_rnn
from tf_memlayers.layers import AssociativeMemoryCell
from tf_memlayers.models._compiling import compile_and_build_optimizer


class AssociativeMemoryCellTest(CellTests, ResetCellTests, LayerTestCase):
    """The shared suites of `AssociativeMemoryCell` (tests/layer_test_case.py)."""

    layer_cls = AssociativeMemoryCell
    make = staticmethod(lambda **kw: AssociativeMemoryCell(keras.layers.GRUCell(4), **kw))
    flags = ("return_retrievals",)
    not_in = {"output_spec": CELL_SPEC, "nan_padding": RNN_MASKING}
    cells = {
        "associative_memory_lstm": lambda dtype=None: AssociativeMemoryCell(
            keras.layers.LSTMCell(6, dtype=dtype), num_copies=2, dtype=dtype
        ),
        "associative_memory_gru": lambda dtype=None: AssociativeMemoryCell(
            keras.layers.GRUCell(6, dtype=dtype),
            num_copies=3,
            return_retrievals=True,
            dtype=dtype,
        ),
    }
    keras_checks = {
        "rnn_associative_memory_lstm": rnn_case(cells["associative_memory_lstm"], 6, 3 + 1, 1),
        "rnn_associative_memory_gru": rnn_case(
            cells["associative_memory_gru"], 6 + 2 * 6, 3 + 1, 1
        ),
    }
    journeys = {
        "AssociativeMemoryCell": (
            "step",
            lambda e: user_rnn(
                AssociativeMemoryCell(keras.layers.LSTMCell(8), num_copies=2),
                return_sequences=True,
            )(e),
        ),
    }


def _bound(z):
    return z / np.maximum(1.0, np.abs(z))


def _to_complex_memory(memory, copies):
    m = memory.shape[1] // (2 * copies)
    return memory[:, : copies * m].reshape(-1, copies, m) + 1j * memory[:, copies * m :].reshape(
        -1, copies, m
    )


def reference_run(xs, inner, key_kernel, copies, memory_index, output_size):
    """Eqs. 8-12 in complex NumPy; the wrapped cell ``f`` is the Keras cell itself."""
    batch, steps, _ = xs.shape
    sizes = inner.state_size if isinstance(inner.state_size, (list, tuple)) else [inner.state_size]
    states = [np.zeros((batch, s)) for s in sizes]
    mem_units = sizes[memory_index]
    m = mem_units // 2
    perms = permutations(m, copies)
    memory = np.zeros((batch, copies, m), complex)
    previous = np.zeros((batch, output_size))
    outputs = []
    for t in range(steps):
        controller = np.concatenate([xs[:, t], previous], 1)
        a = controller @ key_kernel
        r = _bound(a[:, :m] + 1j * a[:, m:])
        K = np.stack([r[:, p] for p in perms], 1)
        s_prev_c = (np.conj(K) * memory).mean(1)
        s_prev = np.concatenate([s_prev_c.real, s_prev_c.imag], 1)
        states[memory_index] = s_prev
        out, new_states = inner(controller, [s for s in states])
        new_states = [np.asarray(s) for s in new_states]
        diff = new_states[memory_index] - s_prev
        memory = memory + K * (diff[:, :m] + 1j * diff[:, m:])[:, None]
        states = new_states
        previous = np.asarray(out)
        outputs.append(previous)
    real = np.concatenate([memory.real.reshape(batch, -1), memory.imag.reshape(batch, -1)], 1)
    return np.stack(outputs, 1), real


@pytest.mark.parametrize(
    "make_cell,index",
    [(lambda: keras.layers.GRUCell(6), 0), (lambda: keras.layers.LSTMCell(6), 1)],
    ids=["gru", "lstm"],
)
@pytest.mark.parametrize("copies", [1, 3])
def test_generic_cell_matches_equations_8_to_12(float64_policy, make_cell, index, copies):
    rng = np.random.default_rng(copies)
    xs = rng.normal(size=(2, 5, 4))
    cell = AssociativeMemoryCell(make_cell(), num_copies=copies)
    assert cell.memory_state_index == index
    layer = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    layer.build(xs.shape)
    cell.key_kernel.assign(rng.uniform(-1.5, 1.5, size=cell.key_kernel.shape))
    outputs, memory, *_ = layer(xs)
    ref_outputs, ref_memory = reference_run(
        xs, cell.cell, np.asarray(cell.key_kernel), copies, index, 6
    )
    np.testing.assert_allclose(np.asarray(outputs), ref_outputs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(memory), ref_memory, atol=1e-10, rtol=0)
    assert np.abs(ref_memory).max() > 0.05


@keras.saving.register_keras_serializable(package="tf_memlayers_tests")
class TwoStateCell(keras.layers.Layer):
    """A user cell with two states: a tanh RNN state and a running sum of inputs."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units, units]
        self.output_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent = self.add_weight(shape=(self.units, self.units), name="recurrent")

    def call(self, inputs, states, training=None):
        h = keras.ops.tanh(inputs @ self.kernel + states[0] @ self.recurrent)
        total = states[1] + inputs[:, : self.units]
        return h + total, [h, total]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_user_cell_and_memory_state_index(float64_policy):
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(2, 4, 6))
    cell = AssociativeMemoryCell(TwoStateCell(4), num_copies=2, memory_state_index=1)
    assert cell.state_size == [8, 4, 4]
    layer = keras.layers.RNN(cell, return_sequences=True)
    layer.build(xs.shape)
    ref_outputs, _ = reference_run(xs, cell.cell, np.asarray(cell.key_kernel), 2, 1, 4)
    np.testing.assert_allclose(np.asarray(layer(xs)), ref_outputs, atol=1e-10)


def test_masked_batch_equals_unpadded_sequences():
    rng = np.random.default_rng(6)
    xs = rng.normal(size=(2, 5, 3)).astype("float32")
    mask = np.array([[True] * 5, [True] * 2 + [False] * 3])
    layer = keras.layers.RNN(
        AssociativeMemoryCell(keras.layers.LSTMCell(4), num_copies=3), return_state=True
    )
    batch = masked_rnn(layer, xs, mask)
    single = layer(xs[1:, :2])
    for got, expected in zip(batch, single):
        np.testing.assert_allclose(np.asarray(got)[1], np.asarray(expected)[0], atol=1e-6)


def test_return_retrievals_and_keras_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    xs = rng.normal(size=(2, 4, 3)).astype("float32")
    cell = AssociativeMemoryCell(
        keras.layers.GRUCell(4), num_copies=2, seed=9, return_retrievals=True
    )
    inputs = keras.Input((None, 3))
    model = keras.Model(inputs, keras.layers.RNN(cell, return_sequences=True)(inputs))
    out = np.asarray(model(xs))
    assert out.shape == (2, 4, 12)
    # For a GRU the output is the new state: output = read + written.
    np.testing.assert_allclose(out[..., :4], out[..., 8:] + out[..., 4:8], atol=1e-6)
    path = os.path.join(tmp_path, "generic.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(np.asarray(loaded(xs)), out)
    rebuilt = AssociativeMemoryCell.from_config(cell.get_config())
    assert rebuilt.get_config() == cell.get_config()


def test_jit_and_mixed_float16():
    rng = np.random.default_rng(8)
    xs = rng.normal(size=(4, 5, 3)).astype("float32")
    reference = keras.layers.RNN(AssociativeMemoryCell(keras.layers.GRUCell(4), num_copies=2))
    reference.build((None, 5, 3))
    for weight in reference.weights:  # large enough that a lost memory write would show
        weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
    expected = np.asarray(reference(xs))
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((5, 3))
        rnn = keras.layers.RNN(AssociativeMemoryCell(keras.layers.GRUCell(4), num_copies=2))
        hidden = rnn(inputs)
        rnn.set_weights(reference.get_weights())
        got = keras.ops.convert_to_numpy(keras.ops.cast(rnn(xs), "float32"))
        model = keras.Model(inputs, keras.layers.Dense(1, dtype="float32")(hidden))
        compile_and_build_optimizer(model, optimizer="adam", loss="mse", jit_compile=True)
        loss = model.train_on_batch(xs, np.ones((4, 1), "float32"))
    finally:
        keras.config.set_dtype_policy("float32")
    np.testing.assert_allclose(got, expected, atol=5e-3 * max(1.0, np.abs(expected).max()))
    assert np.isfinite(loss)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="even.*5"):
        AssociativeMemoryCell(keras.layers.GRUCell(5))
    with pytest.raises(ValueError, match="num_copies.*>= 1"):
        AssociativeMemoryCell(keras.layers.GRUCell(4), num_copies=0)
    with pytest.raises(ValueError, match="memory_state_index.*< 1.*got 1"):
        AssociativeMemoryCell(keras.layers.GRUCell(4), memory_state_index=1)
    with pytest.raises(TypeError, match="cell"):
        AssociativeMemoryCell("gru")
