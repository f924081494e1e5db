"""Writes into a score-ordered cache of vectors: the heap procedure and the top-K rule.

The cache is a ``[K, H]`` variable whose rows are vectors; a row of zeros is an empty slot.
A vector's score is the cache-attention logit of Gaffney's *Cache Attention for Recurrent
Language Modeling* (§3.3), ``a = v_c^T tanh(W_c^T c)``, computed with the weights current at
the time of the write; an empty slot (all-zero vector) scores ``-inf``.

Two write rules:

* `heap_insert` — the reference implementation's procedure, candidate by candidate: a
  candidate that scores strictly above the root (slot 0, the weakest entry of a binary min-heap)
  replaces it and sifts down. Children of slot ``i`` are ``2i+1`` and ``2i+2`` (a missing child
  scores ``+inf``); the sift stops when the node scores strictly below both children, otherwise
  it swaps with ``2i+2`` when that child's score is ``<=`` the score of ``2i+1``, else with
  ``2i+1``. Scores are recomputed with the current weights at every step and the heap is never
  re-ordered as a whole, so with weights that change between writes the order goes stale
  exactly as in the reference implementation. Each candidate touches O(log K) rows.
* `topk_insert` — the intent of the heap: after the write the cache holds the K best of the
  old entries and the candidates under the current weights, stored in ascending score order
  (a sorted array is a valid min-heap, so slot 0 is still the weakest entry).
"""

import tensorflow as tf


def cache_scores(vectors, kernel, score_vector):
    """Cache-attention logits ``v_c^T tanh(W_c^T c)`` of each row; ``-inf`` for all-zero rows.

    Args:
        vectors: ``[N, H]`` tensor.
        kernel: ``W_c``, ``[H, A]``.
        score_vector: ``v_c``, ``[A]``.

    Returns:
        ``[N]`` tensor of scores, in the dtype of ``vectors``.
    """
    logits = tf.linalg.matvec(tf.tanh(tf.matmul(vectors, kernel)), score_vector)
    empty = tf.reduce_all(tf.equal(vectors, 0), axis=-1)
    return tf.where(empty, tf.constant(-float("inf"), logits.dtype), logits)


def _sift_down(cache, kernel, score_vector, start):
    """Sifts the vector in slot 0 down the min-heap in the variable ``cache`` if ``start``.

    Branch-free: a step that stops writes the node's row back onto itself.
    """
    size = tf.shape(cache, out_type=tf.int32)[0]
    inf = tf.constant(float("inf"), cache.dtype)

    def keep_going(index, go):
        del index
        return go

    def step(index, go):
        del go
        right, left = 2 * index + 1, 2 * index + 2  # the reference names 2i+1 "right"
        # Node and both children are scored in one product, so equal vectors get equal scores.
        rows = tf.gather(cache, tf.minimum(tf.stack([index, right, left]), size - 1))
        scores = cache_scores(rows, kernel, score_vector)
        right_score = tf.where(right < size, scores[1], inf)
        left_score = tf.where(left < size, scores[2], inf)
        stop = tf.logical_and(scores[0] < right_score, scores[0] < left_score)
        take_left = left_score <= right_score
        child = tf.where(stop, index, tf.where(take_left, left, right))
        child_row = tf.where(take_left, rows[2], rows[1])
        # Swap: the child's row moves up to `index`, the sinking vector down to `child`.
        update = cache.scatter_update(
            tf.IndexedSlices(
                tf.stack([tf.where(stop, rows[0], child_row), rows[0]]),
                tf.stack([index, child]),
            )
        )
        with tf.control_dependencies([update]):
            return tf.identity(child), tf.logical_not(stop)

    return tf.while_loop(
        keep_going, step, [tf.constant(0, tf.int32), start], parallel_iterations=1
    )


def heap_insert(cache, candidates, kernel, score_vector):
    """Offers each candidate, in order, to the min-heap ``cache`` (the reference procedure).

    Args:
        cache: ``tf.Variable`` ``[K, H]``, updated in place.
        candidates: ``[B, H]`` tensor, in the dtype of ``cache``.
        kernel: ``W_c`` ``[H, A]``; score_vector: ``v_c`` ``[A]`` (the current weights).

    Returns:
        ``[B]`` bool tensor: which candidates entered the cache.
    """
    count = tf.shape(candidates)[0]

    def offer(position, accepted):
        candidate = candidates[position]
        root = tf.gather(cache, 0)
        scores = cache_scores(tf.stack([candidate, root]), kernel, score_vector)
        beats_root = scores[0] > scores[1]
        write = cache.scatter_update(
            tf.IndexedSlices(tf.where(beats_root, candidate, root)[None], tf.constant([0]))
        )
        with tf.control_dependencies([write]):
            index, _ = _sift_down(cache, kernel, score_vector, beats_root)
        with tf.control_dependencies([index]):
            entered = tf.identity(beats_root)
        return position + 1, accepted.write(position, entered)

    accepted = tf.TensorArray(tf.bool, size=count)
    # One candidate at a time: each offer reads the root the previous one may have replaced.
    _, accepted = tf.while_loop(
        lambda position, _: position < count,
        offer,
        [tf.constant(0, tf.int32), accepted],
        parallel_iterations=1,
    )
    return accepted.stack()


def topk_insert(cache, candidates, kernel, score_vector):
    """Keeps the K best of the cache and ``candidates`` under the current weights.

    The survivors are written in ascending score order (slot 0 the weakest). Among equal
    scores, entries already in the cache win over candidates and earlier candidates over later
    ones. Returns a ``[B]`` bool tensor: which candidates entered the cache.
    """
    size = tf.shape(cache)[0]
    pool = tf.concat([tf.convert_to_tensor(cache), candidates], axis=0)
    scores = cache_scores(pool, kernel, score_vector)
    _, best = tf.math.top_k(scores, k=size, sorted=True)
    cache.assign(tf.gather(pool, tf.reverse(best, axis=[0])))
    kept = tf.scatter_nd(best[:, None], tf.ones_like(best, tf.bool), tf.shape(scores))
    return kept[size:]
