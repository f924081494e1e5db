"""`HeapCacheAttention`'s cache writes in `keras.ops`, for the backends other than TensorFlow.

The same two rules as `tf_memlayers.ops.heap` (see there): `heap_insert` offers the candidates
one by one to the binary min-heap, `topk_insert` keeps the K best of the cache and the
candidates in ascending score order. `tf_memlayers.ops.heap` updates a TensorFlow variable in
place (and runs under `tf.distribute`); these functions take the cache's value and return the
new value, which the layer assigns. Both make the same decisions from the same scores.
"""

from keras import ops


def cache_scores(vectors, kernel, score_vector):
    """Cache-attention logits ``v_c^T tanh(W_c^T c)`` of each row; ``-inf`` for all-zero rows.

    Args:
        vectors: ``[N, H]`` tensor.
        kernel: ``W_c``, ``[H, A]``.
        score_vector: ``v_c``, ``[A]``.

    Returns:
        ``[N]`` tensor of scores, in the dtype of ``vectors``.
    """
    logits = ops.matmul(ops.tanh(ops.matmul(vectors, kernel)), score_vector[:, None])[:, 0]
    empty = ops.all(ops.equal(vectors, 0), axis=-1)
    return ops.where(empty, ops.full_like(logits, -float("inf")), logits)


def _scores_of_rows(rows, kernel, score_vector):
    """`cache_scores` of a few rows, with exactly one score for equal rows.

    The reference scores each vector on its own, so equal vectors tie exactly; scored in one
    product, rows in different positions can round differently.
    """
    scores = cache_scores(rows, kernel, score_vector)
    tied = [scores[0]]
    for i in range(1, int(rows.shape[0])):
        score = scores[i]
        for j in reversed(range(i)):
            score = ops.where(ops.all(ops.equal(rows[i], rows[j])), tied[j], score)
        tied.append(score)
    return tied


def _sift_down(cache, kernel, score_vector, start):
    """The cache after sifting the vector in slot 0 down the min-heap (if ``start``)."""
    size = int(cache.shape[0])
    inf = ops.cast(float("inf"), cache.dtype)

    def keep_going(index, go, cache):
        del index, cache
        return go

    def step(index, go, cache):
        del go
        right, left = 2 * index + 1, 2 * index + 2  # the reference names 2i+1 "right"
        rows = ops.take(cache, ops.minimum(ops.stack([index, right, left]), size - 1), axis=0)
        scores = _scores_of_rows(rows, kernel, score_vector)
        right_score = ops.where(right < size, scores[1], inf)
        left_score = ops.where(left < size, scores[2], inf)
        stop = ops.logical_and(scores[0] < right_score, scores[0] < left_score)
        take_left = left_score <= right_score
        child = ops.where(stop, index, ops.where(take_left, left, right))
        child_row = ops.where(take_left, rows[2], rows[1])
        # Swap: the child's row moves up to `index`, the sinking vector down to `child`.
        cache = ops.scatter_update(
            cache,
            ops.stack([index, child])[:, None],
            ops.stack([ops.where(stop, rows[0], child_row), rows[0]]),
        )
        return child, ops.logical_not(stop), cache

    start_index = ops.zeros((), "int32")
    _, _, cache = ops.while_loop(keep_going, step, (start_index, start, cache))
    return cache


def heap_insert(cache, candidates, kernel, score_vector):
    """Offers each candidate, in order, to the min-heap ``cache`` (the reference procedure).

    Args:
        cache: ``[K, H]`` tensor, the cache's current value.
        candidates: ``[B, H]`` tensor, in the dtype of ``cache``.
        kernel: ``W_c`` ``[H, A]``; score_vector: ``v_c`` ``[A]`` (the current weights).

    Returns:
        ``(new cache [K, H], [B] bool tensor: which candidates entered the cache)``.
    """
    count = int(candidates.shape[0])

    def offer(position, state):
        cache, accepted = state
        candidate = ops.take(candidates, position, axis=0)
        root = cache[0]
        scores = _scores_of_rows(ops.stack([candidate, root]), kernel, score_vector)
        beats_root = scores[0] > scores[1]
        cache = ops.slice_update(cache, (0, 0), ops.where(beats_root, candidate, root)[None])
        cache = _sift_down(cache, kernel, score_vector, beats_root)
        accepted = ops.scatter_update(accepted, ops.reshape(position, (1, 1)), beats_root[None])
        return cache, accepted

    # One candidate at a time: each offer reads the root the previous one may have replaced.
    return ops.fori_loop(0, count, offer, (cache, ops.zeros((count,), "bool")))


def topk_insert(cache, candidates, kernel, score_vector):
    """Keeps the K best of the cache and ``candidates`` under the current weights.

    The survivors are written in ascending score order (slot 0 the weakest). Among equal
    scores, entries already in the cache win over candidates and earlier candidates over later
    ones. Returns ``(new cache, [B] bool tensor: which candidates entered the cache)``.
    """
    size = int(cache.shape[0])
    pool = ops.concatenate([cache, candidates], axis=0)
    scores = cache_scores(pool, kernel, score_vector)
    _, best = ops.top_k(scores, k=size, sorted=True)
    kept = ops.scatter(best[:, None], ops.ones((size,), "int32"), (int(pool.shape[0]),))
    return ops.take(pool, ops.flip(best, axis=0), axis=0), ops.cast(kept, "bool")[size:]
