"""The heap caches' attention measures against the read equations in NumPy, and what
`CacheAttentionCallback` writes to TensorBoard."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.models.test_fill_last_word import small_model, token_batch
from tests.support import summary_events, summary_table, tensorflow_only
from tf_memlayers.callbacks.cache_attention_callback import (
    CacheAttentionCallback,
    cache_attention_by_index,
    cache_attention_on_entries,
)
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.models.fill_last_word import compile_fill_last_word_model
from tf_memlayers.models.heap_cache_model import HeapCacheModel

pytestmark = tensorflow_only(
    "HeapCacheModel writes its caches and the callback its summaries with TensorFlow"
)


def _cache_model(query, rng=None, cache_size=6, units=3):
    """States (width 4) are the inputs. With ``rng`` the layer's weights are drawn from
    U(-1, 1), far enough from zero that the attention weights differ from slot to slot; else
    the read's projection is 10 times the identity (and the cache 4 by 4)."""
    inputs = keras.Input((4,))
    cache_size, units = (cache_size, units) if rng else (4, 4)
    layer = HeapCacheAttention(cache_size, units, query=query, name="cache_attention")
    model = HeapCacheModel(inputs, layer(inputs))
    for weight in layer.trainable_weights if rng else ():
        weight.assign(rng.uniform(-1, 1, weight.shape))
    if not rng and query != "none":
        layer.query_kernel.assign(10 * np.eye(4, dtype="float32"))
    return model, layer


def _numpy_read_weights(layer, states):
    """The read's weights ``[batch, K]`` (``[K]`` for ``query="none"``) in float64 from the
    layer's equations: a softmax over the filled slots of the logits below, 0 on empty slots.

    none: ``v . tanh(W^T C_i)``; additive: ``v . tanh(W^T C_i + W_q^T h)``;
    dot: ``(W_q^T h) . (W_q^T C_i) / sqrt(A)``."""
    cache = np.asarray(layer.cache, np.float64)
    kernel = np.asarray(layer.cache_kernel, np.float64)
    score = np.asarray(layer.cache_score, np.float64)
    if layer.query == "none":
        logits = np.tanh(cache @ kernel) @ score
    else:
        states = np.asarray(states, np.float64)
        query = np.asarray(layer.query_kernel, np.float64)
        if layer.query == "additive":
            logits = np.tanh((cache @ kernel)[None] + (states @ query)[:, None]) @ score
        else:
            logits = (states @ query) @ (cache @ query).T / np.sqrt(layer.attention_units)
    filled = np.any(cache != 0, axis=-1)
    logits = np.where(filled, logits, -np.inf)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def test_dot_read_attends_to_the_matching_entry_and_the_weight_is_measured():
    entries = np.eye(4, dtype="float32")
    model, layer = _cache_model("dot")
    model.write_caches(entries)
    wanted = np.eye(4, dtype=bool)
    on_match = cache_attention_on_entries(model, layer, entries, entries, wanted)
    assert on_match.shape == (4,) and np.all(on_match > 0.99)
    # The paper's read is the same for every probe: 1/4 on the matching entry here.
    model, layer = _cache_model("none")
    model.write_caches(entries)
    layer.cache_kernel.assign(np.zeros((4, 4), "float32"))  # equal scores
    on_match = cache_attention_on_entries(model, layer, entries, entries, wanted)
    np.testing.assert_allclose(on_match, 0.25, rtol=1e-5)
    # Slots holding no listed entry count for nothing.
    model, layer = _cache_model("dot")
    model.write_caches(entries[:2])
    on_match = cache_attention_on_entries(model, layer, entries, entries[2:], wanted[:, 2:])
    np.testing.assert_allclose(on_match, 0.0, atol=1e-6)


@pytest.mark.parametrize("query", ["none", "additive", "dot"])
def test_weight_by_index_is_the_reads_weight_averaged_over_the_probes(query):
    rng = np.random.default_rng(6)
    model, layer = _cache_model(query, rng)
    model.write_caches(rng.normal(size=(4, 4)).astype("float32"))  # 4 of 6 slots filled
    probes = rng.normal(size=(5, 4)).astype("float32")
    weights = cache_attention_by_index(model, layer, probes)
    expected = _numpy_read_weights(layer, probes)
    if query != "none":
        expected = expected.mean(axis=0)
    assert weights.shape == (6,) and weights.dtype == np.float64
    np.testing.assert_allclose(weights, expected, rtol=1e-5, atol=1e-7)
    assert np.count_nonzero(weights) == 4  # the empty slots take no weight


def test_weight_on_entries_is_each_probes_weight_on_the_slots_holding_its_wanted_entries():
    rng = np.random.default_rng(7)
    model, layer = _cache_model("additive", rng)
    entries = rng.normal(size=(5, 4)).astype("float32")
    model.write_caches(entries)  # 5 of 6 slots, in the heap's order
    probes = rng.normal(size=(3, 4)).astype("float32")
    wanted = np.array([[1, 0, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 1]], bool)
    got = cache_attention_on_entries(model, layer, probes, entries, wanted)
    alpha = np.broadcast_to(_numpy_read_weights(layer, probes), (3, 6))
    cache = layer.cache.numpy()
    expected = np.zeros(3)
    for slot in range(6):
        # The cache holds the entries' float32 values as they are.
        held = np.flatnonzero(np.all(entries == cache[slot], axis=-1))
        assert len(held) == (1 if cache[slot].any() else 0)
        if len(held):
            expected += alpha[:, slot] * wanted[:, held[0]]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert got[1] == 0.0


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
    rng = np.random.default_rng(2)
    model = small_model(pooling="last", cache_size=16, query="dot")
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
    assert [_fill(value) for _, value in events["cache_fill/cache_attention"]] == pytest.approx(
        [11 / 12] * 2
    )
    image = tf.make_ndarray(events["cache_attention/cache_attention"][-1][1].tensor)
    assert tf.io.decode_png(image[2]).numpy().shape[2] in (3, 4)  # [width, height, PNG]
    _check_top_slots(events, _numpy_read_weights(layer, None))
