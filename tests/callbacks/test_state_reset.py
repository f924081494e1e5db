"""The state resets of stateful language models (`tf_memlayers.callbacks.state_reset`): which
layers carry state (nested models included) and in which variables; clearing all of them or
only the selected rows, the others left exactly as they were; a language model restarted in
one row computing that row from scratch; and when `StateResetCallback` clears what, in
training, evaluation and prediction."""

import keras
import numpy as np
import pytest

from examples.language_modeling.memories import language_model
from tests.models.test_language_model import SMALL, VOCAB
from tf_memlayers.callbacks.state_reset import (
    StateResetCallback,
    reset_language_model_states,
    state_variables,
    stateful_layers,
)
from tf_memlayers.models.weight_transfer import copy_trainable_weights

BATCH = 3


def _tokens(batch, time, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, time)).astype("int32")


def _model(kind, **overrides):
    kwargs = dict(SMALL, kind=kind, batch_size=2, seq_len=5)
    kwargs.update(overrides)
    return language_model(VOCAB, **kwargs)


def _nested_stateful_model():
    """A stateful LSTM, then a nested model with a stateful GRU, then a stateless GRU."""
    inputs = keras.Input(batch_shape=(BATCH, 4, 2))
    x = keras.layers.LSTM(2, stateful=True, return_sequences=True, name="outer_lstm")(inputs)
    inner_inputs = keras.Input(batch_shape=(BATCH, 4, 2))
    inner = keras.layers.GRU(2, stateful=True, return_sequences=True, name="inner_gru")
    nested = keras.Model(inner_inputs, inner(inner_inputs), name="nested")
    outputs = keras.layers.GRU(2, name="stateless_gru")(nested(x))
    return keras.Model(inputs, outputs)


def _carried(model):
    """Every carried state of ``model``, as NumPy arrays."""
    return [v.numpy().copy() for layer in stateful_layers(model) for v in state_variables(layer)]


def _fill(model, seed):
    """Sets every carried state to values that are nowhere zero."""
    rng = np.random.default_rng(seed)
    for layer in stateful_layers(model):
        for variable in state_variables(layer):
            variable.assign(rng.uniform(1, 2, variable.shape).astype(variable.dtype))


def _cleared_rows(before, after):
    """The rows that every state has zero in ``after``; fails unless the other rows are as in
    ``before`` in every state."""
    cleared = np.all([np.all(a.reshape(BATCH, -1) == 0, axis=1) for a in after], axis=0)
    for old, new in zip(before, after):
        np.testing.assert_array_equal(new[~cleared], old[~cleared])
    return cleared.tolist()


def test_stateful_layers_are_found_in_nested_models_with_their_state_variables():
    model = _nested_stateful_model()
    found = stateful_layers(model)
    assert [layer.name for layer in found] == ["outer_lstm", "inner_gru"]
    lstm, gru = found
    # An LSTM carries h and c, a GRU h: each [batch, units].
    assert [tuple(v.shape) for v in state_variables(lstm)] == [(BATCH, 2), (BATCH, 2)]
    assert [tuple(v.shape) for v in state_variables(gru)] == [(BATCH, 2)]


def test_a_memory_layers_state_is_its_carried_memory():
    model = _model("attention")
    model(_tokens(2, 5))
    memory = model.get_layer("window_attention")
    assert memory in stateful_layers(model)
    (variable,) = state_variables(memory)
    assert variable is memory.memory


def test_reset_clears_every_state_or_only_the_selected_rows():
    model = _nested_stateful_model()
    _fill(model, 0)
    before = _carried(model)
    reset_language_model_states(model, rows=np.zeros(BATCH, bool))
    assert _cleared_rows(before, _carried(model)) == [False, False, False]
    reset_language_model_states(model, rows=[True, False, True])
    assert _cleared_rows(before, _carried(model)) == [True, False, True]
    _fill(model, 1)
    reset_language_model_states(model)
    assert all(not state.any() for state in _carried(model))


def test_row_reset_restarts_only_the_selected_rows():
    model = _model("attention")
    fresh = _model("attention", stateful=False, batch_size=None, seq_len=None)
    copy_trainable_weights(model, fresh)
    x = _tokens(2, 10)
    model(x[:, :5])
    reset_language_model_states(model, rows=np.array([True, False]))
    second = model(x[:, 5:]).numpy()
    np.testing.assert_allclose(second[0], fresh(x[:1, 5:]).numpy()[0], atol=1e-5)
    np.testing.assert_allclose(second[1], fresh(x[1:])[0, 5:].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="`rows` has 3 entries"):
        reset_language_model_states(model, rows=np.array([True, False, True]))


@pytest.mark.parametrize("mode", ["train", "test", "predict"])
def test_the_callback_clears_everything_first_then_the_rows_of_each_batch(mode):
    model = _nested_stateful_model()
    resets = np.array(
        [[True, True, True], [False, False, False], [False, True, False], [True, False, True]]
    )
    if mode == "train":
        callback = StateResetCallback(train_resets=resets, eval_resets=~resets)
        begin, batch_begin = callback.on_epoch_begin, callback.on_train_batch_begin
    else:
        callback = StateResetCallback(train_resets=~resets, eval_resets=resets)
        begin = getattr(callback, f"on_{mode}_begin")
        batch_begin = getattr(callback, f"on_{mode}_batch_begin")
    callback.set_model(model)
    _fill(model, 2)
    if mode == "train":
        begin(0)
    else:
        begin()
    assert all(not state.any() for state in _carried(model))
    # Batch 0 starts from the cleared states; batches past the table clear nothing.
    for batch in range(6):
        _fill(model, 3 + batch)
        before = _carried(model)
        batch_begin(batch)
        expected = resets[batch].tolist() if 0 < batch < len(resets) else [False] * BATCH
        assert _cleared_rows(before, _carried(model)) == expected, batch


def test_without_reset_tables_only_the_starts_clear_the_states():
    model = _nested_stateful_model()
    callback = StateResetCallback()
    callback.set_model(model)
    _fill(model, 4)
    before = _carried(model)
    for hook in (
        callback.on_train_batch_begin,
        callback.on_test_batch_begin,
        callback.on_predict_batch_begin,
    ):
        hook(1)
    assert _cleared_rows(before, _carried(model)) == [False, False, False]
    callback.on_test_begin()
    assert all(not state.any() for state in _carried(model))


def test_a_bidirectional_layers_states_are_its_two_rnns_states():
    inputs = keras.Input(batch_shape=(2, 3, 4))
    layer = keras.layers.Bidirectional(keras.layers.GRU(5, stateful=True, dropout=0.1))
    model = keras.Model(inputs, layer(inputs))
    model(np.ones((2, 3, 4), "float32"))
    found = state_variables(layer)
    assert [v.path for v in found] == [
        v.path for v in layer.forward_layer.states + layer.backward_layer.states
    ]
    # The dropout's seeds are non-trainable variables too, but no state: a reset keeps them.
    seeds = [v for v in layer.non_trainable_variables if v.path not in {s.path for s in found}]
    assert seeds
    kept = [np.asarray(keras.ops.convert_to_numpy(v)) for v in seeds]
    reset_language_model_states(model)
    for variable in found:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), 0.0)
    for variable, value in zip(seeds, kept):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), value)


def test_another_stateful_layer_is_refused_naming_it():
    class Counter(keras.layers.Layer):
        stateful = True

    with pytest.raises(ValueError, match="`layer` 'counter' is a stateful Counter, whose carried"):
        state_variables(Counter(name="counter"))
