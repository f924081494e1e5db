"""HeapCacheModel: the cache write inside `fit` (eager, compiled) on every backend, and its
persistence."""

import keras
import numpy as np
import pytest

from tests import heap_reference as ref
from tests.support import BACKEND, as_numpy, tensorflow_only
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.models._compiling import compile_and_build_optimizer
from tf_memlayers.models.heap_cache_model import HeapCacheModel

FEATURES, WIDTH, CLASSES = 5, 6, 3


def build_model(cache_size=7, policy="heap", query="none", weight_decay=0.0):
    inputs = keras.Input((FEATURES,))
    states = keras.layers.Dense(WIDTH, activation="tanh", name="encoder")(inputs)
    read = HeapCacheAttention(cache_size, 4, policy=policy, query=query, name="cache")(states)
    outputs = keras.layers.Dense(CLASSES, name="logits")(read)
    return HeapCacheModel(inputs, outputs, weight_decay=weight_decay)


def compile_model(model, jit_compile=False, learning_rate=0.05):
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.Adam(learning_rate)
    compile_and_build_optimizer(model, optimizer, loss, jit_compile=jit_compile)
    return model


def data(rng, count):
    return rng.normal(size=(count, FEATURES)).astype("float32"), rng.integers(0, CLASSES, count)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_training_step_writes_like_the_reference(jit_compile):
    rng, model = np.random.default_rng(0), compile_model(build_model(), jit_compile)
    expected = np.zeros((7, WIDTH))
    for _ in range(4):
        x, y = data(rng, 8)
        before = as_numpy(model.get_layer("encoder").kernel)
        model.train_on_batch(x, y)
        # The write must use the states under the weights this step has just updated.
        assert not np.array_equal(before, as_numpy(model.get_layer("encoder").kernel))
        # The reference write: the states and W_c, v_c under the updated weights.
        layer = model.get_layer("cache")
        weights = (model.get_layer("encoder")(x), layer.cache_kernel, layer.cache_score)
        ref.insert_batch(expected, *(as_numpy(w).astype(np.float64) for w in weights))
        np.testing.assert_allclose(as_numpy(layer.cache), expected, atol=1e-6)
    assert np.all(np.any(expected != 0, axis=-1))


def test_two_caches_each_take_their_own_layers_states():
    inputs = keras.Input((FEATURES,))
    states = [keras.layers.Dense(WIDTH, name=f"states_{i}")(inputs) for i in range(2)]
    reads = [HeapCacheAttention(8, 4, policy="topk")(state) for state in states]
    outputs = keras.layers.Dense(CLASSES)(keras.layers.Concatenate()(reads))
    model = compile_model(HeapCacheModel(inputs, outputs))
    x, y = data(np.random.default_rng(5), 8)
    model.train_on_batch(x, y)
    for i, cache in enumerate(model.cache_layers):  # all 8 states enter each cache
        states = np.sort(as_numpy(model.get_layer(f"states_{i}")(x)), axis=0)
        np.testing.assert_allclose(np.sort(as_numpy(cache.cache), axis=0), states, atol=1e-6)


def test_only_fit_writes_and_keras_file_and_weights_restore_the_cache(tmp_path):
    # (The default query's round trip, in the last-word model: test_builders_on_every_backend.py.)
    rng = np.random.default_rng(1)
    model = compile_model(build_model(64, "topk", query="additive", weight_decay=1e-4))
    layer = model.get_layer("cache")
    x, y = data(rng, 24)
    model.predict(x, verbose=0)
    model.evaluate(x, y, verbose=0)
    model(x, training=True)
    assert int(layer.fill_count()) == 0
    model.fit([x], y, batch_size=8, epochs=1, verbose=0)  # its one input in a list, as Keras's
    assert int(layer.fill_count()) == 24
    assert not any(w is layer.cache for w in model.trainable_weights)
    saved = as_numpy(layer.cache)
    model.evaluate(x, y, verbose=0)
    model.save(str(tmp_path / "model.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert isinstance(loaded, HeapCacheModel) and loaded.weight_decay == 1e-4
    again = HeapCacheModel(model.inputs, model.outputs, weight_decay=0.5)  # its layers' own kept
    assert {w.regularizer.coefficient for w in again.trainable_weights} == {1e-4}
    np.testing.assert_array_equal(as_numpy(loaded.get_layer("cache").cache), saved)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    np.testing.assert_array_equal(as_numpy(layer.cache), saved)  # evaluate, predict: no write
    assert loaded.get_layer("cache").get_config() == layer.get_config()
    # (A run's backups restore it too: examples/fill_last_word/main_test.py.)
    model.save_weights(str(tmp_path / "model.weights.h5"))
    layer.insert(rng.normal(size=(20, WIDTH)).astype("float32") * 10)
    assert not np.array_equal(as_numpy(layer.cache), saved)
    layer.reset_cache()
    assert int(layer.fill_count()) == 0
    model.load_weights(str(tmp_path / "model.weights.h5"))
    np.testing.assert_array_equal(as_numpy(layer.cache), saved)


def test_a_cache_the_write_cannot_recompute_is_refused_and_mixed_precision_writes_float32():
    inputs = keras.Input((FEATURES,))
    states = keras.layers.Dense(WIDTH)(inputs)
    inner_inputs = keras.Input((WIDTH,))  # a nested model: its inputs not the outer graph's
    inner = keras.Model(inner_inputs, HeapCacheAttention(7, 4, name="nested_cache")(inner_inputs))
    with pytest.raises(ValueError, match=r"\['nested_cache'\] are inside a nested model"):
        HeapCacheModel(inputs, inner(states))
    cache = HeapCacheAttention(7, 4, name="elsewhere")
    keras.Model(inner_inputs, cache(inner_inputs))  # its first call, in another graph
    with pytest.raises(ValueError, match=r"one of \['elsewhere'\] was first called in another"):
        HeapCacheModel(inputs, cache(states))
    tokens = keras.Input((3, FEATURES), batch_size=2)  # after a stateful layer
    lstm = keras.layers.LSTM(WIDTH, stateful=True, name="carried")
    with pytest.raises(ValueError, match=r"the stateful layers \['carried'\] compute"):
        HeapCacheModel(tokens, HeapCacheAttention(7, 4)(lstm(tokens)))
    # Mixed precision training writes a float32 cache.
    keras.config.set_dtype_policy("mixed_float16")
    rng = np.random.default_rng(4)
    # Compiled (torch.compile, which takes seconds on a CPU, in the reference test alone).
    model = compile_model(build_model(cache_size=8, query="additive"), BACKEND != "torch")
    x, y = data(rng, 16)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    layer = model.get_layer("cache")
    assert layer.cache.dtype == "float32" and int(layer.fill_count()) == 8
    outputs = layer(keras.ops.cast(model.get_layer("encoder")(x), "float16"))
    assert keras.backend.standardize_dtype(outputs.dtype) == "float16"
    assert np.all(np.isfinite(as_numpy(outputs)))


@tensorflow_only("tf.distribute strategies")
def test_xla_under_several_replicas_is_refused_before_any_step(monkeypatch):
    # A stand-in strategy: two replicas in one process need devices set before TensorFlow
    # starts. (Identical caches on two workers: examples/fill_last_word/main_test.py.)
    class MirroredStrategy:
        num_replicas_in_sync = 2

    model = compile_model(build_model(), jit_compile=True)
    monkeypatch.setattr(model, "_distribute_strategy", MirroredStrategy())
    for make in (model.make_train_function, model.make_test_function, model.make_predict_function):
        message = str(pytest.raises(ValueError, make, force=True).value)
        assert "jit_compile=True is not supported under MirroredStrategy with 2 replicas" in message
        assert "cannot access the variable copies" in message
