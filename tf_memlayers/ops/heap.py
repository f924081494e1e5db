"""Writes into a score-ordered cache of vectors: the heap procedure and the top-K rule.

The cache is a ``[K, H]`` tensor whose rows are vectors; a row of zeros is an empty slot.
A vector's score is the cache-attention logit of Gaffney's *Cache Attention for Recurrent
Language Modeling* (§3.3), ``a = v_c^T tanh(W_c^T c)``, computed with the weights current at
the time of the write; an empty slot (all-zero vector) scores ``-inf``, and so does a vector
with a NaN or infinite entry, which therefore never enters the cache (see `cache_scores`).

Two write rules, each a pure function from the old cache and the candidates to the new cache:

* `heap_write` — the reference implementation's procedure, candidate by candidate: a candidate
  that scores strictly above the root (slot 0, the weakest entry of a binary min-heap)
  replaces it and sifts down. Children of slot ``i`` are ``2i+1`` and ``2i+2`` (a missing child
  scores ``+inf``); the sift stops when the node scores strictly below both children, otherwise
  it swaps with ``2i+2`` when that child's score is ``<=`` the score of ``2i+1``, else with
  ``2i+1``. The heap is never re-ordered as a whole, so with weights that change between
  writes the order goes stale exactly as in the reference implementation.
* `topk_write` — the intent of the heap: after the write the cache holds the K best of the
  old entries and the candidates under the current weights, stored in ascending score order
  (a sorted array is a valid min-heap, so slot 0 is still the weakest entry).

The weights do not change during one write, so the reference's rescoring at every sift step
gives each vector the same score every time. Both rules therefore score the pool (the cached
rows, then the candidates) once (`pool_scores`) and decide from the scores alone; `heap_write`
replays the procedure on the scores and the slots' pool indices (`heap_slots`) and gathers the
rows once at the end. Everything is written in `keras.ops`; TensorFlow users get it compiled
with XLA from `HeapCacheAttention.insert`.
"""

import keras
import numpy as np
from keras import ops

# Exact row identity through the rows' bits: 16- and 32-bit floats hash in uint32 words,
# float64 in uint64 words (unsigned products wrap modulo 2^32 / 2^64, a defined result).
_WORDS = {
    "float16": ("uint16", "uint32", "int32"),
    "bfloat16": ("uint16", "uint32", "int32"),
    "float32": ("uint32", "uint32", "int32"),
    "float64": ("uint64", "uint64", "int64"),
}


def cache_scores(vectors, kernel, score_vector):
    """Cache-attention logits ``v_c^T tanh(W_c^T c)`` of each row; ``-inf`` for all-zero rows
    and for rows with a NaN or infinite entry.

    A non-finite row scores as an empty slot does, so neither write rule lets it in (a
    candidate must score strictly above the root, and among equal scores the cached rows win),
    and the cache never holds a value it would read back as NaN. The rule is part of the
    computation rather than a check that raises, because the writes run compiled (XLA on
    TensorFlow, `jax.jit`), where an assertion cannot stop the step.

    Args:
        vectors: ``[N, H]`` tensor.
        kernel: ``W_c``, ``[H, A]``.
        score_vector: ``v_c``, ``[A]``.

    Returns:
        ``[N]`` tensor of scores, in the dtype of ``vectors``.
    """
    vectors = ops.convert_to_tensor(vectors)
    finite = ops.all(ops.isfinite(vectors), axis=-1)
    # Non-finite rows are zeroed before the product, so that no NaN reaches the scores.
    safe = ops.where(finite[:, None], vectors, ops.zeros_like(vectors))
    logits = ops.matmul(ops.tanh(ops.matmul(safe, kernel)), score_vector[:, None])[:, 0]
    empty = ops.all(ops.equal(vectors, 0), axis=-1)
    unusable = ops.logical_or(empty, ops.logical_not(finite))
    return ops.where(unusable, ops.full_like(logits, -float("inf")), logits)


def _row_hashes(rows):
    """A hash of each row's bits (equal rows, equal hashes), as a signed integer to sort."""
    dtype = keras.backend.standardize_dtype(rows.dtype)
    if dtype not in _WORDS:
        raise TypeError(f"cache rows must be floating point, got dtype {dtype}")
    bits, word, signed = _WORDS[dtype]
    width = int(rows.shape[-1])
    limit = np.iinfo(word).max
    multipliers = np.random.default_rng(width).integers(0, limit, width, dtype=word, endpoint=True)
    multipliers |= 1
    if keras.backend.backend() == "torch":
        return _row_hashes_in_int64(rows, bits, signed, multipliers)
    words = ops.cast(ops.view(rows, bits), word)
    hashes = ops.sum(words * ops.convert_to_tensor(multipliers, word), axis=-1, keepdims=True)
    return ops.view(hashes, signed)[:, 0]  # viewed with a static last axis, as `view` needs


def _row_hashes_in_int64(rows, bits, signed, multipliers):
    """`_row_hashes` in int64, for PyTorch, which has no unsigned 16-, 32- or 64-bit arithmetic.

    The words are read zero-extended; int64 products and sums wrap modulo 2^64, so their low
    bits are the unsigned words' results, and the hashes equal the other backends' bit for bit.
    """
    width = np.dtype(bits).itemsize * 8
    words = ops.cast(ops.view(rows, f"int{width}"), "int64")
    if width < 64:
        words = ops.bitwise_and(words, (1 << width) - 1)
    factors = ops.convert_to_tensor(multipliers.astype(np.uint64).view(np.int64), "int64")
    hashes = ops.sum(words * factors, axis=-1)
    if signed == "int64":
        return hashes
    # The low 32 bits as a signed integer, as the uint32 hash viewed as int32.
    low = ops.bitwise_and(hashes + 2**31, 2**32 - 1) - 2**31
    return ops.cast(low, "int32")


def _first_equal_rows(rows):
    """For each row, the index of the first row with the same bits (itself if none before)."""
    count = ops.shape(rows)[0]
    positions = ops.arange(count, dtype="int32")
    hashes = _row_hashes(rows)
    order = ops.cast(ops.argsort(hashes), "int32")
    sorted_hashes = ops.take(hashes, order)
    starts = ops.concatenate(
        [ops.ones((1,), "bool"), ops.not_equal(sorted_hashes[1:], sorted_hashes[:-1])], axis=0
    )
    groups = ops.cumsum(ops.cast(starts, "int32")) - 1
    first_of_group = -ops.segment_max(-order, groups, num_segments=count)
    first_sorted = ops.take(first_of_group, groups)
    first = ops.scatter(order[:, None], first_sorted, (count,))
    # A hash collision between different rows must not share a score: check the bits.
    same = ops.all(ops.equal(ops.take(rows, first, axis=0), rows), axis=-1)
    return ops.where(same, first, positions)


def pool_scores(pool, kernel, score_vector):
    """`cache_scores` of ``pool`` with exactly one score per distinct row.

    A product's rounding depends on where a row sits in it, and the reference scores each
    vector on its own, so equal vectors must tie exactly: each row takes the score of the first
    row with the same bits.
    """
    scores = cache_scores(pool, kernel, score_vector)
    return ops.take(scores, _first_equal_rows(pool))


def _sift(state, node_score, node_source):
    """Sifts a node scoring ``node_score`` down from slot 0 of the min-heap ``state``.

    ``state`` is ``(slot scores [K], slot sources [K])``. Instead of swapping, children move up
    until the node's slot is found, and the node is written there once.
    """
    scores, sources = state
    size = ops.shape(scores)[0]
    inf = ops.cast(float("inf"), scores.dtype)

    def score_at(index):
        return ops.where(index < size, ops.take(scores, ops.minimum(index, size - 1)), inf)

    def keep_going(index, go, scores, sources):
        del index, scores, sources
        return go

    def step(index, go, scores, sources):
        del go
        right, left = 2 * index + 1, 2 * index + 2  # the reference names 2i+1 "right"
        right_score, left_score = score_at(right), score_at(left)
        stop = ops.logical_and(node_score < right_score, node_score < left_score)
        child = ops.where(left_score <= right_score, left, right)
        child = ops.where(stop, index, child)
        scores = ops.slice_update(scores, [index], ops.take(scores, child)[None])
        sources = ops.slice_update(sources, [index], ops.take(sources, child)[None])
        return child, ops.logical_not(stop), scores, sources

    start = ops.zeros((), "int32")
    index, _, scores, sources = ops.while_loop(
        keep_going, step, (start, ops.convert_to_tensor(True), scores, sources)
    )
    scores = ops.slice_update(scores, [index], node_score[None])
    sources = ops.slice_update(sources, [index], node_source[None])
    return scores, sources


def heap_slots(slot_scores, candidate_scores):
    """Replays the reference's insertion loop on scores (fill_model.py's `train_on_batch`).

    Args:
        slot_scores: ``[K]`` scores of the cached vectors, slot by slot.
        candidate_scores: ``[B]`` scores of the candidates, in the order they are offered.

    Returns:
        ``(sources, entered)``: ``[K]`` int32, the pool index of the vector each slot holds
        after the write (``k`` for the vector in slot ``k``, ``K + b`` for candidate ``b``);
        ``[B]`` bool, which candidates entered the cache.
    """
    size, count = ops.shape(slot_scores)[0], ops.shape(candidate_scores)[0]
    # One more candidate scoring -inf, which never enters: the loop's body never indexes an
    # empty batch (tracing it does even when it runs no step).
    low = ops.full((1,), float("-inf"), candidate_scores.dtype)
    candidate_scores = ops.concatenate([candidate_scores, low], axis=0)

    def offer(position, state):
        scores, sources, entered = state
        score = ops.take(candidate_scores, position)
        beats_root = score > scores[0]
        # A candidate that does not beat the root leaves the heap as it is: the root "sifts".
        node_score = ops.where(beats_root, score, scores[0])
        node_source = ops.where(beats_root, size + position, sources[0])
        scores, sources = ops.cond(
            beats_root,
            lambda: _sift((scores, sources), node_score, node_source),
            lambda: (scores, sources),
        )
        entered = ops.slice_update(entered, [position], beats_root[None])
        return scores, sources, entered

    sources = ops.arange(size, dtype="int32")
    entered = ops.zeros((count + 1,), "bool")
    _, sources, entered = ops.fori_loop(0, count + 1, offer, (slot_scores, sources, entered))
    return sources, entered[:count]


def heap_write(cache, candidates, kernel, score_vector):
    """Offers each candidate, in order, to the min-heap ``cache`` (the reference procedure).

    Args:
        cache: ``[K, H]`` tensor, the cache's current value.
        candidates: ``[B, H]`` tensor, in the dtype of ``cache``.
        kernel: ``W_c`` ``[H, A]``; score_vector: ``v_c`` ``[A]`` (the current weights).

    Returns:
        ``(new cache [K, H], [B] bool tensor: which candidates entered the cache)``.
    """
    pool = ops.concatenate([cache, candidates], axis=0)
    scores = pool_scores(pool, kernel, score_vector)
    size = ops.shape(cache)[0]
    sources, entered = heap_slots(scores[:size], scores[size:])
    return ops.take(pool, sources, axis=0), entered


def topk_write(cache, candidates, kernel, score_vector):
    """Keeps the K best of the cache and ``candidates`` under the current weights.

    The survivors are written in ascending score order (slot 0 the weakest). Among equal
    scores, entries already in the cache win over candidates and earlier candidates over later
    ones. Returns ``(new cache, [B] bool tensor: which candidates entered the cache)``.
    """
    size = int(cache.shape[0])
    pool = ops.concatenate([cache, candidates], axis=0)
    scores = pool_scores(pool, kernel, score_vector)
    if keras.backend.backend() == "torch":
        # torch.topk leaves the order of equal scores open; a stable sort puts the lower
        # index first, as top_k does on TensorFlow and JAX.
        best = ops.argsort(-scores)[:size]
    else:
        _, best = ops.top_k(scores, k=size, sorted=True)
    kept = ops.scatter(best[:, None], ops.ones((size,), "int32"), ops.shape(scores))
    return ops.take(pool, ops.flip(best, axis=0), axis=0), ops.cast(kept, "bool")[size:]
