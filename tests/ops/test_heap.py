"""`tf_memlayers.ops.heap`'s slots and scores against the procedure its module documents (its
writes against `heap_reference`: tests/layers/cache_attention/test_heap_cache_attention.py)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.support import as_numpy, assert_close, split_rows
from tf_memlayers.ops import heap


def replayed_slots(slot_scores, candidate_scores):
    """The documented procedure: a candidate scoring strictly above the root (slot 0) replaces it
    and sifts down; the children of slot i are 2i+1 and 2i+2 (a missing child scores +inf); the sift
    stops when the node scores strictly below both children, else it swaps with 2i+2 when that
    child's score is <= the score of 2i+1, else with 2i+1. Returns each slot's pool index (k for the
    vector in slot k, K + b for candidate b) and which candidates entered."""
    scores, size = list(slot_scores), len(slot_scores)
    sources, entered = list(range(size)), []
    for b, score in enumerate(candidate_scores):
        entered.append(bool(score > scores[0]))
        if not entered[-1]:
            continue
        scores[0], sources[0], index = score, size + b, 0
        while True:
            first, second = 2 * index + 1, 2 * index + 2
            first_score = scores[first] if first < size else np.inf
            second_score = scores[second] if second < size else np.inf
            if scores[index] < first_score and scores[index] < second_score:
                break
            child = second if second_score <= first_score else first
            scores[index], scores[child] = scores[child], scores[index]
            sources[index], sources[child] = sources[child], sources[index]
            index = child
    return sources, entered


@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_heap_slots_replay_the_documented_procedure(float64_policy, size):
    # Scores from a few values, so that ties decide; -inf is an empty slot or an unusable
    # candidate; the slots are in random (stale) order, as after the weights changed.
    rng, values = np.random.default_rng(size), np.array([-np.inf, 0.0, 1.0, 2.0, 3.0])
    for _ in range(6):
        slot_scores, candidate_scores = rng.choice(values, size), rng.choice(values, 7)
        sources, entered = heap.heap_slots(
            ops.convert_to_tensor(slot_scores), ops.convert_to_tensor(candidate_scores)
        )
        expected_sources, expected_entered = replayed_slots(slot_scores, candidate_scores)
        assert as_numpy(sources).tolist() == expected_sources
        assert as_numpy(entered).tolist() == expected_entered
        assert keras.backend.standardize_dtype(sources.dtype) == "int32"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cache_scores_in_the_rows_dtype_with_empty_and_non_finite_rows_at_minus_infinity(dtype):
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(8, 4))
    rows[1] = 0.0
    rows[2] = -0.0  # negative zeros are zeros: an empty slot too
    rows[3, :2] = 0.0  # some zero entries only: a real vector
    rows[5, 0], rows[6, 1], rows[7, 2] = np.nan, np.inf, -np.inf  # unusable
    kernel, v = rng.normal(size=(4, 3)), rng.normal(size=(3,))
    scores = heap.cache_scores(*(ops.convert_to_tensor(a.astype(dtype)) for a in (rows, kernel, v)))
    assert keras.backend.standardize_dtype(scores.dtype) == dtype
    expected = np.tanh(np.nan_to_num(rows) @ kernel) @ v
    expected[[1, 2, 5, 6, 7]] = -np.inf
    assert_close(scores, expected, atol=0, rtol=1e-5 if dtype == "float32" else 1e-13)


HALF = ("float16", "bfloat16")
SHAPES = [(17, 5, 1001), (200, 100, 164), (64, 32, 50)]  # (width, units, rows)


@pytest.mark.parametrize(
    "dtype, width, units, rows",
    split_rows([(d, *shape) for d in ("float32", "float64") for shape in SHAPES])
    + [(d, 24, 8, 300) for d in HALF],
)
def test_equal_rows_get_one_score_wherever_they_sit(dtype, width, units, rows):
    # One matrix product rounds a row by where it sits: equal vectors would not tie.
    rng = np.random.default_rng(width)
    distinct, picks = rng.normal(size=(7, width)), rng.integers(0, 7, rows)
    scale = 0.3 if dtype in HALF else 1.0
    kernel, v = rng.normal(scale=scale, size=(width, units)), rng.normal(size=(units,))
    tensors = [ops.cast(ops.convert_to_tensor(a), dtype) for a in (distinct[picks], kernel, v)]
    scores = as_numpy(ops.cast(heap.pool_scores(*tensors), "float64"))
    for k in range(7):
        assert len(set(scores[picks == k].tolist())) <= 1
    # The rows and weights as the dtype holds them, scored in float64.
    pool, kernel, v = (as_numpy(ops.cast(t, "float64")) for t in tensors)
    expected = np.tanh(pool @ kernel) @ v
    if dtype in HALF:
        np.testing.assert_allclose(scores, expected, rtol=0, atol=0.1 * np.abs(expected).max())
    else:
        np.testing.assert_allclose(scores, expected, rtol=1e-4 if dtype == "float32" else 1e-12)


def _float32_rows(words):
    return np.asarray(words, np.uint32).view(np.float32)


def test_different_rows_with_the_same_hash_keep_their_own_scores_and_integers_are_refused():
    # Two-column float32 rows whose bit hashes collide. The hash of a row's words is linear in
    # them, h = a w0 + b w1 (mod 2^32), so (w0 + k b, w1 - k a) hashes as (w0, w1) does for
    # every k; a and b are the hashes of the rows with words (1, 0) and (0, 1). A k for which
    # both changes are below 2^23 changes at most the mantissas and the exponents' last bit:
    # two moderate, different vectors with different scores.
    unit_rows = ops.convert_to_tensor(_float32_rows([[1, 0], [0, 1]]))
    a, b = (int(h) % 2**32 for h in as_numpy(heap._row_hashes(unit_rows)))
    k = np.arange(1, 2**20, dtype=np.uint64)
    centered = lambda w: ((w + 2**31) % 2**32).astype(np.int64) - 2**31  # noqa: E731
    steps = centered(k * b % 2**32), centered((2**32 - k * a % 2**32) % 2**32)
    small = (np.abs(steps[0]) < 2**23) & (np.abs(steps[1]) < 2**23)
    step = np.array([s[np.flatnonzero(small)[0]] for s in steps])
    words = np.array([0x3F400000, 0xBFA00000], np.int64)  # 0.75, -1.25
    rows = _float32_rows([words, (words + step) % 2**32, words])
    pool = ops.convert_to_tensor(rows)
    row_hashes = as_numpy(heap._row_hashes(pool))
    assert row_hashes[0] == row_hashes[1] == row_hashes[2], "the rows must collide"
    assert as_numpy(heap._first_equal_rows(pool)).tolist() == [0, 1, 0]  # the first equal row
    kernel, v = np.array([[0.7, -0.4], [0.2, 0.9]]), np.array([1.0, -1.5])
    scores = as_numpy(heap.pool_scores(pool, kernel.astype("float32"), v.astype("float32")))
    expected = np.tanh(rows.astype(np.float64) @ kernel) @ v
    assert abs(expected[0] - expected[1]) > 1e-3
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)
    assert scores[0] == scores[2]
    with pytest.raises(TypeError, match="cache rows must be floating point, got dtype int32"):
        heap.pool_scores(np.ones((3, 2), "int32"), np.ones((2, 2)), np.ones(2))
