"""Pretrained word vectors: GloVe text files or JSON ``{word: vector}`` files."""

import gzip
import json

import numpy as np


def _open_text(path):
    path = str(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def load_word_vectors(path, vocabulary=None):
    """Reads word vectors from a GloVe text file (``word v1 v2 ...`` per line, optionally
    gzipped) or a JSON file ``{word: [floats]}``.

    Args:
        path: the file; ``.json`` (or ``.json.gz``) is read as JSON, anything else as GloVe.
        vocabulary: optional set of words to keep (saves memory with large files).

    Returns:
        dict ``{word: float32 vector}``, all vectors of one dimension.

    Raises:
        ValueError: the file is empty or its vectors have different dimensions.
    """
    keep = None if vocabulary is None else set(vocabulary)
    vectors = {}
    if str(path).endswith((".json", ".json.gz")):
        with _open_text(path) as handle:
            for word, values in json.load(handle).items():
                if keep is None or word in keep:
                    vectors[word] = np.asarray(values, dtype=np.float32)
    else:
        with _open_text(path) as handle:
            for line in handle:
                parts = line.rstrip().split(" ")
                if len(parts) < 2 or (keep is not None and parts[0] not in keep):
                    continue
                vectors[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
    dims = {v.shape[0] for v in vectors.values()}
    if not vectors and keep is None:
        raise ValueError(f"No word vectors found in {path}.")
    if len(dims) > 1:
        raise ValueError(f"Word vectors in {path} have different dimensions: {sorted(dims)}.")
    return vectors


def embedding_matrix(vocabulary, vectors, dim=None, scale=1.0, seed=0, lowercase_fallback=True):
    """An embedding matrix for ``vocabulary`` (list of words, row = id).

    Rows of words with a pretrained vector take it; the others are drawn from
    ``N(0, scale^2)`` (the original SNLI code's initialisation of unknown words).

    Returns:
        ``(matrix float32 [len(vocabulary), dim], number of words found)``.
    """
    if dim is None:
        if not vectors:
            raise ValueError("`dim` is required when `vectors` is empty.")
        dim = len(next(iter(vectors.values())))
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, scale, size=(len(vocabulary), dim)).astype(np.float32)
    found = 0
    for row, word in enumerate(vocabulary):
        vector = vectors.get(word)
        if vector is None and lowercase_fallback:
            vector = vectors.get(word.lower())
        if vector is not None:
            if vector.shape[0] != dim:
                raise ValueError(
                    f"The vector of {word!r} has dimension {vector.shape[0]}, expected {dim}."
                )
            matrix[row] = vector
            found += 1
    return matrix, found
