import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_memlayers import AttentionPooling, HeapCacheAttention
from tf_memlayers.models import HeapCacheModel
from tf_memlayers.training import train
from tf_memlayers.training._custom_loop import train_with_custom_loop


def train_cache_model(train_function):
    """A `HeapCacheModel` (GRU, pooling, a cache) trained: its weights, history and cache fill."""
    keras.utils.set_random_seed(11)
    tokens = keras.Input((6,), dtype="int32")
    states = keras.layers.GRU(8, return_sequences=True)(keras.layers.Embedding(20, 8)(tokens))
    state = HeapCacheAttention(8, 4, name="cache")(AttentionPooling(4)(states))
    model = HeapCacheModel(tokens, keras.layers.Dense(20)(state))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # An object, not "accuracy": its variables exist before the train step is traced.
    accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    adam = keras.optimizers.Adam(0.01, use_ema=True)  # fit ends on the moving averages
    model.compile(adam, loss, metrics=[accuracy], jit_compile=False)
    x = np.random.default_rng(3).integers(1, 20, (30, 6)).astype("int32")
    data = tf.data.Dataset.from_tensor_slices((x, x[:, -1])).batch(8)
    # Epochs of 3 of the 4 batches: the second ends as the data does, the third starts it
    # again (as fit's, with Keras's warning); a stop after the third of 4.
    stop = keras.callbacks.EarlyStopping("loss", min_delta=1e9, patience=2)
    history = train_function(model, data, epochs=4, steps_per_epoch=3, callbacks=[stop], verbose=0)
    fill = int(np.asarray(model.get_layer("cache").fill_count()))
    return {w.path: np.asarray(w.numpy()) for w in model.weights}, history.history, fill


def test_custom_loop_in_one_process_matches_fit():
    """The loop's logs and weights equal fit's, for a `HeapCacheModel`: sparse embedding
    gradients, the cache written after each update, an accuracy metric, an EMA optimizer."""
    expected, expected_history, expected_fill = train_cache_model(train)  # fit, here
    keras.backend.clear_session()
    got, history, fill = train_cache_model(train_with_custom_loop)
    assert len(got) == len(expected) and np.abs(got["cache/cache"]).sum() > 0
    for (path, value), want in zip(got.items(), expected.values()):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6, err_msg=path)
    assert fill == expected_fill == 8 and len(history["loss"]) == 3
    for name, values in expected_history.items():
        np.testing.assert_allclose(history[name], values, rtol=1e-6, err_msg=name)


class PlainModel(keras.Model):  # a `call` without `training`, and no `Input`
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(3)

    def call(self, x):
        return self.dense(x)


class DoubledLoss(PlainModel):
    def compute_loss(self, *args, **kwargs):  # which the loop would not call
        return 2 * super().compute_loss(*args, **kwargs)

    def test_step(self, data):
        return super().test_step(data)


def test_models_the_loop_trains_as_fit_and_those_it_refuses_by_name():
    x = np.ones((4, 3), "float32")
    data = tf.data.Dataset.from_tensor_slices((x, x)).batch(2)
    plain, doubled, inputs = PlainModel(), DoubledLoss(), keras.Input((3,))
    two = keras.Model(inputs, [keras.layers.Dense(3)(inputs)] * 2)
    for model in (plain, doubled, two):
        model.compile("sgd", "mse")
    history = train_with_custom_loop(plain, data, epochs=2, verbose=0)  # steps: fit's, the data's
    assert len(history.history["loss"]) == 2 and history.params["steps"] == data.cardinality()
    backup = [keras.callbacks.BackupAndRestore("unused")]
    for model, kwargs, message in [
        (doubled, {}, "does not call DoubledLoss.compute_loss"),
        (doubled, {"validation_data": data}, "does not call DoubledLoss.test_step"),
        (two, {}, "models with one output; this one has 2"),
        (plain, {"callbacks": backup}, "BackupAndRestore resumes `fit` alone.*use .*RunBackup"),
    ]:
        with pytest.raises(NotImplementedError, match=message):
            train_with_custom_loop(model, data, verbose=0, **kwargs)
