"""The data: the corpora's files, the embedded generated corpus, and truncated-BPTT batches.

A corpus is a vocabulary (its tokens in id order) and three splits, each a stream of token ids
and the offsets at which its documents start. The three distributed corpora differ in their
files' names and in what starts a document:

* Penn Treebank (Mikolov's LM version, ``ptb.{train,valid,test}.txt``): one document;
* WikiText-2 (``wiki.{train,valid,test}.tokens``): articles, each from a `` = Title = `` line
  between blank lines;
* the Children's Book Test (``cbt_{train,valid,test}.txt``, or ``cbt_test.txt`` alone, split
  by books): books, each from a ``_BOOK_TITLE_`` line (dropped from the text).

Every line becomes its words and one ``<eos>``; a file may be gzipped (``.gz`` added). PTB and
WikiText-2 have replaced their rare words by ``<unk>`` already: the vocabulary is the training
split's words, most frequent first. CBT has not: words seen once in training and unseen words
become ``<unk>``. Without a corpus, `generated_corpus` writes sentences whose second half
repeats their first, which window attention learns and a plain LSTM must squeeze into its state.

`bptt_batches` lays a split out for truncated backpropagation through time (Zaremba et al.
2014): the (input, target) pairs are cut into ``batch_size`` contiguous rows and each row into
segments of ``sequence_length``, so that row ``b`` of batch ``i + 1`` continues row ``b`` of
batch ``i`` and a stateful model carries its state from batch to batch. Documents are padded
to a segment start, the rows that start one at a batch listed in ``resets`` (cleared from the
host, `tf_memlayers.callbacks.StateResetCallback`), or packed back to back with ``pack=True``,
``reset_mask`` marking each document's first input for a model that restarts its rows inside
the graph (`tf_memlayers.models.build_language_model` with ``resets=True``). Padding has weight
0, so the weighted perplexity is exp(mean NLL) over every target token of the split.
"""

import collections
import gzip
import pathlib
import re
import typing
import zlib

import numpy as np
import tensorflow as tf

SPLITS = ("train", "valid", "test")
UNK, EOS = "<unk>", "<eos>"
# Each corpus's files ({} is the split); CBT is recognised by its test file alone.
FILES = {"ptb": "ptb.{}.txt", "wikitext2": "wiki.{}.tokens", "cbt": "cbt_{}.txt"}
# A title line (" = Title = "; section headings have "= =" instead), its spaces at either end
# optional (an editor may strip them).
_WIKITEXT_TITLE = re.compile(r"^\s*= [^=].* =\s*$")
_CBT_TITLE = "_BOOK_TITLE_"
# Characters that are not text: undecodable bytes (read as U+FFFD) and control characters
# other than white space. Real corpora hold a few; bytes that are not text, about half.
_NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f\ufffd]")


class Corpus(typing.NamedTuple):
    """A corpus: ``name``, ``vocabulary`` (the tokens in id order) and ``splits`` (split ->
    ``(ids, document_starts)``, int32 ids and the offsets where documents start, from 0)."""

    name: str
    vocabulary: list
    splits: dict

    def encode(self, words):
        """The ids of ``words``; an unknown word is ``<unk>``'s, or an error naming it."""
        index = {token: i for i, token in enumerate(self.vocabulary)}
        unknown = index.get(UNK)
        ids = [index.get(word, unknown) for word in words]
        if None in ids:
            raise ValueError(
                f"token {words[ids.index(None)]!r} is not in the vocabulary of {len(index)} "
                "tokens and the vocabulary has no unknown-word token."
            )
        return np.asarray(ids, np.int32)

    def decode(self, ids):
        return [self.vocabulary[int(i)] for i in np.asarray(ids).reshape(-1)]


def _path(data_dir, name):
    """``data_dir/name``, or its gzipped form, or `None`."""
    found = [p for p in (data_dir / name, data_dir / f"{name}.gz") if p.is_file()]
    return found[0] if found else None


def corpus_name(data_dir):
    """The corpus whose files are in ``data_dir`` (``ptb``, ``wikitext2`` or ``cbt``).

    Raises:
        ValueError: ``data_dir`` is not a directory or holds no known corpus (the message
            lists the files looked for).
    """
    data_dir = pathlib.Path(data_dir)
    if not data_dir.is_dir():
        raise ValueError(f"`data_dir` {str(data_dir)!r} is not a directory.")
    wanted = {name: [files.format(s) for s in SPLITS] for name, files in FILES.items()}
    wanted["cbt"] = [FILES["cbt"].format("test")]
    for name, files in wanted.items():
        if all(_path(data_dir, file) for file in files):
            return name
    looked_for = "; ".join(f"{name}: {', '.join(files)}" for name, files in wanted.items())
    raise ValueError(
        f"`data_dir` {str(data_dir)!r} holds no known corpus; looked for {looked_for} "
        "(each file optionally .gz)."
    )


def read_lines(path):
    """The lines of a corpus file (``.gz`` decompressed); a stray undecodable byte becomes
    U+FFFD. Raises a ``ValueError`` naming the file if it is not gzip data (named ``.gz``),
    not text, not UTF-8 (most of its bytes that are not ASCII undecodable), empty or
    blank."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(
                f"{path} is not a valid gzip file (its name ends in .gz): {error}."
            ) from error
    # A few stray bytes are read (as U+FFFD); in a file of another encoding (Latin-1, say) most
    # bytes that are not ASCII do not decode, and its words would be garbled.
    undecodable = len(data) - len(data.decode("utf-8", "ignore").encode("utf-8"))
    not_ascii = len(data) - len(data.decode("ascii", "ignore"))
    if undecodable >= 10 and undecodable > not_ascii / 2:
        raise ValueError(
            f"{path} is not UTF-8 text: {undecodable:,} of its {not_ascii:,} bytes that are not "
            "ASCII are undecodable (a file in another encoding: convert it to UTF-8)."
        )
    text = data.decode("utf-8-sig", errors="replace")  # a byte-order mark is not text
    bad = len(_NOT_TEXT.findall(text))
    if "\x00" in text or bad > 0.1 * len(text):
        raise ValueError(
            f"{path} is not UTF-8 text: {bad:,} of its {len(text):,} characters are "
            "undecodable bytes or control characters."
        )
    if not text.strip():
        state = "empty" if not text else "blank (only whitespace)"
        raise ValueError(f"{path} is {state}: it holds no words.")
    return text.splitlines()


def tokenize(lines, name):
    """``(tokens, document_starts)`` of a file's lines: each line's words and ``<eos>``, a
    document starting at each title line of ``name``'s corpus (none for PTB)."""
    tokens, starts, has_words = [], [0], False
    for i, line in enumerate(lines):
        if name == "wikitext2":
            blank = lambda j: 0 <= j < len(lines) and not lines[j].strip()  # noqa: E731
            title = bool(_WIKITEXT_TITLE.match(line)) and blank(i - 1) and blank(i + 1)
        else:
            title = name == "cbt" and line.startswith(_CBT_TITLE)
        if title and has_words:
            starts.append(len(tokens))
            has_words = False
        if name == "cbt" and title:
            continue
        tokens += [*line.split(), EOS]
        has_words = has_words or bool(line.split())
    return tokens, starts


def _split_books(tokens, starts):
    """One file of books as the three splits: the last book the test split, the one before
    it the validation split, the others the training split."""
    if len(starts) < 3:
        raise ValueError(f"CBT: splitting one file by books needs 3 books, found {len(starts)}.")
    bounds = [*starts, len(tokens)]
    parts = {"train": (0, len(starts) - 2), "valid": (-3, -2), "test": (-2, -1)}
    return {
        split: (tokens[bounds[a] : bounds[b]], [s - bounds[a] for s in bounds[a:b]])
        for split, (a, b) in parts.items()
    }


def rank(counts, min_count=1):
    """The tokens seen at least ``min_count`` times, most frequent first, ties alphabetical."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [token for token, count in ranked if count >= min_count]


def read_corpus(data_dir):
    """The corpus in ``data_dir`` (`corpus_name`), read as the module docstring describes.

    Raises:
        ValueError: as `corpus_name`, or a file is not gzip data, not text, empty or blank
            (the message names it), or a word of another split is not in a vocabulary
            without ``<unk>``.

    Example:

    >>> corpus = read_corpus("path/to/ptb")  # doctest: +SKIP
    >>> len(corpus.vocabulary), len(corpus.splits["train"][0])  # doctest: +SKIP
    (10000, 929589)
    """
    data_dir = pathlib.Path(data_dir)
    name = corpus_name(data_dir)
    paths = {split: _path(data_dir, FILES[name].format(split)) for split in SPLITS}
    if None in paths.values():  # CBT's test file alone
        split_tokens = _split_books(*tokenize(read_lines(paths["test"]), name))
    else:
        split_tokens = {split: tokenize(read_lines(path), name) for split, path in paths.items()}
    counts = collections.Counter(split_tokens["train"][0])
    vocabulary = rank(counts, min_count=2 if name == "cbt" else 1)
    if name == "cbt" and UNK not in vocabulary:
        vocabulary.append(UNK)
    return _encoded(name, vocabulary, split_tokens)


def _encoded(name, vocabulary, split_tokens):
    corpus = Corpus(name, vocabulary, {})
    for split, (tokens, starts) in split_tokens.items():
        corpus.splits[split] = (corpus.encode(tokens), np.asarray(starts, np.int64))
    return corpus


COPY_MARKER = "again"
SPANS = (2, 4)  # the shortest and longest span of content words of a sentence


def generated_corpus(train_tokens, seed=0, num_words=200, sentences_per_document=25):
    """A corpus whose next word is often a copy of a word a few steps back.

    Each sentence is 2 to 4 content words drawn from a Zipf distribution over ``num_words``
    words, the marker ``again``, the same words repeated, and ``<eos>``; stories of
    ``sentences_per_document`` sentences are the documents. The repeated half is predictable
    exactly by a model that reads the word ``span + 1`` steps back: an attention window of 5
    covers it, so window attention reaches a clearly lower perplexity than an LSTM of the same
    size. The validation and test splits have a tenth of ``train_tokens`` each.

    Returns:
        A `Corpus` named ``"generated"``, vocabulary ``<eos>``, ``again``, ``w0``, ``w1``, ...

    Example:

    >>> corpus = generated_corpus(1000)
    >>> words = corpus.decode(corpus.splits["train"][0][:12])
    >>> marker = words.index("again")
    >>> words[:marker] == words[marker + 1 : 2 * marker + 1]
    True
    """
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(num_words)])
    probabilities = 1.0 / np.arange(1, num_words + 1)
    probabilities /= probabilities.sum()
    split_tokens = {}
    for split, size in zip(SPLITS, (train_tokens, *[max(train_tokens // 10, 1)] * 2)):
        spans = rng.integers(SPANS[0], SPANS[1] + 1, size=max(1, round(size / (sum(SPANS) + 2))))
        content = rng.choice(words, size=int(spans.sum()), p=probabilities).tolist()
        tokens, starts, position = [], [], 0
        for sentence, span in enumerate(spans):
            if sentence % sentences_per_document == 0:
                starts.append(len(tokens))
            chosen, position = content[position : position + span], position + span
            tokens += [*chosen, COPY_MARKER, *chosen, EOS]
        split_tokens[split] = tokens, starts
    return _encoded("generated", [EOS, COPY_MARKER, *words.tolist()], split_tokens)


class Batches(typing.NamedTuple):
    """A split laid out for truncated BPTT (`bptt_batches`): ``inputs``, ``targets`` (int32)
    and ``weights`` (float32, 0 for padding), each ``[num_batches, batch_size,
    sequence_length]``; ``resets`` (bool ``[num_batches, batch_size]``, the rows that start a
    document at a batch); ``reset_mask`` (bool, as ``inputs``: the first input of each
    document) when packed, else `None`."""

    inputs: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    resets: np.ndarray
    reset_mask: np.ndarray = None

    def take(self, count):
        """The first ``count`` batches."""
        return Batches(*(None if a is None else a[:count] for a in self))

    def dataset(self):
        """A `tf.data.Dataset` of ``(inputs, targets, weights)``, in order (the rows continue
        each other); packed, the inputs are ``{"tokens": ..., "reset": ...}``."""
        inputs = self.inputs
        if self.reset_mask is not None:
            inputs = {"tokens": self.inputs, "reset": self.reset_mask}
        data = tf.data.Dataset.from_tensor_slices((inputs, self.targets, self.weights))
        return data.prefetch(tf.data.AUTOTUNE)

    @property
    def num_targets(self):
        return int(self.weights.sum())

    @property
    def padding_fraction(self):
        return 1.0 - self.num_targets / self.weights.size


def bptt_batches(ids, document_starts, batch_size, sequence_length, pack=False):
    """Lays a stream out as truncated-BPTT batches (the module docstring describes how).

    The ``len(ids) - 1`` (input, target) pairs are grouped by the document of their input.
    Padded, each document is cut into segments, its last one padded; packed, the pairs stay
    back to back. The segments are split into ``batch_size`` contiguous rows of equal length
    (the last row padded); batch ``i`` holds segment ``i`` of every row. As in Zaremba et al.'s
    layout, a row may begin inside a document, which it then reads from a fresh state.

    Example:

    >>> batches = bptt_batches(np.arange(13), [0], batch_size=2, sequence_length=3)
    >>> batches.inputs[:, 0].tolist(), batches.inputs[:, 1].tolist()
    ([[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]])

    Two documents, of 4 and 6 tokens: padded, the second starts a new segment; packed, it
    follows the first and ``reset_mask`` marks its first input.

    >>> padded = bptt_batches(np.arange(1, 11), [0, 4], batch_size=1, sequence_length=3)
    >>> padded.inputs[:, 0].tolist()
    [[1, 2, 3], [4, 0, 0], [5, 6, 7], [8, 9, 0]]
    >>> packed = bptt_batches(np.arange(1, 11), [0, 4], 1, 3, pack=True)
    >>> packed.inputs[:, 0].tolist(), packed.reset_mask[:, 0].astype(int).tolist()
    ([[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[1, 0, 0], [0, 1, 0], [0, 0, 0]])
    """
    length, pairs = sequence_length, np.arange(len(ids) - 1)
    starts = np.asarray(document_starts)
    starts = starts[starts < len(pairs)]
    if pack:
        slot, segments = pairs, -(-len(pairs) // length)
    else:
        per_document = -(-np.diff(np.append(starts, len(pairs))) // length)
        first = np.cumsum(per_document) - per_document
        document = np.searchsorted(starts, pairs, side="right") - 1
        offset = pairs - starts[document]
        slot = (first[document] + offset // length) * length + offset % length
        segments = int(per_document.sum())
    rows = -(-segments // batch_size)
    shape = (batch_size, rows, length)
    inputs, targets = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    weights, reset = np.zeros(shape, np.float32), np.zeros(shape, bool)
    for array, values in ((inputs, ids[:-1]), (targets, ids[1:]), (weights, 1)):
        array.reshape(-1)[slot] = values
    reset.reshape(-1)[slot[starts]] = True
    inputs, targets, weights, reset = (
        a.swapaxes(0, 1).copy() for a in (inputs, targets, weights, reset)
    )
    if pack:
        return Batches(inputs, targets, weights, np.zeros((rows, batch_size), bool), reset)
    return Batches(inputs, targets, weights, reset[:, :, 0].copy())
