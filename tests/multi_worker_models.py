"""A small model trained by `examples.harness.training.train` (tests/examples/test_multi_worker.py
compares its custom loop with `fit`).
"""

import keras
import numpy as np
import tensorflow as tf

from examples.harness.training import train
from tf_memlayers.layers import AttentionPooling, HeapCacheAttention
from tf_memlayers.models import HeapCacheModel

CACHE_BATCH = 8


def weights_of(model):
    """``{variable path: value}`` of every weight of ``model`` (the caches included)."""
    return {w.path: np.asarray(w.numpy()) for w in model.weights}


def cache_data():
    rng = np.random.default_rng(3)
    x = rng.integers(1, 20, (4 * CACHE_BATCH, 6)).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, x[:, -1])).batch(CACHE_BATCH)


def train_cache_model(strategy):
    """A `HeapCacheModel` (GRU, `AttentionPooling`, `HeapCacheAttention`): its cache is
    written after every step with the global batch's states."""
    keras.utils.set_random_seed(11)
    with strategy.scope():
        tokens = keras.Input((6,), dtype="int32")
        states = keras.layers.GRU(8, return_sequences=True)(keras.layers.Embedding(20, 8)(tokens))
        state = AttentionPooling(4)(states)
        state = HeapCacheAttention(cache_size=8, attention_units=4, name="cache")(state)
        model = HeapCacheModel(tokens, keras.layers.Dense(20)(state))
        model.compile(
            keras.optimizers.Adam(0.01),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            # An object, not "accuracy": its variables exist before the train step is traced.
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=False,
        )
    history = train(model, cache_data(), epochs=1, verbose=0)
    fill = int(np.asarray(model.get_layer("cache").fill_count()))
    return weights_of(model), {"history": history.history, "fill": fill}
