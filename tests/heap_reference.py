"""The cache of Gaffney's reference implementation (ORIGINAL_CODE.md §2), line by line: a float64
NumPy array kept by `fill_model.py`'s own sift-down (`maintain_cache`), not `heapq`."""

import numpy as np

from tests.window_reference import masked_softmax


def score(vector, kernel, score_vector):
    """`-inf` for an all-zero vector, else `tanh(a @ Wc) @ vc` (fill_model.py:243-247)."""
    return np.tanh(vector @ kernel) @ score_vector if np.any(vector) else -np.inf


def maintain_cache(cache, kernel, score_vector, index=0):
    """Sift-down from ``index`` (fill_model.py:259-321), scores recomputed at every step."""
    size = len(cache)
    while True:
        right, left = 2 * index + 1, 2 * index + 2  # the code calls 2i+1 "right"
        node_score = score(cache[index], kernel, score_vector)
        right_score = score(cache[right], kernel, score_vector) if right < size else np.inf
        left_score = score(cache[left], kernel, score_vector) if left < size else np.inf
        if node_score < min(right_score, left_score):
            return
        child = left if left_score <= right_score else right
        cache[[index, child]] = cache[[child, index]]
        index = child


def insert_batch(cache, candidates, kernel, score_vector):
    """The insertion loop (fill_model.py:225-241): updates ``cache``, returns which entered."""
    entered = []
    for candidate in candidates:
        better = score(candidate, kernel, score_vector) > score(cache[0], kernel, score_vector)
        entered.append(bool(better))
        if entered[-1]:
            cache[0] = candidate
            maintain_cache(cache, kernel, score_vector)
    return entered


def read(
    cache, states, kernel, score_vector, gate, query_kernel=None, mask_empty=True, query="additive"
):
    """``h + z * sum_i alpha_i C_i`` with the paper's read (no ``query_kernel``), the
    additive-query read or the scaled dot-product read (``query="dot"``)."""
    keys = cache @ kernel  # [K, A]
    if query == "dot":
        projected_states, projected_cache = states @ query_kernel, cache @ query_kernel
        logits = np.array(
            [
                [q @ c / np.sqrt(query_kernel.shape[1]) for c in projected_cache]
                for q in projected_states
            ]
        )
    elif query_kernel is None:
        logits = np.tanh(keys) @ score_vector  # [K], the same for every example
        logits = np.broadcast_to(logits, (len(states), len(cache)))
    else:
        logits = np.tanh(keys[None] + (states @ query_kernel)[:, None]) @ score_vector
    weights = masked_softmax(logits, np.any(cache != 0, axis=-1) if mask_empty else None)
    return states + gate * (weights @ cache), weights
