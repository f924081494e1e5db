"""The form of a word-level language-model corpus, and the steps its readers share.

A corpus (`LMCorpus`) is a `Vocabulary` and three `TokenStream` splits, ``train``, ``valid``
and ``test``: integer token ids and the offsets at which documents start. The readers of the
distributed corpora (`examples.language_modeling.ptb`, `examples.language_modeling.wikitext2`,
`examples.language_modeling.cbt`) find their split files (`find_split_files`), read them into tokens
(`read_split_tokens`, with `tokenize_lines`: every line becomes its words and one ``<eos>``),
build the vocabulary from the training split and encode the splits (`encode_corpus`);
`read_corpus` does all but the first step for corpora distributed with their vocabulary.
"""

import collections
import dataclasses
import pathlib

import numpy as np

from examples.harness.data.files import check_not_blank, read_text
from examples.harness.data.vocabulary import UNK, Vocabulary, tokenize_lines

SPLITS = ("train", "valid", "test")


@dataclasses.dataclass(frozen=True)
class TokenStream:
    """One split of a corpus: token ids and where documents start.

    Args:
        ids: array-like of ints ``[num_tokens]``, stored as int32.
        document_starts: array-like of sorted ints, the offsets into ``ids`` at which a
            document starts; the first is 0. Stored as int64.

    Raises:
        ValueError: ``document_starts`` does not begin with 0, or is not strictly increasing
            within ``ids``.
    """

    ids: np.ndarray
    document_starts: np.ndarray

    def __post_init__(self):
        starts = np.asarray(self.document_starts, dtype=np.int64)
        if len(self.ids) and (len(starts) == 0 or starts[0] != 0):
            raise ValueError(f"`document_starts` must begin with 0, got {starts[:5].tolist()}.")
        if np.any(np.diff(starts) <= 0) or (len(starts) and starts[-1] >= max(len(self.ids), 1)):
            raise ValueError("`document_starts` must be strictly increasing offsets into `ids`.")
        object.__setattr__(self, "ids", np.asarray(self.ids, dtype=np.int32))
        object.__setattr__(self, "document_starts", starts)

    @property
    def num_tokens(self):
        """int, the length of the stream."""
        return len(self.ids)

    @property
    def num_documents(self):
        """int, the number of documents."""
        return len(self.document_starts)


@dataclasses.dataclass(frozen=True)
class LMCorpus:
    """A language-model corpus: a vocabulary and the train / valid / test streams.

    Args:
        name: str, the corpus (e.g. ``"ptb"``).
        vocabulary: `Vocabulary` of the ids.
        train, valid, test: `TokenStream` of each split.
    """

    name: str
    vocabulary: Vocabulary
    train: TokenStream
    valid: TokenStream
    test: TokenStream

    def split(self, name):
        """The stream of one split.

        Args:
            name: str, ``"train"``, ``"valid"`` or ``"test"``.

        Returns:
            A `TokenStream`.

        Raises:
            ValueError: ``name`` is not a split.
        """
        if name not in SPLITS:
            raise ValueError(f"`name` must be one of {SPLITS}; got {name!r}.")
        return getattr(self, name)


def find_split_files(data_dir, names, corpus):
    """Finds the files of a corpus's splits; each name is also accepted with ``.gz`` added.

    Args:
        data_dir: str or path-like, the folder.
        names: dict split -> file name.
        corpus: str, the corpus's name for the error message.

    Returns:
        dict split -> `pathlib.Path`.

    Raises:
        ValueError: files are missing (the message names them).
    """
    data_dir = pathlib.Path(data_dir)
    paths, missing = {}, []
    for split, name in names.items():
        for candidate in (data_dir / name, data_dir / (name + ".gz")):
            if candidate.is_file():
                paths[split] = candidate
                break
        else:
            missing.append(name)
    if missing:
        raise ValueError(
            f"{corpus}: `data_dir` {str(data_dir)!r} lacks {', '.join(missing)} "
            f"(looked for {', '.join(names.values())}, each optionally .gz)."
        )
    return paths


def read_corpus_lines(path):
    """The lines of a corpus file, which must hold at least one word.

    Args:
        path: str or path-like, the file (``.gz`` decompressed).

    Returns:
        A list of str, line ends removed.

    Raises:
        ValueError: the file is empty or blank, not text, or a ``.gz`` that is not gzip
            data; the message names the file.
    """
    text = read_text(path)
    check_not_blank(text, path, "words")
    return text.splitlines()


def read_split_tokens(paths, is_document_start=None, skip=None):
    """Reads and tokenizes split files with `read_corpus_lines` and `tokenize_lines`.

    Args:
        paths: dict split -> file.
        is_document_start, skip: as for `tokenize_lines`. Default to `None`.

    Returns:
        dict split -> ``(tokens, document_starts)``.

    Raises:
        ValueError: as `read_corpus_lines`.
    """
    return {
        split: tokenize_lines(read_corpus_lines(path), is_document_start, skip)
        for split, path in paths.items()
    }


def read_corpus(name, paths, is_document_start=None):
    """Reads a corpus whose vocabulary is that of its training split.

    A corpus whose training split holds ``<unk>`` (PTB, WikiText-2) has replaced its rare
    words already, so ``<unk>`` is its unknown-word token; otherwise the vocabulary is closed
    and an unseen word in another split is an error. Tokens are ranked most frequent first.

    Args:
        name: str, the corpus.
        paths: dict split -> file for the three splits, e.g. from `find_split_files`.
        is_document_start: as for `tokenize_lines`. Defaults to `None` (one document).

    Returns:
        An `LMCorpus`.

    Raises:
        ValueError: as `read_corpus_lines`, or a word of another split is not in a closed
            vocabulary.
    """
    split_tokens = read_split_tokens(paths, is_document_start)
    counts = collections.Counter(split_tokens["train"][0])
    vocabulary = Vocabulary.from_counts(counts, unk_token=UNK if UNK in counts else None)
    return encode_corpus(name, vocabulary, split_tokens)


def encode_corpus(name, vocabulary, split_tokens):
    """Encodes tokenized splits into an `LMCorpus`.

    Args:
        name: str, the corpus.
        vocabulary: `Vocabulary`.
        split_tokens: dict split -> ``(tokens, document_starts)`` for the three splits.

    Returns:
        An `LMCorpus`.

    Raises:
        ValueError: a token is not in a vocabulary without an unknown-word token.
    """
    streams = {
        split: TokenStream(vocabulary.encode(tokens), np.asarray(starts))
        for split, (tokens, starts) in split_tokens.items()
    }
    return LMCorpus(name, vocabulary, streams["train"], streams["valid"], streams["test"])
