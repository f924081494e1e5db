"""`reset_language_model_states`: which layers carry state in which variables, and clearing
all of them or some rows only."""

import keras
import numpy as np
import pytest

from tests.callbacks.test_state_reset_callback import (
    BATCH,
    _carried,
    _cleared_rows,
    _fill,
    _nested_stateful_model,
)
from tests.models.test_language_model import _model, _tokens
from tf_memlayers.callbacks.reset_language_model_states import (
    reset_language_model_states,
    state_variables,
    stateful_layers,
)
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights


def test_stateful_layers_and_bidirectional_states_are_found_and_reset_wholly_or_by_rows():
    model = _nested_stateful_model()
    found = stateful_layers(model)
    assert [layer.name for layer in found] == ["outer_lstm", "inner_gru"]
    lstm, gru = found
    # An LSTM carries h and c, a GRU h: each [batch, units].
    assert [tuple(v.shape) for v in state_variables(lstm)] == [(BATCH, 2), (BATCH, 2)]
    assert [tuple(v.shape) for v in state_variables(gru)] == [(BATCH, 2)]
    _fill(model, 0)
    before = _carried(model)
    reset_language_model_states(model, rows=np.zeros(BATCH, bool))
    assert _cleared_rows(before, _carried(model)) == [False, False, False]
    reset_language_model_states(model, rows=[True, False, True])
    assert _cleared_rows(before, _carried(model)) == [True, False, True]
    _fill(model, 1)
    reset_language_model_states(model)
    assert all(not state.any() for state in _carried(model))
    # A bidirectional layer's states are its two RNNs' states.
    inputs = keras.Input(batch_shape=(2, 3, 4))
    layer = keras.layers.Bidirectional(keras.layers.GRU(5, stateful=True, dropout=0.1))
    model = keras.Model(inputs, layer(inputs))
    model(np.ones((2, 3, 4), "float32"))
    found, both = state_variables(layer), layer.forward_layer.states + layer.backward_layer.states
    assert [v.path for v in found] == [v.path for v in both]
    # The dropout's seeds are non-trainable variables too, but no state: a reset keeps them.
    seeds = [v for v in layer.non_trainable_variables if v.path not in {s.path for s in found}]
    assert seeds
    kept = [np.asarray(keras.ops.convert_to_numpy(v)) for v in seeds]
    reset_language_model_states(model)
    for variable in found:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), 0.0)
    for variable, value in zip(seeds, kept):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), value)


def test_a_memory_layers_state_is_its_carried_memory_a_row_reset_restarts_it_others_refused():
    model = _model("attention")
    fresh = _model("attention", stateful=False, batch_size=None, sequence_length=None)
    copy_trainable_weights(model, fresh)
    x = _tokens(2, 10)
    model(x[:, :5])
    memory = model.get_layer("window_attention")
    assert memory in stateful_layers(model)
    (variable,) = state_variables(memory)
    assert variable is memory.memory
    reset_language_model_states(model, rows=np.array([True, False]))
    second = model(x[:, 5:]).numpy()
    np.testing.assert_allclose(second[0], fresh(x[:1, 5:]).numpy()[0], atol=1e-5)
    np.testing.assert_allclose(second[1], fresh(x[1:])[0, 5:].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="`rows` has 3 entries"):
        reset_language_model_states(model, rows=np.zeros(3, bool))
    for rows in ([0, 1], True):  # row indices, a scalar: not a mask
        with pytest.raises(TypeError, match="`rows` must be a boolean vector"):
            reset_language_model_states(model, rows=rows)

    # Another stateful layer's carried state is unknown: refused, naming the layer.
    class Counter(keras.layers.Layer):
        stateful = True

    with pytest.raises(ValueError, match="`layer` 'counter' is a stateful Counter, whose carried"):
        state_variables(Counter(name="counter"))
