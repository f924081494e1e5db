"""`StateResetCallback`: when it clears what, in training, evaluation and prediction (the
resets themselves are tests/callbacks/test_reset_language_model_states.py's)."""

import keras
import numpy as np
import pytest

from tf_memlayers.callbacks.reset_language_model_states import state_variables, stateful_layers
from tf_memlayers.callbacks.state_reset_callback import StateResetCallback

BATCH = 3


def _nested_stateful_model():
    """A stateful LSTM, then a nested model with a stateful GRU, then a stateless GRU."""
    inputs = keras.Input(batch_shape=(BATCH, 4, 2))
    x = keras.layers.LSTM(2, stateful=True, return_sequences=True, name="outer_lstm")(inputs)
    inner_inputs = keras.Input(batch_shape=(BATCH, 4, 2))
    inner = keras.layers.GRU(2, stateful=True, return_sequences=True, name="inner_gru")
    nested = keras.Model(inner_inputs, inner(inner_inputs), name="nested")
    return keras.Model(inputs, keras.layers.GRU(2, name="stateless_gru")(nested(x)))


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


@pytest.mark.parametrize("mode", ["train", "test", "predict"])
def test_the_callback_clears_everything_first_then_the_rows_of_each_batch(mode):
    model = _nested_stateful_model()
    resets = np.array([[1, 1, 1], [0, 0, 0], [0, 1, 0], [1, 0, 1]], bool)
    # The other mode's table is the opposite, never read; without tables only the start resets.
    for tables in ((resets, ~resets) if mode == "train" else (~resets, resets), ()):
        callback = StateResetCallback(*tables)
        callback.set_model(model)
        _fill(model, 2)
        if mode == "train":
            callback.on_epoch_begin(0)
        else:
            getattr(callback, f"on_{mode}_begin")()
        assert all(not state.any() for state in _carried(model))
        # Batch 0 starts from the cleared states; a batch past the table is refused.
        for batch in range(5 if tables else 6):
            _fill(model, 3 + batch)
            before = _carried(model)
            if batch == len(resets) and tables:
                with pytest.raises(ValueError, match="resets for 4 batches; batch 4 has none"):
                    getattr(callback, f"on_{mode}_batch_begin")(batch)
                break
            getattr(callback, f"on_{mode}_batch_begin")(batch)
            expected = resets[batch].tolist() if tables and batch else [False] * BATCH
            assert _cleared_rows(before, _carried(model)) == expected, batch


@pytest.mark.parametrize("name", ["train_resets", "eval_resets"])
def test_bad_tables_are_named(name):
    with pytest.raises(ValueError, match=rf"`{name}` must be a boolean array .* shape \(4,\)"):
        StateResetCallback(**{name: np.ones(4, bool)})
    with pytest.raises(TypeError, match=rf"`{name}` must be a boolean array .* dtype int64"):
        StateResetCallback(**{name: np.ones((4, 2), np.int64)})  # 0s and 1s: not a mask
    callback = StateResetCallback(**{name: np.ones((4, 2), bool)})  # the model's batch is 3
    callback.set_model(_nested_stateful_model())
    on = "train" if name == "train_resets" else "test"
    with pytest.raises(ValueError, match=rf"`{name}\[1\]`: `rows` has 2 entries"):
        getattr(callback, f"on_{on}_batch_begin")(1)
    callback.model.compile("sgd", "mse", steps_per_execution=2)  # callbacks every 2 batches
    with pytest.raises(ValueError, match=f"`{name}` clears rows .* steps_per_execution=2"):
        getattr(callback, f"on_{on}_begin")()
    callback.model.compile("sgd", "mse")
    callback.set_params({"steps": 3})  # epochs of 3 batches would drift over the 4 rows
    if name == "train_resets":
        pytest.raises(ValueError, callback.on_train_begin).match("4 batches, but an epoch runs 3")
