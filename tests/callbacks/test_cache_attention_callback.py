"""The heap caches' attention measures against the read equations in NumPy, and what
`CacheAttentionCallback` writes to TensorBoard."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import heap_reference as ref
from tests.last_word_models import small_model, token_batch
from tests.support import summary_events, summary_table, tensorflow_only
from tf_memlayers.callbacks.cache_attention_callback import (
    CacheAttentionCallback,
    cache_attention_by_index,
)
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.models.fill_last_word import compile_fill_last_word_model
from tf_memlayers.models.heap_cache_model import HeapCacheModel

pytestmark = tensorflow_only("the callback writes TensorBoard summaries")


def _cache_model(query, rng, cache_size=6, units=3):
    """States (width 4) are the inputs; the layer's weights are drawn from U(-1, 1), far enough
    from zero that the attention weights differ from slot to slot."""
    inputs = keras.Input((4,))
    layer = HeapCacheAttention(cache_size, units, query=query, name="cache_attention")
    model = HeapCacheModel(inputs, layer(inputs))
    for weight in layer.trainable_weights:
        weight.assign(rng.uniform(-1, 1, weight.shape))
    return model, layer


def _numpy_read_weights(layer, states):
    """The read's weights ``[batch, K]`` (``[K]`` for ``query="none"``) of the NumPy reference
    of the read (`heap_reference.read`) with the layer's weights, in float64."""
    weights = (layer.cache, layer.cache_kernel, layer.cache_score, layer.cache_gate)
    cache, kernel, score, gate = (np.asarray(v, np.float64) for v in weights)
    query = None if layer.query == "none" else np.asarray(layer.query_kernel, np.float64)
    states = np.zeros((1, layer.width)) if states is None else np.asarray(states, np.float64)
    _, alpha = ref.read(cache, states, kernel, score, gate, query, layer.mask_empty, layer.query)
    return alpha[0] if query is None else alpha


@pytest.mark.parametrize("query", ["none", "additive", "dot"])
def test_weight_by_index_is_the_reads_weight_of_each_slot_averaged_over_the_probes(query):
    rng = np.random.default_rng(7)
    model, layer = _cache_model(query, rng)
    model.write_caches(rng.normal(size=(5, 4)).astype("float32"))  # 5 of 6 slots
    probes = rng.normal(size=(3, 4)).astype("float32")
    alpha = np.broadcast_to(_numpy_read_weights(layer, probes), (3, 6))
    weights = cache_attention_by_index(model, layer, probes)
    assert weights.shape == (6,) and weights.dtype == np.float64
    np.testing.assert_allclose(weights, alpha.mean(axis=0), rtol=1e-5, atol=1e-7)
    assert np.count_nonzero(weights) == 5  # the empty slot takes no weight


def _check_top_slots(events, weights):
    """The written table: the ten heaviest slots, heaviest first, with their ``weights``."""
    rows, _, written = summary_table(events["cache_attention/cache_attention/top_slots"][-1][1])
    slots = [int(slot) for slot in rows]
    assert len(slots) == len(set(slots)) == 10
    np.testing.assert_allclose(written[:, 0], weights[slots], rtol=1e-3)
    assert sorted(weights, reverse=True)[:10] == pytest.approx(weights[slots].tolist(), rel=1e-3)


def _fill(value):
    return float(tf.make_ndarray(value.tensor))


def test_cache_callback_in_fit_writes_the_probes_weights_by_index_and_the_fill(tmp_path):
    rng, model = np.random.default_rng(2), small_model(pooling="last", cache_size=16, query="dot")
    compile_fill_last_word_model(model)
    x, y = token_batch(rng)
    callback = CacheAttentionCallback(str(tmp_path), probe_inputs=x)
    model.fit(x, y, epochs=1, batch_size=8, verbose=0, callbacks=[callback])
    layer = model.get_layer("cache_attention")
    # The read's weights averaged over the probes' states (the cache layer's inputs).
    expected = _numpy_read_weights(layer, keras.Model(model.inputs, layer.input)(x)).mean(axis=0)
    np.testing.assert_allclose(cache_attention_by_index(model, layer, x), expected, rtol=1e-4)
    events = summary_events(tmp_path / "cache")
    ((_, fill),) = events["cache_fill/cache_attention"]
    filled = int(np.any(layer.cache.numpy() != 0, axis=-1).sum())
    assert _fill(fill) == pytest.approx(filled / layer.cache_size)
    _check_top_slots(events, expected)
    with pytest.raises(ValueError, match="query='dot'.*probe_inputs"):
        cache_attention_by_index(model, layer)
    with pytest.raises(ValueError, match=r"caches \['cache_attention'\] read with a query"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[CacheAttentionCallback(str(tmp_path))])
    assert int(model.optimizer.iterations) == 2  # refused before a step
    pytest.raises(TypeError, CacheAttentionCallback, None).match("`log_dir` must be a string or")


def test_cache_callback_writes_each_epochs_curve_top_slots_and_fill(tmp_path):
    rng = np.random.default_rng(8)
    model, layer = _cache_model("none", rng, cache_size=12)
    model.write_caches(rng.normal(size=(11, 4)).astype("float32"))  # 11 of 12 slots
    callback = CacheAttentionCallback(tmp_path)
    callback.set_model(model)
    callback.on_epoch_end(0)
    callback.on_epoch_end(1)
    callback.on_train_end()
    events = summary_events(tmp_path / "cache")
    for tag in ("cache_attention/cache_attention", "cache_fill/cache_attention"):
        assert [step for step, _ in events[tag]] == [0, 1], tag
    assert [step for step, _ in events["cache_attention/cache_attention/top_slots"]] == [0, 1]
    fills = [_fill(value) for _, value in events["cache_fill/cache_attention"]]
    assert fills == pytest.approx([11 / 12] * 2)
    image = tf.make_ndarray(events["cache_attention/cache_attention"][-1][1].tensor)
    assert tf.io.decode_png(image[2]).numpy().shape[2] in (3, 4)  # [width, height, PNG]
    _check_top_slots(events, _numpy_read_weights(layer, None))
    callback.set_model(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]))
    with pytest.raises(ValueError, match="the model has no HeapCacheAttention layer"):
        callback.on_train_begin()
