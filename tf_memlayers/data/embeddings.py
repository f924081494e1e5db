"""Pretrained word vectors: GloVe text files or JSON ``{word: vector}`` files."""

import gzip
import json

import numpy as np


def _open_text(path):
    path = str(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _glove_entries(handle):
    """``(word, value strings)`` per line of a GloVe-style text file.

    The vector is the last ``dim`` fields, ``dim`` taken from the first line; the word is
    everything before them, so words containing spaces (as in ``glove.840B.300d.txt``, e.g.
    ``"to name@domain.com"``) are read whole. A ``"count dim"`` header line is skipped.
    """
    dim = None
    for line in handle:
        fields = line.rstrip().split(" ")
        if dim is None:
            if len(fields) == 2 and all(field.isdigit() for field in fields):
                continue
            dim = len(fields) - 1
        if dim < 1 or len(fields) <= dim:
            continue
        yield " ".join(fields[:-dim]), fields[-dim:]


def load_word_vectors(path, vocabulary=None):
    """Reads word vectors from a GloVe text file (``word v1 v2 ...`` per line, optionally
    gzipped) or a JSON file ``{word: [floats]}``.

    Args:
        path: the file; ``.json`` (or ``.json.gz``) is read as JSON, anything else as GloVe.
        vocabulary: optional set of words to keep, with their lowercase forms (for
            `embedding_matrix`'s fallback); saves memory with large files.

    Returns:
        dict ``{word: float32 vector}``, all vectors of one dimension. Lines whose values do
        not parse as numbers are skipped.

    Raises:
        ValueError: the file has no vectors, none for the vocabulary, or vectors of different
            dimensions.
    """
    keep = None
    if vocabulary is not None:
        keep = set(vocabulary) | {word.lower() for word in vocabulary}
    vectors = {}
    if str(path).endswith((".json", ".json.gz")):
        with _open_text(path) as handle:
            entries = list(json.load(handle).items())
    else:
        with _open_text(path) as handle:
            entries = [(w, v) for w, v in _glove_entries(handle) if keep is None or w in keep]
    for word, values in entries:
        if keep is not None and word not in keep:
            continue
        try:
            vectors[word] = np.asarray(values, dtype=np.float32)
        except ValueError:
            continue
    if not vectors:
        which = "" if keep is None else f" for any of the {len(vocabulary):,} vocabulary words"
        raise ValueError(f"No word vectors found in {path}{which}.")
    dims = {v.shape[0] for v in vectors.values()}
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
