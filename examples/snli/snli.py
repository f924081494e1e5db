"""Readers of the Stanford Natural Language Inference corpus, and the chain of its sources.

Sources, in the order `load_nli_splits` tries them with ``source="auto"``:

1. files under ``data_dir`` when it is given: the official SNLI 1.0 release
   (``snli_1.0_{train,dev,test}.jsonl`` or ``.txt``, or the ``snli_1.0.zip`` archive itself,
   read without extracting) or the InferSent layout (``s1.{split}``, ``s2.{split}``,
   ``labels.{split}``);
2. the tensorflow-datasets ``snli`` builder when it is installed and already prepared; with
   ``download=True`` tensorflow-datasets downloads and prepares it first (needs internet),
   and the chain stops there;
3. the embedded default, `examples.snli.generated_nli.generated_splits`: generated pairs
   whose labels need the premise to be recalled, so a model can be trained on a fresh
   machine with no download.

Every source yields `NLIExample` tuples of lower-cased tokens
(`examples.snli.nli_examples`); pairs whose gold label is ``-`` (no annotator majority)
are dropped.
"""

import json
import os
import zipfile
import zlib

from examples.harness.checks import check_bool, check_choice
from examples.harness.data.files import check_not_blank, decode_utf8, decode_utf8_lines
from examples.snli.generated_nli import generated_splits
from examples.snli.nli_examples import SPLITS, make_example
from examples.snli.snli_tfds import examples_from_tfds, read_tfds  # noqa: F401 (public here)

# -- official SNLI 1.0 release --------------------------------------------------------------

_OFFICIAL_FIELDS = ("sentence1", "sentence2", "gold_label")


def _official_rows(lines, suffix, name):
    """``(line number, (sentence1, sentence2, gold_label))`` of an official SNLI file."""
    if suffix == ".jsonl":
        for number, line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{name}, line {number}: not valid JSON: {error.msg} (column {error.colno})."
                ) from error
            if not isinstance(record, dict):
                raise ValueError(
                    f"{name}, line {number}: expected a JSON object with "
                    f"{', '.join(_OFFICIAL_FIELDS)}; got {record!r:.60}."
                )
            missing = [field for field in _OFFICIAL_FIELDS if field not in record]
            if missing:
                raise ValueError(
                    f"{name}, line {number}: the record has no {', '.join(missing)} (an SNLI "
                    f"1.0 record has {', '.join(_OFFICIAL_FIELDS)})."
                )
            yield number, tuple(record[field] for field in _OFFICIAL_FIELDS)
        return
    header = next(lines, None)
    if header is None:
        return
    columns = {column: i for i, column in enumerate(header[1].split("\t"))}
    missing = [field for field in _OFFICIAL_FIELDS if field not in columns]
    if missing:
        raise ValueError(
            f"{name}: the header line has no column {', '.join(missing)} (an SNLI 1.0 .txt "
            f"file has tab-separated columns including {', '.join(_OFFICIAL_FIELDS)})."
        )
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) < len(columns):
            continue
        yield number, tuple(fields[columns[field]] for field in _OFFICIAL_FIELDS)


def _file_examples(numbered_rows, name):
    """The `NLIExample` objects of ``(line number, (premise, hypothesis, label))`` rows of file
    ``name``.

    Raises:
        ValueError: a row has a sentence that is not text or an unknown label, or the file
            holds no pair with a gold label; the message names the file (and the line).
    """
    examples, rows = [], 0
    for number, (premise, hypothesis, label) in numbered_rows:
        rows += 1
        for what, sentence in (("premise", premise), ("hypothesis", hypothesis)):
            if not isinstance(sentence, str):
                raise ValueError(
                    f"{name}, line {number}: the {what} must be text, got {sentence!r:.60}."
                )
        try:
            example = make_example(premise, hypothesis, label)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}, line {number}: {error}") from error
        if example is not None:
            examples.append(example)
    if not examples and rows:
        raise ValueError(
            f"{name} holds no usable sentence pairs: none of its {rows:,} pairs has a gold "
            "label (all are '-')."
        )
    if not examples:
        raise ValueError(f"{name} is empty: it holds no sentence pairs.")
    return examples


def _read_official_file(raw, suffix, name):
    """The examples of an official SNLI file ``name``, open in binary mode as ``raw``."""
    return _file_examples(_official_rows(decode_utf8_lines(raw, name), suffix, name), name)


def read_official(path, split):
    """Reads ``split`` of the official SNLI 1.0 release from a directory or ``snli_1.0.zip``.

    Args:
        path: str or path-like, a directory holding ``snli_1.0_{split}.jsonl`` or ``.txt``,
            or the ``snli_1.0.zip`` archive (read without extracting).
        split: str, ``"train"``, ``"dev"`` or ``"test"``.

    Returns:
        A list of `NLIExample` (pairs labelled ``-`` dropped).

    Raises:
        FileNotFoundError: there is no file for ``split``.
        ValueError: the archive is not a zip file, or the split's file is not UTF-8, has a
            line that is not JSON or lacks ``sentence1``, ``sentence2`` or ``gold_label``,
            has an unknown label, or holds no labelled pair. The message names the file.
    """
    check_choice("split", split, SPLITS)
    path = str(path)
    if path.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as archive:
                for suffix in (".jsonl", ".txt"):
                    name = next(
                        (n for n in archive.namelist() if n.endswith(f"snli_1.0_{split}{suffix}")),
                        None,
                    )
                    if name:
                        with archive.open(name) as raw:
                            return _read_official_file(raw, suffix, f"{path}:{name}")
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise ValueError(f"{path} is not a valid zip archive: {error}.") from error
        raise FileNotFoundError(f"{path} holds no snli_1.0_{split}.jsonl or .txt.")
    for suffix in (".jsonl", ".txt"):
        file = os.path.join(path, f"snli_1.0_{split}{suffix}")
        if os.path.exists(file):
            with open(file, "rb") as raw:
                return _read_official_file(raw, suffix, file)
    raise FileNotFoundError(f"{path} holds no snli_1.0_{split}.jsonl or .txt.")


# -- InferSent layout -------------------------------------------------------------------------


_INFERSENT_CONTENTS = {"s1": "premises", "s2": "hypotheses", "labels": "labels"}


def read_infersent(directory, split):
    """Reads ``s1.{split}``, ``s2.{split}``, ``labels.{split}`` (one item per line).

    Args:
        directory: str or path-like, the folder holding the three files.
        split: str, ``"train"``, ``"dev"`` or ``"test"``.

    Returns:
        A list of `NLIExample` (pairs labelled ``-`` dropped).

    Raises:
        ValueError: a file is empty or blank, is not UTF-8 text, or has an unknown label; the
            files have different numbers of lines; no pair has a gold label. The message
            names the file.
    """
    check_choice("split", split, SPLITS)
    lines = []
    for prefix, contents in _INFERSENT_CONTENTS.items():
        file = os.path.join(directory, f"{prefix}.{split}")
        with open(file, "rb") as handle:
            text = decode_utf8(handle.read(), file)
        lines.append(check_not_blank(text, file, contents).splitlines())
    if not len(lines[0]) == len(lines[1]) == len(lines[2]):
        raise ValueError(
            f"s1/s2/labels.{split} in {directory} have different numbers of lines: "
            f"{[len(x) for x in lines]}."
        )
    labels_file = os.path.join(directory, f"labels.{split}")
    return _file_examples(enumerate(zip(*lines), 1), labels_file)


def find_files(data_dir):
    """Which SNLI layout a folder holds, by the names of its files.

    Args:
        data_dir: str or path-like, a folder or a ``.zip`` archive.

    Returns:
        ``"official"`` (SNLI 1.0 files or ``snli_1.0.zip``), ``"infersent"`` (``s1.*``,
        ``s2.*``, ``labels.*``), or `None`.
    """
    data_dir = str(data_dir)
    if data_dir.endswith(".zip") and os.path.isfile(data_dir):
        return "official"
    if not os.path.isdir(data_dir):
        return None
    names = set(os.listdir(data_dir))
    if any(n.startswith("snli_1.0_") for n in names):
        return "official"
    if {"s1.dev", "s2.dev", "labels.dev"} <= names or {"s1.train", "s2.train"} <= names:
        return "infersent"
    return None


def _no_files_error(data_dir):
    return FileNotFoundError(
        f"{data_dir} holds neither SNLI 1.0 files (snli_1.0_<split>.jsonl/.txt, snli_1.0.zip) "
        "nor InferSent files (s1.<split>, s2.<split>, labels.<split>)."
    )


def check_files(data_dir, splits=SPLITS):
    """Checks that ``data_dir`` holds a file for each of ``splits``, without reading them.

    Args:
        data_dir: str or path-like, a directory of official SNLI 1.0 or InferSent files, or
            ``snli_1.0.zip``.
        splits: sequence of str, the splits needed. Defaults to all three.

    Returns:
        ``"official"`` or ``"infersent"`` (`find_files`).

    Raises:
        FileNotFoundError: ``data_dir`` holds no SNLI files, or none for a split (the message
            names the missing files).
        ValueError: ``data_dir`` is a ``.zip`` that is not a zip archive.
    """
    kind = find_files(data_dir)
    if kind is None:
        raise _no_files_error(data_dir)
    data_dir = str(data_dir)
    if kind == "infersent":
        names = set(os.listdir(data_dir))
        wanted = [f"{prefix}.{split}" for split in splits for prefix in _INFERSENT_CONTENTS]
        missing = [name for name in wanted if name not in names]
    else:
        if data_dir.endswith(".zip"):
            try:
                with zipfile.ZipFile(data_dir) as archive:
                    names = {name.rsplit("/", 1)[-1] for name in archive.namelist()}
            except zipfile.BadZipFile as error:
                raise ValueError(f"{data_dir} is not a valid zip archive: {error}.") from error
        else:
            names = set(os.listdir(data_dir))
        missing = [
            f"snli_1.0_{split}.jsonl (or .txt)"
            for split in splits
            if not {f"snli_1.0_{split}.jsonl", f"snli_1.0_{split}.txt"} & names
        ]
    if missing:
        raise FileNotFoundError(f"{data_dir} has no {', '.join(missing)}.")
    return kind


def read_files(data_dir, split):
    """Reads a split from a folder in whichever distributed layout it holds (`find_files`).

    Args:
        data_dir: str or path-like, as for `check_files`.
        split: str, ``"train"``, ``"dev"`` or ``"test"``.

    Returns:
        A list of `NLIExample` (pairs labelled ``-`` dropped).

    Raises:
        FileNotFoundError: ``data_dir`` holds no SNLI files, or none for ``split``.
        ValueError: as `read_official` and `read_infersent`.
    """
    kind = find_files(data_dir)
    if kind == "official":
        return read_official(data_dir, split)
    if kind == "infersent":
        return read_infersent(data_dir, split)
    raise _no_files_error(data_dir)


# -- the chain --------------------------------------------------------------------------------

SOURCES = ("auto", "files", "tfds", "generated")


def load_nli_splits(
    source="auto",
    data_dir=None,
    tfds_data_dir=None,
    train_size="medium",
    seed=0,
    download=False,
):
    """Loads train/dev/test examples from the first available source (see module docstring).

    Args:
        source: str, one of `SOURCES`: ``"auto"`` (the chain), ``"files"``, ``"tfds"`` or
            ``"generated"``. Defaults to ``"auto"``.
        data_dir: str, path-like or `None`, the folder (or ``snli_1.0.zip``) of SNLI files.
            Defaults to `None`.
        tfds_data_dir: str or `None`, the tensorflow-datasets data folder. Defaults to
            `None`.
        train_size: str, size of the generated corpus (`generated_splits`). Defaults to
            ``"medium"``.
        seed: int, seed of the generated corpus. Defaults to 0.
        download: bool, let tensorflow-datasets download and prepare SNLI when it is not
            prepared (``source`` ``"auto"`` without ``data_dir``, or ``"tfds"``; the
            generated corpus is then no fallback). Defaults to False.

    Returns:
        ``(splits, source)``: dict ``{"train", "dev", "test"}`` -> list of `NLIExample`, and
        the name of the source used (``"files"``, ``"tfds"`` or ``"generated"``).

    Raises:
        ValueError: an unknown ``source``, or ``source="files"`` without ``data_dir``; as
            `read_files` for bad files.
        FileNotFoundError: as `read_files`, or with ``source="tfds"`` when the builder is not
            prepared.
        ImportError: ``source="tfds"`` (or ``download``) without tensorflow-datasets.
        OSError: ``download`` and the download failed.
    """
    check_choice("source", source, SOURCES)
    if check_bool("download", download) and (source == "generated" or data_dir is not None):
        raise ValueError(
            f"`download=True` fetches SNLI through tensorflow-datasets; it cannot be combined "
            f"with source={source!r}"
            + (f" and data_dir={str(data_dir)!r}" if data_dir else "")
            + ". Use source 'auto' or 'tfds' without data_dir."
        )
    if source in ("auto", "files") and data_dir is not None:
        return {s: read_files(data_dir, s) for s in SPLITS}, "files"
    if source == "files":
        raise ValueError("`source='files'` needs `data_dir`.")
    if source in ("auto", "tfds"):
        try:
            return {s: read_tfds(s, tfds_data_dir, download) for s in SPLITS}, "tfds"
        except (ImportError, FileNotFoundError):
            if source == "tfds" or download:
                raise
    return generated_splits(train_size, seed), "generated"
