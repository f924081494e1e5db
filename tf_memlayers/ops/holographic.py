"""Holographic primitives: complex vectors stored as real tensors, `bound`, permuted copies.

A complex vector of ``n`` real units is stored as one real tensor whose last axis is
``[re (n/2) | im (n/2)]``, so every operation runs in float16, bfloat16, float32 and float64
(Weissenborn 2016, §3.1; Danihelka et al. 2016). The functions that take ``x``/``y`` work on
that layout; the ones ending in ``_parts`` work on ``(re, im)`` pairs.

A redundant memory of ``C`` permuted copies of an ``n``-unit complex vector is one 2-D tensor
``[batch, n * C]`` laid out ``[Re copy0 | ... | Re copy(C-1) | Im copy0 | ... | Im copy(C-1)]``.
"""

import random

import keras
import numpy as np
from keras import ops


def complexify(x):
    """Splits ``[..., n]`` into its real and imaginary halves ``(re, im)``, each ``[..., n/2]``."""
    return ops.split(x, 2, axis=-1)


def uncomplexify(re, im):
    """Joins real and imaginary halves back into ``[..., n]``."""
    return ops.concatenate([re, im], axis=-1)


def _bound_modulus(squared_modulus):
    # max(1, sqrt(q)) as sqrt(max(1, q)): identical values, and a finite gradient at q = 0
    # (where the derivative of sqrt is infinite and 0 * inf would give NaN).
    return ops.sqrt(ops.maximum(squared_modulus, 1.0))


def _float32_if_half(x):
    # The squared modulus overflows float16 for entries above 256.
    half = keras.backend.standardize_dtype(x.dtype) in ("float16", "bfloat16")
    return ops.cast(x, "float32") if half else x


def bound(x):
    """`bound` of a complex vector in ``[re | im]`` layout: divides every complex entry by
    ``max(1, |entry|)`` (eq. 9-10), the modulus computed in float32 for half-precision inputs.

    Example:

    >>> import numpy as np
    >>> keras.ops.convert_to_numpy(bound(np.array([[3.0, 0.5, 4.0, 0.0]], "float32"))).round(3)
    array([[0.6, 0.5, 0.8, 0. ]], dtype=float32)
    """
    x = ops.convert_to_tensor(x)
    # A static shape where known keeps the step free of shape-computing ops.
    shape = ops.shape(x) if None in x.shape[1:] else (-1, *x.shape[1:])
    pairs = _float32_if_half(ops.reshape(x, (-1, 2, x.shape[-1] // 2)))  # rows: (re, im)
    modulus = _bound_modulus(ops.sum(ops.square(pairs), axis=1, keepdims=True))
    return ops.reshape(ops.cast(pairs / modulus, x.dtype), shape)


def bound_gradient(x, grad):
    """The gradient of `bound` at ``x`` given the gradient ``grad`` of its output (both
    ``[batch, n]`` in ``[re | im]`` layout): ``(g - b <b, g>) / |x|`` per complex entry with
    ``|x| >= 1`` (``b`` the bounded entry), ``g`` itself where the entry is left unchanged.
    Computed in float32 for half-precision inputs, like `bound`."""
    num_complex = x.shape[-1] // 2
    shape = ops.shape(x) if None in x.shape[1:] else (-1, *x.shape[1:])
    pairs = _float32_if_half(ops.reshape(x, (-1, 2, num_complex)))
    grad_pairs = ops.cast(ops.reshape(grad, (-1, 2, num_complex)), pairs.dtype)
    squared = ops.sum(ops.square(pairs), axis=1, keepdims=True)
    modulus = _bound_modulus(squared)
    bounded = pairs / modulus
    along = ops.sum(bounded * grad_pairs, axis=1, keepdims=True)
    shrunk = (grad_pairs - bounded * along) / modulus
    # At |x| = 1 exactly the gradient takes the shrinking branch, as `ops.maximum`'s does.
    result = ops.where(squared >= 1.0, shrunk, grad_pairs)
    return ops.reshape(ops.cast(result, x.dtype), shape)


def complex_multiply_parts(x_re, x_im, y_re, y_im):
    """Element-wise complex product ``x (*) y`` on ``(re, im)`` pairs (eq. 1)."""
    return x_re * y_re - x_im * y_im, x_re * y_im + x_im * y_re


def complex_multiply(x, y):
    """Element-wise complex product of two ``[re | im]`` tensors (eq. 1)."""
    return uncomplexify(*complex_multiply_parts(*complexify(x), *complexify(y)))


def conjugate(x):
    """Complex conjugate of a ``[re | im]`` tensor: ``[re | -im]``."""
    re, im = complexify(x)
    return uncomplexify(re, -im)


# The seed of the copies' permutations that the associative-memory layers default to.
PERMUTATION_SEED = 123


def make_permutations(num_complex, num_copies, seed=PERMUTATION_SEED):
    """The permutations of the redundant copies, as the original code draws them.

    Copy 0 is the identity. Copies ``1 .. num_copies - 1`` are, in order, ``list(range(
    num_complex))`` shuffled by ONE ``random.Random(seed)``, so the sequence equals the original
    code's (Python 3 `random`). Real and imaginary parts share a copy's permutation, and the
    permuted key of copy ``c`` is ``K_c[j] = k[perm_c[j]]`` (eq. 4).

    Args:
        num_complex: number of complex entries (half the number of real units).
        num_copies: number of copies ``C >= 1``.
        seed: seed of the `random.Random` generator.

    Returns:
        A list of ``num_copies`` lists of ints.
    """
    rng = random.Random(seed)
    permutations = [list(range(num_complex))]
    for _ in range(num_copies - 1):
        permutation = list(range(num_complex))
        rng.shuffle(permutation)
        permutations.append(permutation)
    return permutations


def permutation_matrix(permutations):
    """A 0/1 matrix ``P`` ``[m, C * m]`` with ``(k @ P)[:, c*m + j] = k[:, perm_c[j]]``.

    Permuting by a fixed 0/1 matmul is exact (one 1 per column), and making the copies this
    way is faster on CPU than a gather. The adjoint, which sums ``C`` values into each entry,
    is a gather instead (`permuted_copies_gradient`).
    """
    permutations = np.asarray(permutations)
    num_copies, num_complex = permutations.shape
    matrix = np.zeros((num_complex, num_copies * num_complex), dtype=np.float32)
    columns = np.arange(num_copies * num_complex)
    matrix[permutations.reshape(-1), columns] = 1.0
    return matrix


def permutation_constant(permutations):
    """`permutation_matrix` as a cell keeps it: a NumPy array, which each traced graph
    (TensorFlow's, JAX's) holds as a constant; on torch a tensor made once, because converting
    the array at every step costs a copy there and breaks the graph of ``torch.compile``.

    Example:

    >>> tuple(permutation_constant([[0, 1], [1, 0]]).shape)
    (2, 4)
    """
    matrix = permutation_matrix(permutations)
    return ops.convert_to_tensor(matrix) if keras.backend.backend() == "torch" else matrix


def permuted_copies(x, matrix, num_copies):
    """Permuted copies of a key ``[batch, n]`` in ``[re | im]`` layout → ``(re, im)``, each
    ``[batch, C, n/2]``.

    ``matrix`` is `permutation_matrix` (cast to the compute dtype). Read as ``[2 * batch,
    n/2]``, the key's rows are ``(b, re), (b, im)``: one matmul permutes both halves, and the
    product is ``[batch, 2, C, n/2]`` without a transpose.
    """
    num_complex = x.shape[-1] // 2
    rows = ops.reshape(x, (-1, num_complex))
    copies = ops.reshape(ops.matmul(rows, matrix), (-1, 2, num_copies, num_complex))
    return tuple(ops.unstack(copies, 2, axis=1))


def bounded_copies(key, matrix, num_copies):
    """The memory keys ``K_c`` of a key ``[batch, n]`` in ``[re | im]`` layout: `bound`, then
    `permuted_copies` (eqs. 4, 9-10); returns ``(re, im)``, each ``[batch, C, n/2]``.

    ``matrix`` is `permutation_constant` (cast here to the key's dtype).
    """
    key = bound(key)
    if num_copies == 1:
        key_re, key_im = complexify(key)
        return key_re[:, None, :], key_im[:, None, :]
    matrix = ops.convert_to_tensor(matrix, dtype=key.dtype)
    return permuted_copies(key, matrix, num_copies)


def unpermuting_indices(permutations):
    """Gather indices ``[C * m]`` that undo the copies' permutations: gathering the ``C * m``
    entries of all copies (copy-major, as `permuted_copies` lays them out) at these indices
    puts every copy back in the key's order, ``g[c*m + i] = copies[c*m + perm_c^-1[i]]``.

    Example:

    >>> unpermuting_indices([[0, 1, 2], [2, 0, 1]]).tolist()
    [0, 1, 2, 4, 5, 3]
    """
    permutations = np.asarray(permutations)
    num_copies, num_complex = permutations.shape
    inverse = np.argsort(permutations, axis=1)
    return (np.arange(num_copies)[:, None] * num_complex + inverse).reshape(-1).astype(np.int32)


def permuted_copies_gradient(grad_re, grad_im, indices, num_copies):
    """Adjoint of `permuted_copies`: the copies' gradients ``(re, im)``, each ``[batch, C,
    n/2]``, → the key's ``[batch, n]`` (``[re | im]`` layout), the sum over the copies of
    each copy's gradient put back in the key's order.

    ``indices`` is `unpermuting_indices`. The gather moves numbers and the sum over copies
    runs over each entry's ``C`` values, so this equals multiplying by ``P^T`` (one 1 per
    row and copy) up to the order of that sum. Under XLA the gather and the sum fuse with
    the computation of the copies' gradients, which a matmul would need written out first.
    """
    if num_copies == 1:
        return uncomplexify(grad_re[:, 0], grad_im[:, 0])
    num_complex = grad_re.shape[-1]
    rows = ops.reshape(ops.stack([grad_re, grad_im], axis=1), (-1, 2, num_copies * num_complex))
    unpermuted = ops.take(rows, indices, axis=2)
    summed = ops.sum(ops.reshape(unpermuted, (-1, 2, num_copies, num_complex)), axis=2)
    return ops.reshape(summed, (-1, 2 * num_complex))


def permuted_copies_parts(re, im, matrix, num_copies):
    """`permuted_copies` of a key given as ``(re, im)`` ``[batch, m]``."""
    return permuted_copies(uncomplexify(re, im), matrix, num_copies)


def split_memory(memory, num_copies):
    """Memory ``[batch, n * C]`` → ``(re, im)``, each ``[batch, C, n/2]``.

    The layout ``[Re copy0 | ... | Re copy(C-1) | Im copy0 | ...]`` is a ``[batch, 2, C, n/2]``
    tensor read row by row, so one reshape exposes both halves.
    """
    num_complex = memory.shape[-1] // (2 * num_copies)
    parts = ops.reshape(memory, (-1, 2, num_copies, num_complex))
    return tuple(ops.unstack(parts, 2, axis=1))


def join_memory(re, im):
    """Inverse of `split_memory`: two ``[batch, C, n/2]`` tensors → ``[batch, n * C]``."""
    width = 2 * re.shape[1] * re.shape[2]
    return ops.reshape(ops.stack([re, im], axis=1), (-1, width))


def read_memory_parts(key_re, key_im, memory_re, memory_im, conjugate_key=True):
    """Retrieval averaged over copies (eq. 5): ``mean_c conj(K_c) (*) S_c``.

    All inputs are ``[batch, C, m]``; returns ``(re, im)`` ``[batch, m]``.
    ``conjugate_key=False`` reads with ``K_c`` itself (the released Dual key).
    """
    if conjugate_key:  # (a - ib)(c + id) = (ac + bd) + i(ad - bc)
        read_re = key_re * memory_re + key_im * memory_im
        read_im = key_re * memory_im - key_im * memory_re
    else:
        read_re, read_im = complex_multiply_parts(key_re, key_im, memory_re, memory_im)
    return ops.mean(read_re, axis=1), ops.mean(read_im, axis=1)


def write_memory_parts(key_re, key_im, memory_re, memory_im, value_re, value_im):
    """Adds ``K_c (*) value`` to every copy ``S_c`` (eq. 12); ``value`` is ``[batch, m]``."""
    value_re, value_im = value_re[:, None, :], value_im[:, None, :]
    add_re, add_im = complex_multiply_parts(key_re, key_im, value_re, value_im)
    return memory_re + add_re, memory_im + add_im


def write_memory(key_re, key_im, memory_re, memory_im, value):
    """`write_memory_parts` with ``value`` ``[batch, n]`` in ``[re | im]`` layout; returns the
    new memory ``[batch, n * C]`` (`join_memory`)."""
    return join_memory(
        *write_memory_parts(key_re, key_im, memory_re, memory_im, *complexify(value))
    )
