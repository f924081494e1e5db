"""Pretrained word vectors: GloVe text files or JSON ``{word: vector}`` files."""

import json

import numpy as np

from examples.harness.data.files import gzip_errors, open_text


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _trailing_numbers(fields):
    """How many of ``fields`` after the first one are numbers, counted from the end."""
    count = 0
    while count < len(fields) - 1 and _is_number(fields[-1 - count]):
        count += 1
    return count


def _values(count):
    return f"{count} value" if count == 1 else f"{count} values"


def _glove_entries(handle, path):
    """``(word, value strings)`` per line of a GloVe-style text file.

    The vector is the last ``dim`` fields, ``dim`` taken from the first line; the word is
    everything before them, so words containing spaces (as in ``glove.840B.300d.txt``, e.g.
    ``"to name@domain.com"``) are read whole. A ``"count dim"`` header line and blank lines
    are skipped.

    Raises:
        ValueError: a line has fewer than ``dim`` fields after its word, or more values than
            ``dim`` (its field before the vector is a number, not part of a word).
    """
    dim = first = None
    for number, line in enumerate(handle, 1):
        fields = line.rstrip().split(" ")
        if fields == [""]:
            continue
        if dim is None:
            if len(fields) == 2 and all(field.isdigit() for field in fields):
                continue
            dim, first = _trailing_numbers(fields), number
            if dim == 0:
                raise ValueError(
                    f"{path}, line {number}: no vector after the word; a GloVe file has one "
                    f"`word v1 v2 ...` per line, got {line[:60].rstrip()!r}."
                )
        if len(fields) - 1 < dim or (len(fields) - 1 > dim and _is_number(fields[-dim - 1])):
            found = max(_trailing_numbers(fields), min(len(fields) - 1, dim))
            raise ValueError(
                f"{path}, line {number}: a vector of {_values(found)}, but the vector on line "
                f"{first} has {dim}; every vector must have the same length."
            )
        yield " ".join(fields[:-dim]), fields[-dim:]


def _json_entries(path):
    """``(word, values)`` of a JSON file ``{word: [numbers]}``, all of one length."""
    try:
        with open_text(path) as handle:
            data = json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from error
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object {{word: [numbers]}}, got {data!r:.60}.")
    dim = first = None
    for word, values in data.items():
        if not isinstance(values, list):
            raise ValueError(
                f"{path}: the vector of {word!r} must be a list of numbers, got {values!r:.60}."
            )
        if dim is None:
            dim, first = len(values), word
        elif len(values) != dim:
            raise ValueError(
                f"{path}: the vector of {word!r} has {_values(len(values))}, but the vector of "
                f"{first!r} has {dim}; every vector must have the same length."
            )
    return list(data.items())


def load_word_vectors(path, vocabulary=None):
    """Reads word vectors from a GloVe text file (``word v1 v2 ...`` per line, optionally
    gzipped) or a JSON file ``{word: [floats]}``.

    Args:
        path: str or path-like, the file; ``.json`` (or ``.json.gz``) is read as JSON,
            anything else as GloVe.
        vocabulary: collection of str or `None`, the words to keep, with their lowercase
            forms (for `embedding_matrix`'s fallback); saves memory with large files.
            Defaults to `None` (keep every word).

    Returns:
        dict ``{word: float32 vector}``, all vectors of one dimension. Vectors with a value
        that does not parse as a number are skipped.

    Raises:
        ValueError: the file has no vectors or none for the vocabulary; a line (a JSON
            entry) has a vector of another length than the first one; the file is not
            valid JSON or gzip data. The message names the file and the line (the word).
    """
    keep = None
    if vocabulary is not None:
        keep = set(vocabulary) | {word.lower() for word in vocabulary}
    vectors = {}
    with gzip_errors(path):
        if str(path).endswith((".json", ".json.gz")):
            entries = _json_entries(path)
        else:
            with open_text(path) as handle:
                entries = [
                    (w, v) for w, v in _glove_entries(handle, path) if keep is None or w in keep
                ]
    for word, values in entries:
        if keep is not None and word not in keep:
            continue
        try:
            vectors[word] = np.asarray(values, dtype=np.float32)
        except (TypeError, ValueError):
            continue
    if not vectors:
        which = "" if keep is None else f" for any of the {len(vocabulary):,} vocabulary words"
        raise ValueError(f"No word vectors found in {path}{which}.")
    return vectors


def embedding_matrix(vocabulary, vectors, dim=None, scale=1.0, seed=0, lowercase_fallback=True):
    """An embedding matrix for ``vocabulary`` (list of words, row = id).

    Rows of words with a pretrained vector take it; the others are drawn from
    ``N(0, scale^2)`` (the original SNLI code's initialisation of unknown words).

    Args:
        vocabulary: sequence of str, the words in id order.
        vectors: dict word -> float32 vector, e.g. from `load_word_vectors`.
        dim: int or `None`, the vector size. Defaults to `None`: the size of the vectors.
        scale: float, standard deviation of the rows without a vector. Defaults to 1.0.
        seed: int, seed of those rows. Defaults to 0.
        lowercase_fallback: bool, a word without a vector takes the vector of its
            lowercase form if there is one. Defaults to True.

    Returns:
        ``(matrix float32 [len(vocabulary), dim], number of words found)``.

    Raises:
        ValueError: ``vectors`` is empty and ``dim`` is `None`, or a vector is not of size
            ``dim``.
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
