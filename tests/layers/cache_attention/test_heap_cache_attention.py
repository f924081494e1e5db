"""HeapCacheAttention: the write rules and the read against NumPy references."""

import keras
import numpy as np
import pytest

from tests import heap_reference as ref
from tests.layer_test_case import LayerTestCase, dtype_policy
from tests.support import as_numpy, gradients, keras_lstm, tensorflow_only
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.ops import heap


def _fill_the_cache(model, rng):
    """Fills the cache before saving, so that the saved model has something to read."""
    cache = next(layer for layer in model.layers if isinstance(layer, HeapCacheAttention))
    cache.insert(rng.normal(size=(4, cache.width)).astype("float32"))
    assert int(cache.fill_count()) > 0


class HeapCacheAttentionTest(LayerTestCase):
    layer_cls = HeapCacheAttention

    def test_layer_behaviors(self):
        init_kwargs = {"cache_size": 3, "attention_units": 2, "query": "additive"}
        shapes = dict(input_shape=(2, 4), expected_output_shape=(2, 4), supports_masking=False)
        weights = dict(expected_num_trainable_weights=4, expected_num_non_trainable_weights=1)
        self.run_layer_test(HeapCacheAttention, init_kwargs, **shapes, **weights)

    def test_journey(self, tmp_path):
        build = lambda e: HeapCacheAttention(4, 3)(keras_lstm(8)(e))  # noqa: E731
        # XLA's training steps on TensorFlow, mixed precision too: test_heap_cache_model.py.
        fill = dict(before_saving=_fill_the_cache, xla_on_tensorflow=False)
        self.run_journey_test("pooled", build, tmp_path, **fill)

    def test_config_and_arguments(self):
        options = dict(attention_units=5, policy="topk", query="additive", mask_empty=False)
        initializers = dict(kernel_initializer="orthogonal", gate_initializer="zeros")
        config = dict(**options, **initializers, name="cache_read")
        self.run_config_test(HeapCacheAttention, cache_size=12, **config)
        self.run_flags_test(lambda **kw: HeapCacheAttention(4, 3, **kw))

    @pytest.mark.parametrize(
        "query, scores", [("none", False), ("none", True), ("additive", True), ("dot", True)]
    )
    def test_output_spec(self, query, scores):
        make = lambda dtype: HeapCacheAttention(3, 2, query=query, dtype=dtype)  # noqa: E731
        self.run_output_spec_test(make, (2, 4), return_attention_scores=scores)


WIDTH, UNITS = 6, 5  # 1/sqrt(5) is inexact in float32: the dot read must scale in float64


def make_layer(cache_size, **kwargs):
    layer = HeapCacheAttention(cache_size, UNITS, **kwargs)
    layer.build((None, WIDTH))
    return layer


def set_weights(layer, rng):
    layer.cache_kernel.assign(rng.normal(size=(WIDTH, UNITS)))
    layer.cache_score.assign(rng.normal(size=(UNITS,)))
    # What the layer holds (float32 rounding included) is what the reference uses.
    return (as_numpy(v).astype(np.float64) for v in (layer.cache_kernel, layer.cache_score))


def candidate_batches(rng, batches, batch_size, pool_size=None):
    """Random batches; with ``pool_size`` drawn from a small pool so equal scores occur."""
    if pool_size is None:
        return [rng.normal(size=(batch_size, WIDTH)) for _ in range(batches)]
    pool = rng.normal(size=(pool_size, WIDTH))
    pool[0] = 0.0  # an all-zero candidate scores -inf and never enters
    return [pool[rng.integers(0, pool_size, batch_size)] for _ in range(batches)]


@pytest.mark.parametrize("cache_size", [1, 7, 100])
@pytest.mark.parametrize("pool_size", [None, 5])
def test_heap_matches_reference_with_changing_weights(float64_policy, cache_size, pool_size):
    rng, layer = np.random.default_rng(cache_size * 10 + (pool_size or 0)), make_layer(cache_size)
    expected = np.zeros((cache_size, WIDTH))
    for batch in candidate_batches(rng, 12, 16, pool_size):
        kernel, score_vector = set_weights(layer, rng)  # the weights change between batches
        entered = as_numpy(layer.insert(batch))
        expected_entered = ref.insert_batch(expected, batch, kernel, score_vector)
        np.testing.assert_array_equal(as_numpy(layer.cache), expected)
        assert entered.tolist() == expected_entered
    assert np.any(expected != 0)


def test_rows_one_bit_apart_keep_their_own_scores(float64_policy):
    rng = np.random.default_rng(1)
    row = rng.normal(size=(1, WIDTH))
    pool = np.concatenate([row, np.nextafter(row, np.inf), row, -row])
    kernel, score_vector = rng.normal(size=(WIDTH, UNITS)), rng.normal(size=(UNITS,))
    scores = keras.ops.convert_to_numpy(heap.pool_scores(pool, kernel, score_vector))
    np.testing.assert_allclose(scores, np.tanh(pool @ kernel) @ score_vector, rtol=1e-13)
    assert scores[0] == scores[2] and scores[3] != scores[0]


@pytest.mark.parametrize("policy", ["heap", "topk"])
def test_many_repeated_candidates_in_a_large_float32_cache(policy):
    # Ties everywhere, in products large enough for position-dependent rounding.
    rng, width, layer = np.random.default_rng(7), 64, HeapCacheAttention(300, 32, policy=policy)
    layer.build((None, width))
    kernel, score_vector = as_numpy(layer.cache_kernel), as_numpy(layer.cache_score)
    weights64 = kernel.astype(np.float64), score_vector.astype(np.float64)
    pool, expected = rng.normal(size=(9, width)).astype("float32"), np.zeros((300, width))
    for _ in range(8):
        batch = pool[rng.integers(0, 9, 64)]
        entered = as_numpy(layer.insert(batch))
        if policy == "heap":
            want = ref.insert_batch(expected, batch.astype(np.float64), *weights64)
            assert entered.tolist() == want
            np.testing.assert_array_equal(as_numpy(layer.cache), expected.astype("float32"))
        else:  # the best 300 of what was kept and the batch, ties by position
            everything = np.concatenate([expected, batch.astype(np.float64)])
            scores = np.array([ref.score(v, *weights64) for v in everything])
            best = np.lexsort((np.arange(len(everything)), -scores))[:300]
            expected = everything[best[::-1]]  # weakest first
            rows = [tuple(r) for r in as_numpy(layer.cache)]
            assert rows == [tuple(r) for r in expected.astype("float32")]
    rows = {tuple(r) for r in as_numpy(layer.cache) if r.any()}
    assert rows <= {tuple(r) for r in pool}
    if policy == "topk":  # the 9 distinct vectors fill the cache, best copies first
        scores = keras.ops.convert_to_numpy(heap.pool_scores(layer.cache, kernel, score_vector))
        assert np.all(np.diff(scores) >= 0)
    # Layers of one shape share their policy's compiled write (XLA keeps each program).
    twin = HeapCacheAttention(300, 32, policy=policy)
    twin.build((None, width))
    assert twin._write() is layer._write()


@pytest.mark.parametrize("pool_size", [None, 5])
def test_topk_keeps_exactly_the_best(float64_policy, pool_size):
    # Ties (pool_size=5): the cache's entries win, then earlier candidates.
    rng, layer = np.random.default_rng(11), make_layer(4, policy="topk")
    for batch in candidate_batches(rng, 5, 8, pool_size):
        kernel, score_vector = set_weights(layer, rng)
        pool = np.concatenate([as_numpy(layer.cache), batch])
        entered = as_numpy(layer.insert(batch))
        scores = np.array([ref.score(v, kernel, score_vector) for v in pool])
        best = np.lexsort((np.arange(len(pool)), -scores))[:4]  # best first, ties by position
        np.testing.assert_array_equal(as_numpy(layer.cache), pool[best[::-1]])  # weakest first
        np.testing.assert_array_equal(entered, np.isin(np.arange(len(pool)), best)[-len(batch) :])
    assert np.all(np.diff([ref.score(v, kernel, score_vector) for v in as_numpy(layer.cache)]) >= 0)


@pytest.mark.parametrize(
    "query, mask_empty, dtype",
    [*((q, m, "float64") for q in ("none", "additive", "dot") for m in (True, False))]
    + [("additive", True, "float32")],
)
def test_read_matches_reference(query, mask_empty, dtype):
    rng = np.random.default_rng(5)
    with dtype_policy(dtype):
        layer = make_layer(9, query=query, mask_empty=mask_empty)
    cache = rng.normal(size=(9, WIDTH))
    cache[[0, 4]], cache[1, 0] = 0.0, 0.0  # two empty slots; a filled one holding a zero
    layer.cache.assign(cache)
    layer.cache_gate.assign(rng.normal(size=(WIDTH,)))
    kernel, score_vector = set_weights(layer, rng)
    if query != "none":
        layer.query_kernel.assign(rng.normal(size=(WIDTH, UNITS)))
    states = rng.normal(size=(3, WIDTH)).astype(dtype)
    states[1] = cache[2]  # the dot read must put most weight on a cached copy of the state
    outputs, weights = layer(states, return_attention_scores=True)
    # What the layer holds (in float32, rounded) is what the reference reads.
    cache, gate, query_kernel = (
        None if v is None else as_numpy(v).astype(np.float64)
        for v in (layer.cache, layer.cache_gate, None if query == "none" else layer.query_kernel)
    )
    args = (kernel, score_vector, gate, query_kernel, mask_empty, query)
    expected, expected_weights = ref.read(cache, states.astype(np.float64), *args)
    atol = 1e-10 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(as_numpy(outputs), expected, rtol=0, atol=atol)
    if query == "none":
        expected_weights = expected_weights[0]
    np.testing.assert_allclose(as_numpy(weights), expected_weights, rtol=0, atol=atol)
    assert np.all(as_numpy(weights)[..., 0] == 0) == mask_empty and int(layer.fill_count()) == 7
    if query == "dot":  # the state's own cached copy gets the most weight
        assert int(np.argmax(as_numpy(weights)[1])) == 2


def test_an_empty_cache_reads_nothing_calls_never_write_and_integers_are_read_as_numbers():
    layer = make_layer(4)
    states = np.random.default_rng(0).normal(size=(2, WIDTH)).astype("float32")
    for training in (True, False):
        np.testing.assert_array_equal(as_numpy(layer(states, training=training)), states)
    assert int(layer.fill_count()) == 0
    assert not as_numpy(layer(states, return_attention_scores=True)[1]).any()  # no weight
    # Integer states, read by a filled cache: not rounded back to the inputs.
    layer, states = make_layer(4), np.arange(2 * WIDTH).reshape(2, WIDTH)
    layer.insert(states.astype("float32"))
    read = as_numpy(layer(states.astype("float32")))
    np.testing.assert_array_equal(as_numpy(layer(states.astype("int32"))), read)


@pytest.mark.parametrize("query", ["additive", "dot"])
def test_gradient_reaches_weights_not_cache(query):
    layer = make_layer(4, query=query)
    layer.insert(np.random.default_rng(0).normal(size=(3, WIDTH)).astype("float32"))
    states = np.random.default_rng(1).normal(size=(2, WIDTH)).astype("float32")
    weights = [layer.cache_kernel, layer.cache_score, layer.cache_gate, layer.query_kernel]
    weights.append(layer.cache)  # (a weight the loss does not reach has zero gradients)
    _, grads, _ = gradients(lambda: keras.ops.sum(layer(states) ** 2), weights)
    assert all(np.any(g != 0) for g in (grads[:4] if query == "additive" else grads[2:4]))
    assert np.all(grads[4] == 0)
    if query == "dot":  # the order score's weights are not read, and not trainable
        assert np.all(grads[0] == 0) and np.all(grads[1] == 0)
        assert {w.name for w in layer.trainable_weights} == {"cache_gate", "query_kernel"}


@pytest.mark.parametrize("policy", ["heap", "topk"])
def test_non_finite_candidates_are_skipped_as_if_never_offered(float64_policy, policy):
    # As a twin layer offered only the finite candidates, and a finite read.
    rng = np.random.default_rng(13)
    layer, twin = make_layer(5, policy=policy), make_layer(5, policy=policy)
    twin.set_weights(layer.get_weights())
    for _ in range(6):
        batch, bad = rng.normal(size=(8, WIDTH)), rng.random(8) < 0.5
        for row in np.flatnonzero(bad):  # NaN or infinity in about half of the rows
            batch[row, rng.integers(0, WIDTH)] = rng.choice([np.nan, np.inf, -np.inf])
        set_weights(layer, rng)
        twin.set_weights(layer.get_weights())  # the new scoring weights (the caches are equal)
        entered = as_numpy(layer.insert(batch))
        assert not entered[bad].any()
        np.testing.assert_array_equal(entered[~bad], as_numpy(twin.insert(batch[~bad])))
        np.testing.assert_array_equal(as_numpy(layer.cache), as_numpy(twin.cache))
        assert np.isfinite(as_numpy(layer.cache)).all()
    assert int(layer.fill_count()) == 5  # the finite candidates filled the cache
    states = rng.normal(size=(3, WIDTH))
    np.testing.assert_array_equal(as_numpy(layer(states)), as_numpy(twin(states)))
    # A batch of nothing but non-finite candidates changes nothing, even a full cache's root.
    before = as_numpy(layer.cache).copy()
    entered = layer.insert(np.array([[np.nan] * WIDTH, [np.inf] * WIDTH, [-np.inf] * WIDTH]))
    assert not as_numpy(entered).any()
    np.testing.assert_array_equal(as_numpy(layer.cache), before)
    assert as_numpy(layer.insert(np.zeros((0, WIDTH)))).shape == (0,)  # nor does an empty one
    np.testing.assert_array_equal(as_numpy(layer.cache), before)


@tensorflow_only("inserts inside tf.function, as a compiled training step does")
@pytest.mark.parametrize("jit_compile", [False, True])
def test_non_finite_candidates_are_skipped_inside_tf_function(jit_compile):
    import tensorflow as tf

    layer = make_layer(3, policy="topk")
    insert = tf.function(layer.insert, jit_compile=jit_compile)
    batch = np.ones((4, WIDTH), "float32")
    batch[0, 0], batch[2, 1] = np.nan, np.inf
    assert as_numpy(insert(tf.constant(batch))).tolist() == [False, True, False, True]
    assert np.isfinite(as_numpy(layer.cache)).all() and int(layer.fill_count()) == 2


def test_the_first_candidate_lands_at_index_62_and_bad_candidates_are_refused():
    # The reference code's sift-down: empty slots tie at -inf, ties go to the child 2i+2 and a
    # missing child scores +inf: the first candidate sinks along 0, 2, 6, 14, 30, 62 (of 100).
    layer = make_layer(100)
    vector = np.random.default_rng(0).normal(size=(1, WIDTH)).astype("float32")
    assert as_numpy(layer.insert(vector)).tolist() == [True]
    assert np.flatnonzero(np.any(as_numpy(layer.cache) != 0, axis=-1)).tolist() == [62]
    np.testing.assert_array_equal(as_numpy(layer.cache)[62], vector[0])
    huge = np.full((1, WIDTH), 1e39)  # float64, infinite in the cache's float32: it stays out
    assert not as_numpy(layer.insert(huge)).any() and np.isfinite(as_numpy(layer.cache)).all()
    with pytest.raises(ValueError, match="`states` is required with query='additive'"):
        make_layer(4, query="additive").attention_weights()
    with pytest.raises(ValueError, match=r"width 6 .*got shape \(2, 5\)"):
        layer.insert(np.ones((2, 5), "float32"))
    pytest.raises(ValueError, layer.insert, np.ones((2, 3, WIDTH), "float32")).match("rank 2")
    with pytest.raises(ValueError, match="before `insert`"):
        HeapCacheAttention(4, 2).insert(np.ones((1, WIDTH), "float32"))
    unbuilt = HeapCacheAttention(4, 2)
    for name in ("width", "fill_count", "reset_cache", "attention_weights"):
        with pytest.raises(ValueError, match=f"before `{name}`"):
            getattr(unbuilt, name)()  # (`width` is a property: getattr raises)
    pytest.raises(ValueError, unbuilt, np.ones((2, 3, WIDTH), "float32")).match("rank 2")
