"""`ResettableCell` and `ResettableRNN`: any Keras cell with per-row resets (and test_resets.py)."""

import contextlib

import keras
import numpy as np
import pytest

from tests.layer_test_case import (
    ALL_RNN_FLAGS,
    LayerTestCase,
    documents,
    masking_checks,
    rnn_over,
    user_rnn,
)
from tests.layers.associative_memory.test_associative_memory_cell import TwoStateCell
from tests.support import BACKEND, as_numpy, assert_close, keras_lstm
from tf_memlayers import (
    AssociativeMemoryCell,
    AttentionRNN,
    AttentionWrapper,
    ResettableCell,
    ResettableRNN,
    SlidingWindowAttentionCell,
    dropout_masks,
)
from tf_memlayers.models._compiling import compile_and_build_optimizer


class ResettableCellTest(LayerTestCase):
    layer_cls = ResettableCell

    def test_layer_and_cell_behaviors(self):
        def make(dtype=None):
            return ResettableCell(keras.layers.LSTMCell(6, dtype=dtype), dtype=dtype)

        self.run_cell_tests(make)
        checks = masking_checks((2, 3, 6), 3, expected_num_seed_generators=1)
        self.run_layer_test(rnn_over(make), **checks)

    def test_journey(self, tmp_path):
        rnn = lambda e: user_rnn(ResettableCell(keras.layers.LSTMCell(8)), return_sequences=True)(e)  # noqa: E731
        self.run_journey_test("step", rnn, tmp_path)

    def test_config_and_resets(self):
        self.run_config_test(ResettableCell, cell=keras.layers.LSTMCell(3), name="wrapped")
        self.run_reset_tests(lambda **kw: ResettableCell(keras.layers.GRUCell(4), **kw))


class ResettableRNNTest(LayerTestCase):
    layer_cls = ResettableRNN

    @pytest.mark.parametrize("attention", [False, True], ids=["lstm", "attention_taking_reset"])
    def test_layer_behaviors(self, attention):
        def make(dtype=None, **kwargs):
            cell = keras.layers.LSTMCell(6, dtype=dtype)
            if attention:  # a cell of the package's that takes `reset` itself
                cell = SlidingWindowAttentionCell(cell, window=2, mode="key_value", dtype=dtype)
            flags = dict(return_state=attention, return_sequences=not attention)
            return ResettableRNN(cell, **flags, dtype=dtype, **kwargs)

        shape = ((2, 3), (2, 6), (2, 6), (2, 14)) if attention else (2, 3, 6)
        checks = masking_checks(shape, 3 + 5 * attention, expected_num_seed_generators=1)
        self.run_layer_test(make, **checks)

    def test_journey(self, tmp_path):
        def build(embedded):
            flags = dict(return_sequences=True, zero_output_for_mask=BACKEND != "tensorflow")
            return ResettableRNN(keras.layers.LSTMCell(8), **flags)(embedded)

        self.run_journey_test("step", build, tmp_path)

    def test_config_arguments_resets_and_output_spec(self):
        self.run_config_test(ResettableRNN, cell=keras.layers.GRUCell(4), **ALL_RNN_FLAGS)
        make = lambda **kw: ResettableRNN(keras.layers.GRUCell(4), **kw)  # noqa: E731
        self.run_flags_test(make)
        self.run_reset_tests(make)
        cells = (keras.layers.GRUCell, keras.layers.LSTMCell)
        for cell, flag in zip(cells, ("return_sequences", "return_state")):

            def rnn(dtype, cell=cell, flag=flag):
                return ResettableRNN(cell(5, dtype=dtype), dtype=dtype, **{flag: True})

            self.run_output_spec_test(rnn, (2, 5, 4))

    def test_mixed_float16_matches_float32(self):
        x = RNG.normal(size=(B, T, F)).astype("float32")
        make = lambda: ResettableRNN(keras.layers.GRUCell(4), return_sequences=True)  # noqa: E731
        self.run_mixed_precision_test(make, x, atol=1e-2, reset=_resets())


RNG, B, T, F = np.random.default_rng(3), 3, 10, 5


def _resets():
    reset = np.zeros((B, T), bool)
    reset[0, [2, 6]] = reset[1, 0] = True
    return reset


def test_without_reset_it_is_keras_rnn_and_lstm(float64_policy):
    x = RNG.normal(size=(B, T, F))
    rnn = ResettableRNN(keras.layers.LSTMCell(4), return_sequences=True)
    # A cell that takes no `reset` is wrapped, also when rebuilt from the config, which holds
    # it as keras.layers.RNN's does (or, in older files, holds the wrapper).
    config = rnn.get_config()
    assert config["cell"] == keras.layers.RNN(rnn.cell.cell).get_config()["cell"]
    wrapper = {**config, "cell": keras.saving.serialize_keras_object(rnn.cell)}
    for layer in (rnn, ResettableRNN.from_config(config), ResettableRNN.from_config(wrapper)):
        assert type(layer.cell) is ResettableCell and type(layer.cell.cell) is keras.layers.LSTMCell
    lstm = keras_lstm(4, return_sequences=True)
    lstm.build(x.shape)
    rnn.build(x.shape)
    rnn.set_weights(lstm.get_weights())
    np.testing.assert_allclose(as_numpy(rnn(x)), as_numpy(lstm(x)), atol=1e-12, rtol=0)
    # An all-false reset is the same computation through the reset loop.
    assert_close(rnn(x, reset=np.zeros((B, T), bool)), lstm(x), atol=1e-12)


def _model():
    """A language model over stacked LSTM and GRU cells with dropout, and its cells."""
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    reset = keras.Input((None,), dtype="bool", name="reset")
    embedded = keras.layers.Embedding(20, 6, mask_zero=True)(tokens)
    cells = [
        keras.layers.LSTMCell(8, dropout=0.3, recurrent_dropout=0.3),
        keras.layers.GRUCell(4, dropout=0.3, recurrent_dropout=0.3),
    ]
    features = ResettableRNN(cells, return_sequences=True)(embedded, reset=reset)
    return keras.Model({"tokens": tokens, "reset": reset}, keras.layers.Dense(20)(features)), cells


def _data(batch=7, steps=6):
    tokens = RNG.integers(1, 20, size=(batch, steps)).astype("int32")
    tokens[0, -2:] = 0
    reset = RNG.random((batch, steps)) < 0.3
    targets = RNG.integers(0, 20, size=(batch, steps)).astype("int32")
    return {"tokens": tokens, "reset": reset}, targets


def test_stacked_dropout_cells_fit_on_a_partial_last_batch_and_round_trip(tmp_path):
    model, cells = _model()
    # Compiled: keras.layers.RNN draws the dropout masks before its loop (not escaping it).
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    compile_and_build_optimizer(model, "adam", loss, jit_compile=BACKEND != "torch")
    inputs, targets = _data()
    history = model.fit(inputs, targets, batch_size=3, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    # The masks are drawn once per call and dropped after it: two training calls differ.
    assert all(c._dropout_mask is None and c._recurrent_dropout_mask is None for c in cells)
    first, second = (as_numpy(model(inputs, training=True)) for _ in range(2))
    assert not np.allclose(first, second)
    expected, path = model.predict(inputs, verbose=0), tmp_path / "resettable.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), expected, atol=1e-6)
    # The reset reaches the loop: other resets give other outputs.
    flipped = dict(inputs, reset=~inputs["reset"])
    assert not np.allclose(loaded.predict(flipped, verbose=0), expected, atol=1e-4)
    if BACKEND == "tensorflow":  # exported as a SavedModel, it serves with its reset input
        import tensorflow as tf

        model.export(str(tmp_path / "served"), verbose=False)
        served = tf.saved_model.load(str(tmp_path / "served"))
        outputs = served.serve(keras.tree.map_structure(tf.constant, inputs))
        np.testing.assert_allclose(as_numpy(outputs), expected, atol=1e-5)


@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_a_list_of_cells_is_stacked_and_every_cell_restarts_at_a_reset(unroll, masked):
    cells = [keras.layers.LSTMCell(3), keras.layers.GRUCell(4)]
    flags = dict(return_sequences=True, return_state=True, zero_output_for_mask=True)
    rnn = ResettableRNN(cells, unroll=unroll, **flags)
    stack = rnn.cell.cell
    assert isinstance(rnn.cell, ResettableCell)
    assert isinstance(stack, keras.layers.StackedRNNCells) and stack.cells == cells
    x, reset = RNG.normal(size=(B, T, F)).astype("float32"), _resets()
    mask = np.ones((B, T), bool)
    if masked:
        mask[2, 7:] = False
    outputs, *states = rnn(x, reset=reset, mask=mask)
    assert len(states) == 2  # one entry a cell, as keras.layers.RNN returns a stack's states
    assert [id(w) for w in rnn.weights] == [id(w) for cell in cells for w in cell.weights]
    again = ResettableRNN.from_config(rnn.get_config()).cell.cell
    assert [type(c) for c in again.cells] == [keras.layers.LSTMCell, keras.layers.GRUCell]
    # The reference: the same stacked cells under keras.layers.RNN, on each document alone.
    alone_rnn = keras.layers.RNN(stack, return_sequences=True, return_state=True)
    for row in range(B):
        for start, stop, _ in documents(reset)[row]:
            stop = min(stop, int(mask[row].sum()))
            alone, *alone_states = alone_rnn(x[row : row + 1, start:stop])
            assert_close(as_numpy(outputs)[row, start:stop], alone[0], atol=1e-6)
        # The states of every cell of the stack are those of the row's last document alone.
        for state, alone_state in zip(keras.tree.flatten(states), keras.tree.flatten(alone_states)):
            assert_close(as_numpy(state)[row], alone_state[0], atol=1e-6)


class _UnregisteredCell(TwoStateCell):
    """A two-state cell that is not registered for Keras serialization."""


@pytest.mark.parametrize(
    "rnn_class", [keras.layers.RNN, ResettableRNN], ids=["keras_rnn", "resettable_rnn"]
)
def test_an_unregistered_cell_round_trips_with_custom_objects(tmp_path, rnn_class):
    # As keras.layers.RNN: given in `custom_objects`, through its config and a .keras file.
    custom = {"_UnregisteredCell": _UnregisteredCell}
    x = RNG.normal(size=(B, T, F)).astype("float32")
    rnn = rnn_class(_UnregisteredCell(4), return_sequences=True, name="rnn")
    expected, config = as_numpy(rnn(x)), rnn.get_config()
    # `keras.layers.RNN.from_config` takes the cell out of the dict it is given: a copy each.
    with pytest.raises(TypeError, match="Could not locate class '_UnregisteredCell'"):
        rnn_class.from_config(dict(config))
    revived = [rnn_class.from_config(dict(config), custom_objects=custom)]
    with keras.saving.custom_object_scope(custom):
        revived.append(rnn_class.from_config(dict(config)))
    serialized = keras.saving.serialize_keras_object(rnn)
    revived.append(keras.saving.deserialize_keras_object(serialized, custom_objects=custom))
    for layer in revived:
        assert type(layer) is rnn_class and layer.get_config() == config
        cell = layer.cell.cell if rnn_class is ResettableRNN else layer.cell
        assert type(cell) is _UnregisteredCell and cell.units == 4
        layer.build(x.shape)
        layer.set_weights(rnn.get_weights())
        np.testing.assert_allclose(as_numpy(layer(x)), expected, atol=1e-6, rtol=0)

    model, path = keras.Sequential([keras.Input((T, F)), rnn]), tmp_path / "unregistered.keras"
    model.save(path)
    with pytest.raises(TypeError, match="Could not locate class '_UnregisteredCell'"):
        keras.saving.load_model(path)
    loaded = keras.saving.load_model(path, custom_objects=custom)
    assert type(loaded.layers[0]) is rnn_class
    np.testing.assert_allclose(as_numpy(loaded(x)), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("wrapper", ["associative", "before", "after", "after_alone"])
def test_a_loop_of_your_own_draws_the_masks_the_layers_draw_inside_dropout_masks(wrapper):
    # Each memory cell feeds its cell more than the step: [x; h], [x; context], [x; attention].
    gru = keras.layers.GRUCell(8, dropout=0.3, recurrent_dropout=0.3, seed=5)
    x, memory = RNG.normal(size=(4, 5, 3)), {"memory": RNG.normal(size=(4, 6, 2))}
    if wrapper == "associative":
        cell, memory = AssociativeMemoryCell(gru, num_copies=2), {}
    else:
        position, feeding = wrapper.split("_")[0], not wrapper.endswith("alone")
        cell = AttentionWrapper(gru, position=position, input_feeding=feeding)
    layer = (AttentionRNN if memory else ResettableRNN)(cell, return_sequences=True)
    seeds = as_numpy(gru.seed_generator.state)
    expected = as_numpy(layer(x, training=True, **memory))
    assert gru._dropout_mask is None  # forgotten after the call
    gru.seed_generator.state.assign(seeds)  # the same masks again
    states = [np.zeros((4, size)) for size in keras.tree.flatten(cell.state_size)]
    with dropout_masks(cell, x[:, 0]):
        for t in range(5):
            inner = dropout_masks(cell, x[:, 0]) if t == 2 else contextlib.nullcontext()
            with inner:  # a block inside the block keeps the outer masks after it
                output, states = cell(x[:, t], states, training=True, **memory)
            assert_close(output, expected[:, t], atol=1e-6)
    with pytest.raises(ValueError, match=r"'gru_cell\w*' .* dropout=0.3, recurrent_dropout=0.3"):
        cell(x[:, 0], states, training=True, **memory)  # the block's masks are forgotten
    pytest.raises(TypeError, dropout_masks(None, x[:, 0]).__enter__).match("a Keras RNN cell")
    unbuilt = keras.layers.GRUCell(3, dropout=0.3)
    pytest.raises(ValueError, dropout_masks(unbuilt, x[:, 0]).__enter__).match("must be built")
    with pytest.raises(ValueError, match="`step_inputs` must have rank 2"):
        dropout_masks(cell, x).__enter__()  # a sequence, not a step
