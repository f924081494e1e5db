"""`ResettableCell` and `ResettableRNN`: any Keras cell with in-graph per-row resets."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import (
    CELL_SPEC,
    INPUT_DIM,
    REFUSES_EMPTY,
    RNN_LAYER_FLAGS,
    RNN_MASKING,
    CellTests,
    LayerTestCase,
    ResetCellTests,
    ResetSequenceTests,
    rnn_case,
    user_rnn,
)
from tests.support import BACKEND, keras_lstm, tensorflow_only
from tf_memlayers import ResettableCell, ResettableRNN, SlidingWindowAttentionCell
from tf_memlayers.models._compiling import compile_and_build_optimizer


def _rnn_resettable(cell):
    """`ResettableRNN` over ``cell``, written as `user_rnn` writes `keras.layers.RNN`."""
    return ResettableRNN(
        cell, return_sequences=True, zero_output_for_mask=keras.backend.backend() != "tensorflow"
    )


class ResettableCellTest(CellTests, ResetCellTests, LayerTestCase):
    """The shared suites of `ResettableCell` (tests/layer_test_case.py)."""

    layer_cls = ResettableCell
    make = staticmethod(lambda **kw: ResettableCell(keras.layers.GRUCell(4), **kw))
    not_in = {
        "output_spec": CELL_SPEC,
        "nan_padding": RNN_MASKING,
        "flags": "has no boolean arguments",
    }
    cells = {
        "resettable_lstm": lambda dtype=None: ResettableCell(
            keras.layers.LSTMCell(6, dtype=dtype), dtype=dtype
        ),
    }
    keras_checks = {
        "rnn_resettable_lstm": rnn_case(cells["resettable_lstm"], 6, 3, 1),
    }
    journeys = {
        "ResettableCell": (
            "step",
            lambda e: user_rnn(ResettableCell(keras.layers.LSTMCell(8)), return_sequences=True)(e),
        ),
    }


class ResettableRNNTest(ResetSequenceTests, LayerTestCase):
    """The shared suites of `ResettableRNN` (tests/layer_test_case.py)."""

    layer_cls = ResettableRNN
    make = staticmethod(lambda **kw: ResettableRNN(keras.layers.GRUCell(4), **kw))
    flags = RNN_LAYER_FLAGS[1:]
    not_in = {
        "empty": REFUSES_EMPTY,
        "nan_padding": "keras.layers.RNN's masking, which promises nothing about NaN",
    }
    keras_checks = {
        "resettable_rnn": (
            lambda **kw: ResettableRNN(
                keras.layers.LSTMCell(5, dtype=kw.get("dtype")), return_sequences=True, **kw
            ),
            {},
            dict(
                input_shape=(2, 3, INPUT_DIM),
                expected_output_shape=(2, 3, 5),
                expected_num_trainable_weights=3,
                expected_num_seed_generators=1,
                supports_masking=True,
            ),
        ),
        "resettable_rnn_window_cell": (
            lambda **kw: ResettableRNN(
                SlidingWindowAttentionCell(
                    keras.layers.LSTMCell(6, dtype=kw.get("dtype")),
                    window=2,
                    mode="key_value",
                    dtype=kw.get("dtype"),
                ),
                return_state=True,
                **kw,
            ),
            {},
            dict(
                input_shape=(2, 3, INPUT_DIM),
                expected_output_shape=((2, 3), (2, 6), (2, 6), (2, 2 * 7)),
                expected_num_trainable_weights=3 + 5,
                expected_num_seed_generators=1,
                supports_masking=True,
            ),
        ),
    }
    journeys = {
        "ResettableRNN": (
            "step",
            lambda e: _rnn_resettable(keras.layers.LSTMCell(8))(e),
        ),
    }
    output_spec = {
        "resettable_rnn": (
            lambda dtype: ResettableRNN(
                keras.layers.GRUCell(5, dtype=dtype), return_sequences=True, dtype=dtype
            ),
            (2, 5, 4),
            {},
        ),
        "resettable_rnn_state": (
            lambda dtype: ResettableRNN(
                keras.layers.LSTMCell(5, dtype=dtype), return_state=True, dtype=dtype
            ),
            (2, 5, 4),
            {},
        ),
    }


RNG = np.random.default_rng(3)
B, T, F = 3, 10, 5


def _resets():
    reset = np.zeros((B, T), bool)
    reset[0, [2, 6]] = True
    reset[1, 0] = True
    return reset


def _documents(reset, row):
    starts = sorted({0, *np.flatnonzero(reset[row])})
    return list(zip(starts, [*starts[1:], reset.shape[1]]))


CELLS = {
    "lstm": lambda: keras.layers.LSTMCell(4),
    "gru": lambda: keras.layers.GRUCell(4),
    "stacked": lambda: keras.layers.StackedRNNCells(
        [keras.layers.LSTMCell(3), keras.layers.GRUCell(4)]
    ),
}


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("unroll", [False, True])
def test_packed_documents_equal_separate_runs(float64_policy, name, unroll):
    rnn = ResettableRNN(CELLS[name](), return_sequences=True, return_state=True, unroll=unroll)
    x = RNG.normal(size=(B, T, F))
    reset = _resets()
    outputs, *states = rnn(x, reset=reset)
    for row in range(B):
        for start, stop in _documents(reset, row):
            alone, *alone_states = rnn(x[row : row + 1, start:stop])
            np.testing.assert_allclose(
                np.asarray(outputs)[row, start:stop], np.asarray(alone)[0], atol=1e-12, rtol=0
            )
        for state, alone_state in zip(keras.tree.flatten(states), keras.tree.flatten(alone_states)):
            np.testing.assert_allclose(
                np.asarray(state)[row], np.asarray(alone_state)[0], atol=1e-12, rtol=0
            )


def test_without_reset_it_is_keras_rnn_and_lstm(float64_policy):
    x = RNG.normal(size=(B, T, F))
    rnn = ResettableRNN(keras.layers.LSTMCell(4), return_sequences=True)
    lstm = keras_lstm(4, return_sequences=True)
    lstm.build(x.shape)
    rnn.build(x.shape)
    rnn.set_weights(lstm.get_weights())
    np.testing.assert_allclose(np.asarray(rnn(x)), np.asarray(lstm(x)), atol=1e-12, rtol=0)
    # An all-false reset is the same computation through the reset loop.
    no_reset = np.zeros((B, T), bool)
    np.testing.assert_allclose(
        np.asarray(rnn(x, reset=no_reset)), np.asarray(lstm(x)), atol=1e-12, rtol=0
    )


def test_masks_with_resets_keep_states_over_padding(float64_policy):
    x = RNG.normal(size=(B, T, F))
    reset = _resets()
    mask = np.ones((B, T), bool)
    mask[0, [2, 4]] = False  # the reset at the masked step 2 is ignored
    mask[2, 7:] = False
    rnn = ResettableRNN(keras.layers.GRUCell(4), return_sequences=True, zero_output_for_mask=True)
    outputs = np.asarray(rnn(x, mask=mask, reset=reset))
    # Row 0: the documents of valid steps are [0, 1, 3, 5] (no reset at 2) and [6 ..].
    kept = [0, 1, 3, 5]
    first = np.asarray(rnn(x[:1, kept]))[0]
    np.testing.assert_allclose(outputs[0, kept], first, atol=1e-12, rtol=0)
    np.testing.assert_allclose(outputs[0, 6:], np.asarray(rnn(x[:1, 6:]))[0], atol=1e-12)
    assert np.all(outputs[0, [2, 4]] == 0) and np.all(outputs[2, 7:] == 0)


def test_initial_state_is_forgotten_at_a_reset_only(float64_policy):
    x = RNG.normal(size=(B, T, F))
    rnn = ResettableRNN(keras.layers.LSTMCell(4), return_sequences=True)
    initial = [RNG.normal(size=(B, 4)), RNG.normal(size=(B, 4))]
    reset = np.zeros((B, T), bool)
    reset[0, 0] = True
    outputs = np.asarray(rnn(x, initial_state=initial, reset=reset))
    np.testing.assert_allclose(outputs[0], np.asarray(rnn(x[:1]))[0], atol=1e-12)
    np.testing.assert_allclose(
        outputs[1:], np.asarray(rnn(x, initial_state=initial))[1:], atol=1e-12
    )


def test_stateful_segments_with_resets_equal_one_run(float64_policy):
    x = RNG.normal(size=(B, T, F))
    reset = _resets()
    whole = ResettableRNN(keras.layers.LSTMCell(4), return_sequences=True)
    expected = np.asarray(whole(x, reset=reset))
    stateful = ResettableRNN(keras.layers.LSTMCell(4), return_sequences=True, stateful=True)
    stateful.build((B, None, F))
    stateful.set_weights(whole.get_weights())
    parts = [stateful(x[:, a:b], reset=reset[:, a:b]) for a, b in ((0, 4), (4, 7), (7, T))]
    np.testing.assert_allclose(
        np.concatenate([np.asarray(p) for p in parts], axis=1), expected, atol=1e-12, rtol=0
    )


def _model():
    """A language model over a stack of an LSTM and a GRU cell with dropout on their inputs
    and states, and its cells."""
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    reset = keras.Input((None,), dtype="bool", name="reset")
    embedded = keras.layers.Embedding(20, 6, mask_zero=True)(tokens)
    cells = [
        keras.layers.LSTMCell(8, dropout=0.3, recurrent_dropout=0.3),
        keras.layers.GRUCell(4, dropout=0.3, recurrent_dropout=0.3),
    ]
    features = ResettableRNN(cells, return_sequences=True)(embedded, reset=reset)
    logits = keras.layers.Dense(20)(features)
    return keras.Model({"tokens": tokens, "reset": reset}, logits), cells


def _data(batch=7, steps=6):
    tokens = RNG.integers(1, 20, size=(batch, steps)).astype("int32")
    tokens[0, -2:] = 0
    reset = RNG.random((batch, steps)) < 0.3
    targets = RNG.integers(0, 20, size=(batch, steps)).astype("int32")
    return {"tokens": tokens, "reset": reset}, targets


def test_stacked_dropout_cells_fit_on_a_partial_last_batch_and_round_trip(tmp_path):
    model, cells = _model()
    # Compiled (XLA; a traced scan on JAX): keras.layers.RNN draws each dropout cell's masks
    # before its loop, where a mask drawn by the loop itself would escape it.
    compile_and_build_optimizer(
        model,
        "adam",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=BACKEND != "torch",
    )
    inputs, targets = _data()
    history = model.fit(inputs, targets, batch_size=3, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    # The masks are drawn once per call and dropped after it; in training the same call twice
    # differs.
    assert all(c._dropout_mask is None and c._recurrent_dropout_mask is None for c in cells)
    first, second = (np.asarray(model(inputs, training=True)) for _ in range(2))
    assert not np.allclose(first, second)
    expected = model.predict(inputs, verbose=0)
    path = tmp_path / "resettable.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), expected, atol=1e-6)
    # The reset reaches the loop: other resets give other outputs.
    flipped = dict(inputs, reset=~inputs["reset"])
    assert not np.allclose(loaded.predict(flipped, verbose=0), expected, atol=1e-4)


def test_mixed_float16_matches_float32():
    x = RNG.normal(size=(B, T, F)).astype("float32")
    reset = _resets()
    rnn = ResettableRNN(keras.layers.GRUCell(4), return_sequences=True)
    expected = np.asarray(rnn(x, reset=reset))
    half = ResettableRNN(
        keras.layers.GRUCell(4, dtype="mixed_float16"), return_sequences=True, dtype="mixed_float16"
    )
    half.build(x.shape)
    half.set_weights(rnn.get_weights())
    np.testing.assert_allclose(
        np.asarray(half(x, reset=reset)).astype("float32"), expected, atol=1e-2
    )


@tensorflow_only("exports a SavedModel")
def test_export_keeps_the_reset_input(tmp_path):
    import tensorflow as tf

    model, _ = _model()
    inputs, _ = _data()
    expected = model.predict(inputs, verbose=0)
    model.export(str(tmp_path / "served"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "served"))
    outputs = served.serve(
        {"tokens": tf.constant(inputs["tokens"]), "reset": tf.constant(inputs["reset"])}
    )
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)


def test_cells_without_reset_are_wrapped_and_configs_round_trip():
    rnn = ResettableRNN(keras.layers.GRUCell(4), return_sequences=True)
    assert isinstance(rnn.cell, ResettableCell)
    again = ResettableRNN.from_config(rnn.get_config())
    assert isinstance(again.cell, ResettableCell)
    assert isinstance(again.cell.cell, keras.layers.GRUCell)
    assert again.return_sequences
    cell = ResettableCell(keras.layers.LSTMCell(3), name="wrapped")
    clone = ResettableCell.from_config(cell.get_config())
    assert clone.name == "wrapped" and clone.cell.units == 3
    assert clone.state_size == cell.cell.state_size


def test_a_non_cell_is_refused():
    with pytest.raises(TypeError, match="ResettableCell: `cell` must be a Keras RNN cell"):
        ResettableCell(keras.layers.Dense(3))


@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_a_list_of_cells_is_stacked_and_every_cell_restarts_at_a_reset(unroll, masked):
    cells = [keras.layers.LSTMCell(3), keras.layers.GRUCell(4)]
    rnn = ResettableRNN(
        cells, return_sequences=True, return_state=True, unroll=unroll, zero_output_for_mask=True
    )
    stack = rnn.cell.cell
    assert isinstance(rnn.cell, ResettableCell)
    assert isinstance(stack, keras.layers.StackedRNNCells) and stack.cells == cells
    x = RNG.normal(size=(B, T, F)).astype("float32")
    reset = _resets()
    mask = np.ones((B, T), bool)
    if masked:
        mask[2, 7:] = False
    outputs, *states = rnn(x, reset=reset, mask=mask)
    assert len(states) == 2  # one entry a cell, as keras.layers.RNN returns a stack's states
    # The reference: the same stacked cells under keras.layers.RNN, on each document alone.
    alone_rnn = keras.layers.RNN(stack, return_sequences=True, return_state=True)
    for row in range(B):
        for start, stop in _documents(reset, row):
            stop = min(stop, int(mask[row].sum()))
            alone, *alone_states = alone_rnn(x[row : row + 1, start:stop])
            np.testing.assert_allclose(
                np.asarray(outputs)[row, start:stop], np.asarray(alone)[0], atol=1e-6, rtol=0
            )
        # The states of every cell of the stack are those of the row's last document alone.
        for state, alone_state in zip(keras.tree.flatten(states), keras.tree.flatten(alone_states)):
            np.testing.assert_allclose(
                np.asarray(state)[row], np.asarray(alone_state)[0], atol=1e-6, rtol=0
            )


def test_a_list_of_cells_gives_keras_rnn_outputs_and_config():
    x = RNG.normal(size=(B, T, F)).astype("float32")
    rnn = ResettableRNN([keras.layers.LSTMCell(3), keras.layers.GRUCell(4)], return_state=True)
    stacked = keras.layers.RNN(
        [keras.layers.LSTMCell(3), keras.layers.GRUCell(4)], return_state=True
    )
    stacked.build(x.shape)
    rnn.build(x.shape)
    rnn.set_weights(stacked.get_weights())
    for got, expected in zip(keras.tree.flatten(rnn(x)), keras.tree.flatten(stacked(x))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-6, rtol=0)
    again = ResettableRNN.from_config(rnn.get_config())
    assert isinstance(again.cell.cell, keras.layers.StackedRNNCells)
    assert [type(c) for c in again.cell.cell.cells] == [keras.layers.LSTMCell, keras.layers.GRUCell]


class _UnregisteredCell(keras.layers.Layer):
    """A two-state cell that is not registered for Keras serialization."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units, units]
        self.output_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent = self.add_weight(shape=(self.units, self.units), name="recurrent")

    def call(self, inputs, states):
        first = keras.ops.tanh(inputs @ self.kernel + states[0] @ self.recurrent)
        return first, [first, states[1] + first]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@pytest.mark.parametrize(
    "rnn_class", [keras.layers.RNN, ResettableRNN], ids=["keras_rnn", "resettable_rnn"]
)
def test_an_unregistered_cell_round_trips_with_custom_objects(tmp_path, rnn_class):
    # ResettableRNN round-trips a cell Keras cannot name by itself as keras.layers.RNN does:
    # given the class in `custom_objects`, through its config and through a .keras file.
    custom = {"_UnregisteredCell": _UnregisteredCell}
    x = RNG.normal(size=(B, T, F)).astype("float32")
    rnn = rnn_class(_UnregisteredCell(4), return_sequences=True, name="rnn")
    expected = np.asarray(rnn(x))
    config = rnn.get_config()
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
        np.testing.assert_allclose(np.asarray(layer(x)), expected, atol=1e-6, rtol=0)

    model = keras.Sequential([keras.Input((T, F)), rnn])
    path = tmp_path / "unregistered.keras"
    model.save(path)
    with pytest.raises(TypeError, match="Could not locate class '_UnregisteredCell'"):
        keras.saving.load_model(path)
    loaded = keras.saving.load_model(path, custom_objects=custom)
    assert type(loaded.layers[0]) is rnn_class
    np.testing.assert_allclose(np.asarray(loaded(x)), expected, atol=1e-6, rtol=0)
