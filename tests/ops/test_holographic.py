"""Holographic primitives against complex NumPy and Python's own `random` (the read,
`read_memory_parts`, within the step: test_associative_gru_step.py)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.am_gru_reference import permutations
from tests.support import as_numpy, gradients
from tf_memlayers.ops import holographic

tensor = ops.convert_to_tensor
HALF_AND_FULL = ("float16", "float32")


def _as_complex(x):
    half = x.shape[-1] // 2
    return x[..., :half] + 1j * x[..., half:]


def _as_real(z):
    return np.concatenate([z.real, z.imag], axis=-1)


def test_complex_multiply_and_conjugate_match_numpy_complex_and_the_memory_layout_round_trips():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 10)), rng.normal(size=(3, 10))
    product = as_numpy(holographic.complex_multiply(tensor(x), tensor(y)))
    np.testing.assert_allclose(product, _as_real(_as_complex(x) * _as_complex(y)), atol=1e-12)
    conj = as_numpy(holographic.conjugate(ops.convert_to_tensor(x)))
    np.testing.assert_allclose(conj, _as_real(np.conj(_as_complex(x))), atol=0)
    memory = np.arange(2 * 24, dtype=np.float64).reshape(2, 24)  # C = 3, n = 8
    re, im = holographic.split_memory(tensor(memory), 3)
    # [Re copy0 | Re copy1 | Re copy2 | Im copy0 | ...], 4 complex entries per copy
    np.testing.assert_array_equal(as_numpy(re)[0, 1], memory[0, 4:8])
    np.testing.assert_array_equal(as_numpy(im)[0, 2], memory[0, 20:24])
    np.testing.assert_array_equal(as_numpy(holographic.join_memory(re, im)), memory)


def test_bound_divides_by_modulus_above_one_only_runs_in_float16_and_differentiates_at_zero():
    x = np.random.default_rng(1).normal(scale=2.0, size=(4, 12))
    z = _as_complex(x)
    expected = _as_real(z / np.maximum(1.0, np.abs(z)))
    np.testing.assert_allclose(as_numpy(holographic.bound(tensor(x))), expected, atol=1e-12)
    # In float16 without overflow: |300 + 400i|^2 is past float16's largest number.
    out = holographic.bound(tensor([[300.0, 0.0, 400.0, 0.5]], "float16"))
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    np.testing.assert_allclose(as_numpy(out).astype(np.float64), [[0.6, 0.0, 0.8, 0.5]], atol=1e-3)
    x, g = [[300.0, 0.5, 400.0, 0.0]], [[1.0, 1.0, 2.0, 1.0]]  # and its gradient, as in float32
    half, full = (holographic.bound_gradient(tensor(x, d), tensor(g, d)) for d in HALF_AND_FULL)
    np.testing.assert_allclose(as_numpy(half).astype(np.float64), as_numpy(full), atol=1e-4)
    # A finite gradient at an exactly zero key.
    x, upstream = np.array([[0.0, 3.0, 0.0, 4.0]]), np.array([[1.0, 2.0, 3.0, 4.0]])
    _, _, (grad,) = gradients(
        lambda x: ops.sum(holographic.bound(x) * ops.convert_to_tensor(upstream)), inputs=[x]
    )
    assert np.all(np.isfinite(grad))
    # Inside the unit disc bound is the identity: gradient = the upstream weights.
    np.testing.assert_allclose(grad[0, [0, 2]], [1.0, 3.0])
    # On the unit circle the fused loops' gradient shrinks: at 1 + 0i only the imaginary part.
    grad = holographic.bound_gradient(tensor([[1.0, 0.0]]), tensor([[2.0, 3.0]]))
    np.testing.assert_array_equal(as_numpy(grad), [[0.0, 3.0]])


def test_permutations_are_pythons_random_sequence_and_the_original_fixture():
    for num_complex, num_copies, seed in [(100, 8, 123), (4, 3, 7), (50, 1, 123)]:
        expected = permutations(num_complex, num_copies, seed)
        assert holographic.make_permutations(num_complex, num_copies, seed) == expected
    # The fixture the original code's permutations give (random.Random(123), n = 200, C = 8,
    # Python 3.11), as ORIGINAL_CODE.md records it: the default seed is the original's.
    perms = holographic.make_permutations(100, 8)  # n = 200 real units
    assert perms[0] == list(range(100))
    assert perms[1][:12] == [87, 29, 63, 50, 84, 93, 7, 67, 64, 75, 24, 60]
    assert perms[2][:12] == [73, 98, 49, 87, 25, 95, 36, 6, 57, 7, 28, 54]
    assert perms[7][:12] == [61, 58, 20, 44, 69, 86, 92, 47, 64, 75, 8, 28]


@pytest.mark.parametrize("num_complex, num_copies", [(6, 3), (50, 8), (5, 1)])
def test_permuted_copies_and_their_gradient_the_adjoint(num_complex, num_copies):
    """The copies by the permutation matrix ``P`` are the permuted keys; the gather-and-sum
    adjoint equals multiplying by ``P^T``: <copies(x), g> = <x, adj(g)> for every x, i.e.
    adj(g) = g @ P^T on the rows ``(b, re), (b, im)``."""
    perms = holographic.make_permutations(num_complex, num_copies, seed=9)
    matrix, rng = holographic.permutation_matrix(perms).astype(np.float64), np.random.default_rng(4)
    re, im = rng.normal(size=(2, 2, num_complex))
    copies = holographic.permuted_copies_parts(tensor(re), tensor(im), tensor(matrix), num_copies)
    for c, perm in enumerate(perms):
        for got, part in zip(copies, (re, im)):
            np.testing.assert_array_equal(as_numpy(got)[:, c], part[:, perm])
    grad_re, grad_im = rng.normal(size=(2, 3, num_copies, num_complex))
    got = holographic.permuted_copies_gradient(
        tensor(grad_re), tensor(grad_im), holographic.unpermuting_indices(perms), num_copies
    )
    rows = np.stack([grad_re, grad_im], axis=1).reshape(-1, num_copies * num_complex)
    expected = (rows @ matrix.T).reshape(-1, 2 * num_complex)
    np.testing.assert_allclose(as_numpy(got), expected, rtol=1e-12, atol=1e-12)
