"""`cosine_similarity_matrix`: what `MemoryRetrievalHeatmap` draws, as numbers (NumPy only,
on every backend and without TensorFlow)."""

import numpy as np


def cosine_similarity_matrix(read, written, eps=1e-12):
    """The cosine similarity of every row of ``read`` with every row of ``written``.

    `MemoryRetrievalHeatmap` draws this matrix of what a sentence read from an associative
    memory against what the other sentence wrote; here it is as numbers, for one's own
    statistics or plots. NumPy only: it runs without TensorFlow.

    Args:
        read: Array ``[rows, features]``, one vector per row.
        written: Array ``[columns, features]``, one vector per row.
        eps: Float, the smallest norm divided by (a zero vector gets similarity 0).
            Default: `1e-12`.

    Returns:
        float64 array ``[rows, columns]`` whose ``[i, j]`` is the cosine similarity of
        ``read[i]`` and ``written[j]``.

    Example:

    >>> from tf_memlayers.callbacks import cosine_similarity_matrix
    >>> cosine_similarity_matrix([[1.0, 0.0], [0.0, 2.0]], [[3.0, 0.0]]).tolist()
    [[1.0], [0.0]]
    """
    read = np.asarray(read, dtype=np.float64)
    written = np.asarray(written, dtype=np.float64)
    read = read / np.maximum(np.linalg.norm(read, axis=1, keepdims=True), eps)
    written = written / np.maximum(np.linalg.norm(written, axis=1, keepdims=True), eps)
    return read @ written.T
