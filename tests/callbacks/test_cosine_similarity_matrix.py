"""The cosine similarity matrix against its definition, on every backend."""

import numpy as np

from tf_memlayers.callbacks import cosine_similarity_matrix


def test_every_pairs_cosine_and_zero_for_a_zero_vector():
    rng = np.random.default_rng(0)
    read, written = (rng.normal(size=(rows, 6)).astype("float32") for rows in (4, 3))
    matrix = cosine_similarity_matrix(read, written)
    assert matrix.shape == (4, 3) and matrix.dtype == np.float64
    a, b = read.astype(np.float64), written.astype(np.float64)
    cosines = a @ b.T / np.sqrt(np.outer((a * a).sum(1), (b * b).sum(1)))  # [i, j]: a_i, b_j
    np.testing.assert_allclose(matrix, cosines, rtol=0, atol=1e-12)
    # A step that wrote or read nothing: similarity 0 with everything, not NaN.
    read, written = np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[2.0, 0.0], [0.0, 0.0]])
    expected = [[0, 0], [2**-0.5, 0]]
    np.testing.assert_allclose(cosine_similarity_matrix(read, written), expected, atol=1e-12)
