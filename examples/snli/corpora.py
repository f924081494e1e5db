"""Readers of SNLI in its distributed formats, and of GloVe word vectors.

* `read_files`: a folder (or ``snli_1.0.zip``) of the official SNLI 1.0 release,
  ``snli_1.0_<split>.jsonl`` or ``.txt`` (`read_official`), or of InferSent's layout,
  ``s1.<split>``, ``s2.<split>``, ``labels.<split>`` with one item a line (`read_infersent`);
* `read_tfds`: the tensorflow-datasets ``snli`` builder;
* `load_word_vectors` and `embedding_matrix`: GloVe text files (or JSON ``{word: vector}``
  files), optionally gzipped.

Every reader yields `Pair` tuples of lower-cased tokens (`tokenize`) and a label id (0
entailment, 1 neutral, 2 contradiction, tensorflow-datasets' order); pairs whose gold label is
``-`` (no annotator majority) are dropped. A file that cannot be read is a `ValueError` naming
it, and the line at fault.
"""

import collections
import gzip
import json
import os
import re
import unicodedata
import zipfile
import zlib

import numpy as np

LABELS = ("entailment", "neutral", "contradiction")
SPLITS = ("train", "dev", "test")
Pair = collections.namedtuple("Pair", ["premise", "hypothesis", "label"])


# A word: letters, digits and the combining marks, which ``\w`` leaves out (Devanagari's vowel
# signs, a decomposed accent); a symbol with what joins it (an emoji's skin tone, variation
# selector, or a zero-width joiner and the next symbol).
_CODE_POINTS = (*range(0x20000), *range(0xE0100, 0xE01F0))
_MARK = "".join(chr(c) for c in _CODE_POINTS if unicodedata.category(chr(c))[0] == "M")
_W = rf"[\w{_MARK}]"
_JOINED = rf"[{_MARK}\ufe0f\U0001F3FB-\U0001F3FF]|\u200d[^\w\s]"
_TOKEN = re.compile(rf"{_W}+(?=n't\b)|n't\b|'{_W}*|{_W}+|[^\w\s](?:{_JOINED})*")


def tokenize(text):
    """Lower-cases a sentence and splits it into words and punctuation (Penn Treebank style).

    >>> tokenize("A man doesn't wear a hat, it's sunny.")
    ('a', 'man', 'does', "n't", 'wear', 'a', 'hat', ',', 'it', "'s", 'sunny', '.')
    >>> tokenize("हिन्दी भाषा 👍🏽!")  # the vowel signs and the skin tone stay with their words
    ('हिन्दी', 'भाषा', '👍🏽', '!')
    """
    return tuple(_TOKEN.findall(text.lower()))


def make_pair(premise, hypothesis, label):
    """The `Pair` of two raw sentences and a label (a name of `LABELS` or its id), or `None`
    for a pair without a gold label (``"-"``, ``""`` or ``-1``).

    >>> make_pair("A cat sleeps.", "An animal rests.", "entailment")
    Pair(premise=('a', 'cat', 'sleeps', '.'), hypothesis=('an', 'animal', 'rests', '.'), label=0)
    """
    if isinstance(label, str):
        if label.strip() in ("-", ""):
            return None
        if label.strip() not in LABELS:
            raise ValueError(f"Unknown label {label!r}; allowed: {', '.join(LABELS)} or '-'.")
        label = LABELS.index(label.strip())
    if int(label) == -1:
        return None
    if not 0 <= int(label) < len(LABELS):
        raise ValueError(f"Label id {label} is outside the three classes 0, 1, 2.")
    return Pair(tokenize(premise), tokenize(hypothesis), int(label))


def _pairs(rows, name):
    """The pairs of ``(line number, (premise, hypothesis, label))`` rows of the file ``name``."""
    pairs, count = [], 0
    for number, (premise, hypothesis, label) in rows:
        count += 1
        try:
            for what, sentence in (("premise", premise), ("hypothesis", hypothesis)):
                if not isinstance(sentence, str):
                    raise ValueError(f"the {what} must be text, got {sentence!r:.60}.")
            pair = make_pair(premise, hypothesis, label)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}, line {number}: {error}") from error
        if pair is not None:
            pairs.append(pair)
    if not pairs and count:
        raise ValueError(
            f"{name} holds no usable sentence pairs: none of its {count:,} pairs has a gold "
            "label (all are '-')."
        )
    if not pairs:
        raise ValueError(f"{name} is empty: it holds no sentence pairs.")
    return pairs


def _lines(raw_lines, name):
    """``(line number, text)`` of binary lines, decoded strictly as UTF-8 (a byte-order mark
    opening the first line left out)."""
    for number, raw in enumerate(raw_lines, 1):
        try:
            yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{name}, line {number}: not UTF-8 text (byte {raw[error.start]:#04x}: "
                f"{error.reason})."
            ) from error


_FIELDS = ("sentence1", "sentence2", "gold_label")


def _official_rows(raw_lines, name):
    """The ``(line number, (sentence1, sentence2, gold_label))`` rows of an official file."""
    lines = _lines(raw_lines, name)
    if name.endswith(".jsonl"):
        for number, line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{name}, line {number}: not valid JSON: {error.msg} (column {error.colno})."
                ) from error
            missing = (
                [f for f in _FIELDS if f not in record] if isinstance(record, dict) else _FIELDS
            )
            if missing:
                raise ValueError(
                    f"{name}, line {number}: the record has no {', '.join(missing)} (an SNLI "
                    f"1.0 record has {', '.join(_FIELDS)})."
                )
            yield number, tuple(record[field] for field in _FIELDS)
        return
    header = next(lines, None)
    if header is None:
        return
    columns = header[1].split("\t")
    missing = [field for field in _FIELDS if field not in columns]
    if missing:
        raise ValueError(
            f"{name}: the header line has no column {', '.join(missing)} (an SNLI 1.0 .txt "
            f"file has tab-separated columns including {', '.join(_FIELDS)})."
        )
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) >= len(columns):
            yield number, tuple(fields[columns.index(field)] for field in _FIELDS)


def read_official(path, split):
    """The pairs of ``split`` of the official SNLI 1.0 release: ``snli_1.0_<split>.jsonl`` (or
    ``.txt``) in the folder ``path``, or in the archive ``snli_1.0.zip`` itself."""
    path = str(path)
    names = [f"snli_1.0_{split}.jsonl", f"snli_1.0_{split}.txt"]
    if path.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as archive:
                members = [m for n in names for m in archive.namelist() if m.endswith(n)]
                if members:
                    with archive.open(members[0]) as raw:
                        name = f"{path}:{members[0]}"
                        return _pairs(_official_rows(raw, name), name)
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise ValueError(f"{path} is not a valid zip archive: {error}.") from error
    else:
        for file in (os.path.join(path, name) for name in names):
            if os.path.exists(file):
                with open(file, "rb") as raw:
                    return _pairs(_official_rows(raw, file), file)
    raise FileNotFoundError(f"{path} holds no snli_1.0_{split}.jsonl or .txt.")


_INFERSENT = {"s1": "premises", "s2": "hypotheses", "labels": "labels"}


def read_infersent(directory, split):
    """The pairs of ``s1.<split>``, ``s2.<split>`` and ``labels.<split>`` in ``directory``."""
    columns = []
    for prefix, contents in _INFERSENT.items():
        file = os.path.join(directory, f"{prefix}.{split}")
        with open(file, "rb") as handle:
            lines = [line for _, line in _lines(handle.read().splitlines(), file)]
        if not "".join(lines).strip():
            state = "empty" if not lines else "blank (only whitespace)"
            raise ValueError(f"{file} is {state}: it holds no {contents}.")
        columns.append(lines)
    if len({len(column) for column in columns}) > 1:
        raise ValueError(
            f"s1/s2/labels.{split} in {directory} have different numbers of lines: "
            f"{[len(column) for column in columns]}."
        )
    return _pairs(enumerate(zip(*columns), 1), os.path.join(directory, f"labels.{split}"))


def find_files(data_dir):
    """Which layout ``data_dir`` holds: ``"official"``, ``"infersent"`` or `None`."""
    data_dir = str(data_dir)
    if data_dir.endswith(".zip") and os.path.isfile(data_dir):
        return "official"
    names = set(os.listdir(data_dir)) if os.path.isdir(data_dir) else set()
    if any(name.startswith("snli_1.0_") for name in names):
        return "official"
    if {"s1.dev", "s2.dev", "labels.dev"} <= names or {"s1.train", "s2.train"} <= names:
        return "infersent"
    return None


def check_files(data_dir):
    """Checks, without reading them, that ``data_dir`` holds a file of each split.

    Raises:
        FileNotFoundError: naming what is missing.
        ValueError: ``data_dir`` is a ``.zip`` that is not a zip archive.
    """
    kind, data_dir = find_files(data_dir), str(data_dir)
    if kind is None:
        where = "holds no" if os.path.isdir(data_dir) else "is not a directory with"
        raise FileNotFoundError(
            f"{data_dir} {where} SNLI 1.0 files (snli_1.0_<split>.jsonl/.txt, snli_1.0.zip) "
            "or InferSent files (s1.<split>, s2.<split>, labels.<split>)."
        )
    if kind == "infersent":
        names = set(os.listdir(data_dir))
        wanted = [f"{prefix}.{split}" for split in SPLITS for prefix in _INFERSENT]
        missing = [name for name in wanted if name not in names]
    else:
        try:
            if data_dir.endswith(".zip"):
                with zipfile.ZipFile(data_dir) as archive:
                    names = {name.rsplit("/", 1)[-1] for name in archive.namelist()}
            else:
                names = set(os.listdir(data_dir))
        except zipfile.BadZipFile as error:
            raise ValueError(f"{data_dir} is not a valid zip archive: {error}.") from error
        missing = [
            f"snli_1.0_{split}.jsonl (or .txt)"
            for split in SPLITS
            if not {f"snli_1.0_{split}.jsonl", f"snli_1.0_{split}.txt"} & names
        ]
    if missing:
        raise FileNotFoundError(f"{data_dir} has no {', '.join(missing)}.")


def read_files(data_dir, split):
    """The pairs of ``split`` in a folder of either layout (`find_files`)."""
    read = {"official": read_official, "infersent": read_infersent}.get(find_files(data_dir))
    if read is None:
        check_files(data_dir)  # raises, naming what is missing
    return read(data_dir, split)


def read_tfds(split, data_dir=None, download=False):
    """The pairs of ``split`` of the tensorflow-datasets ``snli`` builder (its ``validation``
    for ``"dev"``), downloaded and prepared first only with ``download``.

    Raises:
        ImportError: tensorflow-datasets is not installed.
        FileNotFoundError: the builder is not prepared (and ``download`` is False).
        OSError: ``download`` and the download or preparation failed.
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError(
            "Reading SNLI through tensorflow-datasets needs it installed: pip install "
            'tensorflow-datasets (or "tf-memlayers[datasets]").'
        ) from error
    splits = {"train": "train", "dev": "validation", "test": "test"}
    try:
        dataset = tfds.load("snli", split=splits[split], download=download, data_dir=data_dir)
    except Exception as error:  # tfds raises AssertionError or DatasetNotFoundError
        if download:
            raise OSError(
                f"tensorflow-datasets could not download and prepare `snli`: {error}"
            ) from error
        raise FileNotFoundError(
            f"tensorflow-datasets `snli` is not prepared (--download prepares it): {error}"
        ) from error
    records = dataset.as_numpy_iterator()
    pairs = (
        make_pair(r["premise"].decode("utf-8"), r["hypothesis"].decode("utf-8"), int(r["label"]))
        for r in records
    )
    return [pair for pair in pairs if pair is not None]


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _trailing_numbers(fields):
    count = 0
    while count < len(fields) - 1 and _is_number(fields[-1 - count]):
        count += 1
    return count


def _values(count):
    return f"{count} value" if count == 1 else f"{count} values"


def _glove_entries(lines, path):
    """``(word, value strings)`` of each line of a GloVe file: the vector is the last ``dim``
    fields (``dim`` from the first line), the word all before them, so that words with spaces
    (``glove.840B.300d.txt``'s ``"to name@domain.com"``) are read whole. A ``"count dim"``
    header line and blank lines are skipped."""
    dim = first = None
    for number, line in enumerate(lines, 1):
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


def _decoded_lines(handle, path):
    """The lines of a text ``handle`` read with ``errors="surrogateescape"``, stray undecodable
    bytes as U+FFFD; after the last, a `ValueError` when most bytes that are not ASCII do not."""
    undecodable = not_ascii = 0
    for line in handle:
        if not line.isascii():
            data = line.encode("utf-8", "surrogateescape")  # the bytes read
            undecodable += len(data) - len(data.decode("utf-8", "ignore").encode("utf-8"))
            not_ascii += len(data) - len(data.decode("ascii", "ignore"))
            line = data.decode("utf-8", "replace")
        yield line
    if undecodable >= 10 and undecodable > not_ascii / 2:
        raise ValueError(
            f"{path} is not UTF-8 text: {undecodable:,} of its {not_ascii:,} bytes that are not "
            "ASCII are undecodable (a file in another encoding: convert it to UTF-8)."
        )


def _json_entries(lines, path):
    """``(word, values)`` of a JSON file ``{word: [numbers]}``, all of one length."""
    try:
        data = json.loads("".join(lines))
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
        yield word, values


def load_word_vectors(path, vocabulary=None):
    """``{word: float32 vector}`` of a GloVe text file (``word v1 v2 ...`` a line) or a JSON
    file (``.json``), either optionally gzipped (``.gz``). Vectors with a value that is not a
    number are skipped.

    Args:
        path: The file.
        vocabulary: Optional collection of the words to keep (their lowercase forms kept too,
            for `embedding_matrix`). Default: `None`, every word.

    Raises:
        ValueError: The file is not valid (the message names it, and the line or word), not
            UTF-8, or holds no vector for ``vocabulary``.
    """
    keep = None if vocabulary is None else set(vocabulary) | {w.lower() for w in vocabulary}
    opener = gzip.open if str(path).endswith(".gz") else open
    vectors = {}
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape") as handle:
            read = _json_entries if str(path).endswith((".json", ".json.gz")) else _glove_entries
            for word, values in read(_decoded_lines(handle, path), path):
                if keep is None or word in keep:
                    try:
                        vectors[word] = np.asarray(values, dtype=np.float32)
                    except (TypeError, ValueError):
                        continue
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(
            f"{path} is not a valid gzip file (its name ends in .gz): {error}."
        ) from error
    if not vectors:
        which = "" if keep is None else f" for any of the {len(vocabulary):,} vocabulary words"
        raise ValueError(f"No word vectors found in {path}{which}.")
    return vectors


def embedding_matrix(vocabulary, vectors, seed=0):
    """The embedding matrix of ``vocabulary`` (row = id): a word's vector (or its lowercase
    form's) where ``vectors`` has one, else a row drawn from N(0, 1), as the original code
    started unknown words.

    Returns:
        ``(float32 matrix [len(vocabulary), dim], the number of words found)``.
    """
    dim = len(next(iter(vectors.values())))
    matrix = np.random.default_rng(seed).normal(0.0, 1.0, (len(vocabulary), dim))
    matrix = matrix.astype(np.float32)
    found = 0
    for row, word in enumerate(vocabulary):
        vector = vectors.get(word, vectors.get(word.lower()))
        if vector is not None:
            matrix[row] = vector
            found += 1
    return matrix, found
