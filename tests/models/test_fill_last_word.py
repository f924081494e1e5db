"""The last-word model builder's two modes, and how a model's caches are found. (Every backend:
test_builders_on_every_backend.py; bad arguments: test_bad_arguments.py.)"""

import keras
import numpy as np
import pytest

from tests.last_word_models import small_model, token_batch
from tf_memlayers.callbacks.cache_attention_callback import cache_attention_by_index
from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.models.fill_last_word import (
    build_fill_last_word_model,
    compile_fill_last_word_model,
    fill_last_word_optimizer,
)
from tf_memlayers.models.heap_cache_model import HeapCacheModel


def test_paper_mode_layers_and_names():
    model = small_model(pooling="attention", cache_size=12)
    assert isinstance(model.get_layer("pooling"), AttentionPooling)
    cache = model.get_layer("cache_attention")
    assert cache.mask_empty is True and cache.cache_size == 12
    assert model.get_layer("embedding").mask_zero is True
    # Left-padded masked contexts: cuDNN (right padding only) would refuse them on a GPU.
    assert model.get_layer("encoder").use_cudnn is False
    np.testing.assert_array_equal(model.get_layer("logits").bias.numpy(), 0.0)
    assert not any("norm" in layer.name for layer in model.layers)
    optimizer = fill_last_word_optimizer()
    assert float(optimizer.learning_rate) == pytest.approx(0.01) and optimizer.clipnorm == 5.0
    assert fill_last_word_optimizer(clipnorm=1.5).clipnorm == 1.5
    assert fill_last_word_optimizer(clipnorm=0).clipnorm is None  # 0: no clipping
    assert fill_last_word_optimizer(True, clipnorm=2).clipnorm == 2.0
    with pytest.warns(DeprecationWarning, match="`clip_norm` is deprecated") as caught:  # 0.2's
        assert compile_fill_last_word_model(model, clip_norm=2).optimizer.clipnorm == 2
        assert fill_last_word_optimizer(clip_norm=3).clipnorm == 3 and len(caught) == 2
    names = [layer.name for layer in model.layers]
    assert names == ["context", "embedding", "encoder", "pooling", "cache_attention", "logits"]
    # Without a pooling the LSTM's final state is the sentence's; the embedding takes GloVe vectors.
    matrix = np.random.default_rng(1).normal(size=(30, 6)).astype("float32")
    bare = small_model(embeddings=matrix)
    assert bare.cache_layers == [] and bare.get_layer("encoder").return_sequences is False
    np.testing.assert_array_equal(bare.get_layer("embedding").embeddings.numpy(), matrix)
    # The defaults: 40 context steps, 128 LSTM units, 100-wide word vectors from N(0, 0.9^2).
    default = build_fill_last_word_model(300)
    assert default.input_shape == (None, 40) and default.get_layer("encoder").units == 128
    vectors = default.get_layer("embedding").embeddings.numpy()
    assert vectors.shape == (300, 100) and np.std(vectors) == pytest.approx(0.9, rel=0.02)


def test_faithful_mode_sums_over_time_and_freezes_batch_norm():
    rng = np.random.default_rng(0)
    model = small_model(pooling="attention", cache_size=12, faithful_to_code=True)
    compile_fill_last_word_model(model, faithful_to_code=True)
    assert model.get_layer("embedding").mask_zero is False
    assert model.get_layer("encoder").use_cudnn == "auto"  # no mask: cuDNN on a GPU
    logits, limit = model.get_layer("logits"), np.sqrt(6 / (1 + 30))  # Glorot of [1, V]
    assert logits.bias_initializer.get_config() == dict(minval=-limit, maxval=limit, seed=None)
    assert 0 < np.abs(logits.bias.numpy()).max() <= limit
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-3)
    assert model.optimizer.clipnorm is None
    x, y = token_batch(rng)
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    logits = model.predict(x, verbose=0)  # the loss reads logits (no softmax in the model)
    want = -np.mean(keras.ops.convert_to_numpy(keras.ops.log_softmax(logits))[range(16), y])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.loss(y, logits)), want, 1e-5)
    for name in ("state_norm", "logits_norm"):
        norm = model.get_layer(name)
        np.testing.assert_array_equal(norm.moving_mean.numpy(), 0.0)
        np.testing.assert_array_equal(norm.moving_variance.numpy(), 1.0)
        assert np.any(norm.gamma.numpy() != 1.0)  # still trained
    # The "attention" is the plain sum of all 40 (here 10) LSTM outputs, padding included.
    norm = model.get_layer("state_norm")
    outputs = [model.get_layer(name).output for name in ("encoder", "pooling")] + [norm.output]
    encoded, summed, state = keras.Model(model.inputs, outputs).predict(x, verbose=0)
    np.testing.assert_allclose(summed, encoded.sum(axis=1), rtol=1e-5, atol=1e-5)
    affine = summed / np.sqrt(1 + 1e-3) * norm.gamma.numpy() + norm.beta.numpy()
    np.testing.assert_allclose(state, affine, rtol=1e-5, atol=1e-5)
    assert int(model.get_layer("cache_attention").fill_count()) > 0


def test_cache_layers_are_found_through_the_public_keras_api():
    import inspect

    from tf_memlayers.callbacks import cache_attention_callback
    from tf_memlayers.models import heap_cache_model

    for module in (cache_attention_callback, heap_cache_model):
        source = inspect.getsource(module)
        assert "._inputs_struct" not in source and "._flatten_layers" not in source
    # Caches at the top level, in a nested model and under a wrapper, each once, in order.
    first, second = keras.Input((3,), name="first"), keras.Input((3,), name="second")
    top, inner_input = HeapCacheAttention(4, 2, query="dot", name="top"), keras.Input((3,))
    inner = keras.Model(inner_input, HeapCacheAttention(4, 2, name="nested")(inner_input))
    model = keras.Model([first, second], keras.layers.Add()([top(first), inner(second)]))
    found = heap_cache_model.cache_attention_layers(model)
    assert [layer.name for layer in found] == ["top", "nested"]
    cached = HeapCacheModel([first, second], keras.layers.Add()([top(first), second]))
    assert cached.cache_layers == [top]
    wrapped = keras.layers.TimeDistributed(HeapCacheAttention(4, 2, name="wrapped"))
    sequence = keras.Input((5, 3))
    outer = keras.Model(sequence, wrapped(sequence))
    assert [layer.name for layer in heap_cache_model.cache_attention_layers(outer)] == ["wrapped"]
    # The probe reads the states a cache layer receives for inputs in the model's structure:
    # the query-dependent read of `first`'s rows, averaged over them.
    rng = np.random.default_rng(0)
    top.cache.assign(rng.normal(size=(4, 3)))
    x = [rng.normal(size=(5, 3)).astype("float32"), rng.normal(size=(5, 3)).astype("float32")]
    weights = cache_attention_by_index(model, top, probe_inputs=x)
    expected = np.asarray(top.attention_weights(x[0])).mean(axis=0)
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    assert not np.allclose(expected, np.asarray(top.attention_weights(x[1])).mean(axis=0))
