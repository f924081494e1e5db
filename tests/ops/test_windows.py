"""The causal-window primitives of `tf_memlayers.ops.windows` against NumPy."""

import numpy as np
import pytest
from keras import ops

from tests.support import BACKEND, assert_close, gradients, split_rows
from tf_memlayers.ops import windows

RNG = np.random.default_rng(3)


def weighted_sum_reference(weights, stream):
    """``out[b, r] = sum_i weights[b, r, i] * stream[b, r + i]``, loops in NumPy."""
    batch, steps, window = weights.shape
    out = np.zeros((batch, steps, stream.shape[-1]))
    for b in range(batch):
        for r in range(steps):
            for i in range(window):
                out[b, r] += weights[b, r, i] * stream[b, r + i]
    return out


# Windows below, at and above the smallest block (8); lengths around block boundaries.
@pytest.mark.parametrize(
    "window, steps", split_rows([(w, s) for w in (1, 3, 8, 10, 13) for s in (0, 1, 7, 8, 9, 25)])
)
def test_window_weighted_sum_matches_numpy_forward_and_gradients(window, steps):
    weights, stream = RNG.normal(size=(2, steps, window)), RNG.normal(size=(2, window + steps, 5))
    probe, weighted_sum = RNG.normal(size=(2, steps, 5)), windows.window_weighted_sum
    got = ops.convert_to_numpy(weighted_sum(weights, stream[:, :window], stream[:, window:]))
    np.testing.assert_allclose(got, weighted_sum_reference(weights, stream), atol=1e-12)
    _, _, grads = gradients(
        lambda w, c, s: ops.sum(ops.multiply(weighted_sum(w, c, s), probe)),
        inputs=[weights, stream[:, :window], stream[:, window:]],
    )
    expected_weights_grad, expected_stream_grad = np.zeros_like(weights), np.zeros_like(stream)
    for r in range(steps):
        for i in range(window):
            expected_weights_grad[:, r, i] = np.sum(probe[:, r] * stream[:, r + i], axis=-1)
            expected_stream_grad[:, r + i] += weights[:, r, i, None] * probe[:, r]
    want = [expected_weights_grad, *np.split(expected_stream_grad, [window], axis=1)]
    assert_close(grads, want, 1e-12)


@pytest.mark.skipif(BACKEND != "jax", reason="reads the intermediates' sizes from JAX's trace")
@pytest.mark.parametrize("steps", [3, 150])  # one band, and blocks
def test_window_weighted_sum_makes_nothing_cubic_in_the_window(steps):
    window, width = 64, 5
    shapes = [(1, steps, window), (1, window, width), (1, steps, width)]
    trace = __import__("jax").make_jaxpr(windows.window_weighted_sum)
    traced = trace(*(np.ones(s, "float32") for s in shapes))
    largest = max(np.prod(v.aval.shape) for eqn in traced.jaxpr.eqns for v in eqn.outvars)
    assert largest <= 4 * (steps + window) * (2 * window + width), largest


def test_window_weighted_sum_equals_the_offset_windows_product():
    weights = RNG.normal(size=(3, 17, 4)).astype("float32")
    stream = RNG.normal(size=(3, 21, 6)).astype("float32")
    windowed = ops.einsum("btl,btld->btd", weights, windows.offset_windows(stream, 4))
    got = windows.window_weighted_sum(weights, stream[:, :4], stream[:, 4:])
    np.testing.assert_allclose(*map(ops.convert_to_numpy, (got, windowed)), atol=1e-5)


def test_compaction_moves_the_valid_steps_first_in_order_and_back():
    mask = RNG.random((4, 9)) < 0.6
    mask[0], mask[1] = True, False  # a row of valid steps only, a row of padding only
    values, compaction = RNG.normal(size=(4, 9, 2)), windows.Compaction(ops.convert_to_tensor(mask))
    order = np.argsort(~mask, axis=1, kind="stable")  # valid steps first, each group in order
    np.testing.assert_array_equal(ops.convert_to_numpy(compaction.order), order)
    compacted = ops.convert_to_numpy(compaction.compact(values))
    np.testing.assert_array_equal(compacted, np.take_along_axis(values, order[..., None], 1))
    restored = ops.convert_to_numpy(compaction.restore(compacted))
    np.testing.assert_array_equal(restored, np.where(mask[..., None], values, 0.0))
