"""Word-level language-model corpora and truncated-BPTT input pipelines.

Readers for the corpora in their own distributed formats, each returning an `LMCorpus` of
integer token streams with document boundaries:

* Penn Treebank, Mikolov's LM version: ``ptb.{train,valid,test}.txt`` (`load_ptb`);
* WikiText-2 tokenized: ``wiki.{train,valid,test}.tokens`` or their ``.gz`` (`load_wikitext2`);
  articles (lines `` = Title = ``) are documents;
* Children's Book Test, LM format, one sentence per line: ``cbt_{train,valid,test}.txt``
  (`load_cbt`); books (``_BOOK_TITLE_`` lines) are documents;
* an embedded generated corpus (`generate_copy_corpus`) for machines without data.

Every line becomes its words followed by one ``<eos>`` (blank lines included), the convention
under which PTB has 929,589 / 73,760 / 82,430 tokens and WikiText-2 2,088,628 / 217,646 /
245,569. The vocabulary is built from the training split.

`make_bptt_batches` lays a stream out for truncated backpropagation through time (the layout of
Zaremba et al. 2014): the (input, target) pairs are cut into `batch_size` contiguous rows and
each row into consecutive segments of `seq_len`, so that row ``b`` of batch ``i + 1`` continues
row ``b`` of batch ``i`` and a stateful model can carry its state from batch to batch. Each
document starts at a segment boundary (the end of the previous document is padded with
zero-weight targets), and `BPTTBatches.resets` says which rows start a new document at which
batch, so the states of exactly those rows can be cleared. Every target of the split is counted
exactly once with weight 1; padding has weight 0, so a perplexity computed with the weights is
exp(mean NLL over all target tokens of the split).
"""

import collections
import dataclasses
import gzip
import pathlib
import re

import numpy as np
import tensorflow as tf

from tf_memlayers._validation import check_int
from tf_memlayers.data._files import check_not_blank, read_text

EOS = "<eos>"
UNK = "<unk>"
SPLITS = ("train", "valid", "test")

PTB_FILES = {split: f"ptb.{split}.txt" for split in SPLITS}
WIKITEXT2_FILES = {split: f"wiki.{split}.tokens" for split in SPLITS}
CBT_FILES = {split: f"cbt_{split}.txt" for split in SPLITS}
CBT_TITLE_PREFIX = "_BOOK_TITLE_"
# A WikiText article title is a line " = Title = " (section headings have "= =").
_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = $")


class Vocabulary:
    """A bijection between tokens and integer ids.

    Args:
        tokens: the tokens in id order (no duplicates).
        unk_token: the token that unknown words map to, or `None` to reject unknown words.
            It must be one of ``tokens`` when given.

    Example:

    >>> vocab = Vocabulary.from_counts({"a": 3, "b": 1, "<eos>": 2})
    >>> vocab.tokens
    ['a', '<eos>', 'b']
    >>> vocab.encode(["b", "a"]).tolist()
    [2, 0]
    """

    def __init__(self, tokens, unk_token=None):
        tokens = list(tokens)
        self._index = {token: i for i, token in enumerate(tokens)}
        if len(self._index) != len(tokens):
            duplicates = sorted(t for t, n in collections.Counter(tokens).items() if n > 1)
            raise ValueError(f"`tokens` must be unique; duplicated: {duplicates[:10]}.")
        if unk_token is not None and unk_token not in self._index:
            raise ValueError(f"`unk_token` {unk_token!r} is not one of the {len(tokens)} tokens.")
        self.tokens = tokens
        self.unk_token = unk_token

    @classmethod
    def from_counts(cls, counts, max_size=None, min_count=1, unk_token=None):
        """Builds a vocabulary from token counts, most frequent first (ties alphabetical).

        Args:
            counts: a mapping token -> count (e.g. a `collections.Counter`).
            max_size: keep at most this many tokens (including ``unk_token``).
            min_count: drop tokens seen fewer times.
            unk_token: the unknown-word token; it is added when words are dropped or when
                it is not among the counted tokens.

        Returns:
            A `Vocabulary`.
        """
        min_count = check_int("min_count", min_count, 1)
        if max_size is not None:
            max_size = check_int("max_size", max_size, 1)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        tokens = [token for token, count in ranked if count >= min_count]
        if unk_token is not None:
            limit = None if max_size is None else max_size - 1
            kept = [t for t in tokens if t != unk_token][:limit]
            if unk_token in tokens and tokens.index(unk_token) < len(kept):
                kept.insert(tokens.index(unk_token), unk_token)
            else:
                kept.append(unk_token)
            tokens = kept
        elif max_size is not None:
            tokens = tokens[:max_size]
        return cls(tokens, unk_token)

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self._index

    def id(self, token):
        """The id of ``token`` (the unknown-word id for unseen tokens, if there is one)."""
        found = self._index.get(token)
        if found is not None:
            return found
        if self.unk_token is None:
            raise ValueError(
                f"token {token!r} is not in the vocabulary of {len(self)} tokens and the "
                "vocabulary has no unknown-word token."
            )
        return self._index[self.unk_token]

    def encode(self, tokens):
        """Maps tokens to an int32 array of ids."""
        index, unk = self._index, self._index.get(self.unk_token)
        ids = [index.get(token, unk) for token in tokens]
        if unk is None and None in ids:
            self.id(tokens[ids.index(None)])  # raises, naming the token
        return np.asarray(ids, dtype=np.int32)

    def decode(self, ids):
        """Maps ids back to tokens."""
        return [self.tokens[int(i)] for i in np.asarray(ids).reshape(-1)]


@dataclasses.dataclass(frozen=True)
class TokenStream:
    """One split of a corpus: token ids and where documents start.

    Attributes:
        ids: int32 ``[num_tokens]``.
        document_starts: sorted int64 offsets into ``ids`` at which a document starts; the
            first is 0.
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
        return len(self.ids)

    @property
    def num_documents(self):
        return len(self.document_starts)


@dataclasses.dataclass(frozen=True)
class LMCorpus:
    """A language-model corpus: a vocabulary and the train / valid / test streams."""

    name: str
    vocabulary: Vocabulary
    train: TokenStream
    valid: TokenStream
    test: TokenStream

    def split(self, name):
        """The stream of split ``name`` (`"train"`, `"valid"` or `"test"`)."""
        if name not in SPLITS:
            raise ValueError(f"`name` must be one of {SPLITS}; got {name!r}.")
        return getattr(self, name)


def open_text(path):
    """Opens a UTF-8 text file for reading, transparently decompressing ``.gz`` files.

    Bytes that are not UTF-8 become U+FFFD instead of stopping the read.
    """
    path = pathlib.Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def tokenize_lines(lines, is_document_start=None, skip=None):
    """Splits lines into words, appending `EOS` to every line (blank lines included).

    Args:
        lines: a sequence of text lines.
        is_document_start: optional predicate ``(lines, i)``: a new document starts at line
            ``i`` (it sees the neighbouring lines, e.g. to require blank lines around a title).
        skip: optional predicate on a line: the line is a marker, not text (it is dropped,
            after ``is_document_start`` has seen it).

    Returns:
        ``(tokens, document_starts)``: the list of tokens and the token offsets at which
        documents start (always beginning with 0). Lines before the first document start
        belong to the first document.
    """
    tokens, starts = [], [0]
    has_words = False  # whether the current document has more than blank lines
    for i, line in enumerate(lines):
        if is_document_start is not None and has_words and is_document_start(lines, i):
            starts.append(len(tokens))
            has_words = False
        if skip is not None and skip(line):
            continue
        words = line.split()
        has_words = has_words or bool(words)
        tokens.extend(words)
        tokens.append(EOS)
    return tokens, starts


def _find_split_files(data_dir, names, corpus):
    """Paths of the split files (each name also accepted with a ``.gz`` suffix)."""
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


def read_lines(path):
    """All lines of a text file (``.gz`` decompressed), line ends removed.

    Bytes that are not UTF-8 become U+FFFD, as with `open_text`.

    Raises:
        ValueError: the file is not text (NUL bytes, or mostly undecodable bytes or control
            characters), or a ``.gz`` file is not valid gzip data; the message names the file.
    """
    return read_text(path).splitlines()


def _read_corpus_lines(path):
    """`read_lines` of a corpus file, which must hold at least one word."""
    text = read_text(path)
    check_not_blank(text, path, "words")
    return text.splitlines()


def _read_splits(paths, is_document_start=None, skip=None):
    return {
        split: tokenize_lines(_read_corpus_lines(path), is_document_start, skip)
        for split, path in paths.items()
    }


def _encode_corpus(name, vocabulary, split_tokens):
    streams = {
        split: TokenStream(vocabulary.encode(tokens), np.asarray(starts))
        for split, (tokens, starts) in split_tokens.items()
    }
    return LMCorpus(name, vocabulary, streams["train"], streams["valid"], streams["test"])


def _vocabulary_from_train(train_tokens, max_size=None, min_count=1, unk_token=UNK):
    counts = collections.Counter(train_tokens)
    if unk_token not in counts and min_count <= 1 and max_size is None:
        unk_token = None  # a closed vocabulary (PTB, WikiText): unknown words are an error
    return Vocabulary.from_counts(counts, max_size, min_count, unk_token)


def load_ptb(data_dir):
    """Reads Mikolov's Penn Treebank LM files from ``data_dir``.

    The corpus is one stream (its article boundaries were not kept), so it is one document.

    Args:
        data_dir: a folder with ``ptb.train.txt``, ``ptb.valid.txt``, ``ptb.test.txt``.

    Returns:
        An `LMCorpus` with a 10,000-word vocabulary (``<unk>`` and ``<eos>`` included).

    Raises:
        ValueError: a split file is missing, empty or blank, not text, or a ``.gz`` that is
            not gzip data; the message names the file.

    Example:

    >>> corpus = load_ptb("../shared/data/ptb")  # doctest: +SKIP
    >>> len(corpus.vocabulary), corpus.train.num_tokens  # doctest: +SKIP
    (10000, 929589)
    """
    split_tokens = _read_splits(_find_split_files(data_dir, PTB_FILES, "Penn Treebank"))
    vocabulary = _vocabulary_from_train(split_tokens["train"][0])
    return _encode_corpus("ptb", vocabulary, split_tokens)


def is_wikitext_title(lines, i):
    """True if line ``i`` is a WikiText article title: `` = Title = `` between blank lines.

    Section headings (``= = Section = =``) and table rows such as `` = Goals ; A = `` inside
    an article are not titles; with this rule WikiText-2 has 600 / 60 / 60 articles.
    """
    blank = lambda j: 0 <= j < len(lines) and not lines[j].strip()  # noqa: E731
    return bool(_WIKITEXT_TITLE.match(lines[i])) and blank(i - 1) and blank(i + 1)


def load_wikitext2(data_dir):
    """Reads tokenized WikiText-2 (``wiki.{train,valid,test}.tokens``, each optionally .gz).

    Every article (from its `` = Title = `` line) is a document.

    Args:
        data_dir: the folder holding the three files.

    Returns:
        An `LMCorpus` with the 33,278-token vocabulary.

    Raises:
        ValueError: a split file is missing, empty or blank, not text, or a ``.gz`` that is
            not gzip data; the message names the file.
    """
    paths = _find_split_files(data_dir, WIKITEXT2_FILES, "WikiText-2")
    split_tokens = _read_splits(paths, is_document_start=is_wikitext_title)
    vocabulary = _vocabulary_from_train(split_tokens["train"][0])
    return _encode_corpus("wikitext2", vocabulary, split_tokens)


def _split_books(tokens, starts, valid_books=1, test_books=1):
    """Splits one book stream into train / valid / test by whole books (the last ones held out)."""
    count = len(starts)
    if count < valid_books + test_books + 1:
        raise ValueError(
            f"CBT: splitting one file by books needs at least {valid_books + test_books + 1} "
            f"books, found {count}."
        )
    bounds = list(starts) + [len(tokens)]
    first_valid, first_test = count - valid_books - test_books, count - test_books

    def part(first, last):
        offset = bounds[first]
        return tokens[offset : bounds[last]], [s - offset for s in bounds[first:last]]

    return {
        "train": part(0, first_valid),
        "valid": part(first_valid, first_test),
        "test": part(first_test, count),
    }


def load_cbt(data_dir, min_count=2):
    """Reads the Children's Book Test in its LM format (one sentence per line).

    Books start at ``_BOOK_TITLE_`` lines (dropped from the text) and are the documents.
    With ``cbt_train.txt``, ``cbt_valid.txt`` and ``cbt_test.txt`` present they are the
    splits; with only ``cbt_test.txt`` (e.g. the test books alone) its last book is the test
    split, the one before it the validation split and the rest the training split. CBT is not
    preprocessed for LM: words seen fewer than ``min_count`` times in training, and unseen
    words, become ``<unk>``.

    Args:
        data_dir: the folder holding the CBT files.
        min_count: minimum training count of a vocabulary word.

    Returns:
        An `LMCorpus`.

    Raises:
        ValueError: a split file is missing, empty or blank, not text, or a ``.gz`` that is
            not gzip data; the message names the file.
    """
    data_dir = pathlib.Path(data_dir)
    is_title = lambda line: line.startswith(CBT_TITLE_PREFIX)  # noqa: E731
    starts_book = lambda lines, i: is_title(lines[i])  # noqa: E731
    try:
        paths = _find_split_files(data_dir, CBT_FILES, "CBT")
    except ValueError:
        paths = None
    if paths is not None:
        split_tokens = _read_splits(paths, is_document_start=starts_book, skip=is_title)
    else:
        only_test = _find_split_files(data_dir, {"test": CBT_FILES["test"]}, "CBT")
        lines = _read_corpus_lines(only_test["test"])
        tokens, starts = tokenize_lines(lines, is_document_start=starts_book, skip=is_title)
        split_tokens = _split_books(tokens, starts)
    vocabulary = Vocabulary.from_counts(
        collections.Counter(split_tokens["train"][0]), min_count=min_count, unk_token=UNK
    )
    return _encode_corpus("cbt", vocabulary, split_tokens)


CORPUS_LOADERS = {
    "ptb": (PTB_FILES, load_ptb),
    "wikitext2": (WIKITEXT2_FILES, load_wikitext2),
    "cbt": ({"test": CBT_FILES["test"]}, load_cbt),
}


def detect_corpus(data_dir):
    """The name of the corpus whose files are in ``data_dir`` (`"ptb"`, `"wikitext2"`, `"cbt"`)."""
    data_dir = pathlib.Path(data_dir)
    if not data_dir.is_dir():
        raise ValueError(f"`data_dir` {str(data_dir)!r} is not a directory.")
    for name, (files, _) in CORPUS_LOADERS.items():
        names = list(files.values())
        if all((data_dir / n).is_file() or (data_dir / (n + ".gz")).is_file() for n in names):
            return name
    looked_for = "; ".join(
        f"{name}: {', '.join(files.values())}" for name, (files, _) in CORPUS_LOADERS.items()
    )
    raise ValueError(
        f"`data_dir` {str(data_dir)!r} holds no known corpus; looked for {looked_for} "
        "(each file optionally .gz)."
    )


def load_corpus(data_dir):
    """Detects and reads the corpus in ``data_dir`` (PTB, WikiText-2 or CBT)."""
    return CORPUS_LOADERS[detect_corpus(data_dir)][1](data_dir)


# ---------------------------------------------------------------------------------------------
# Embedded generated corpus.

COPY_MARKER = "again"


def _zipf_probabilities(size, exponent):
    weights = 1.0 / np.arange(1, size + 1) ** exponent
    return weights / weights.sum()


def _generate_stream(rng, num_tokens, words, probabilities, min_span, max_span, sentences_per_doc):
    """Documents of sentences ``w_1 .. w_m again w_1 .. w_m <eos>`` of about ``num_tokens``."""
    num_sentences = max(1, round(num_tokens / (min_span + max_span + 2)))
    spans = rng.integers(min_span, max_span + 1, size=num_sentences)
    content = rng.choice(words, size=int(spans.sum()), p=probabilities).tolist()
    tokens, starts, position = [], [], 0
    for sentence, span in enumerate(spans):
        if sentence % sentences_per_doc == 0:
            starts.append(len(tokens))
        chosen = content[position : position + span]
        position += span
        tokens += chosen + [COPY_MARKER] + chosen + [EOS]
    return tokens, starts


def generate_copy_corpus(
    train_tokens=200_000,
    valid_tokens=20_000,
    test_tokens=20_000,
    num_words=200,
    min_span=2,
    max_span=4,
    sentences_per_document=25,
    zipf_exponent=1.0,
    seed=0,
):
    """Generates a corpus whose next word is often a copy of a word a few steps back.

    Each sentence is a span of ``min_span``..``max_span`` content words drawn from a Zipf
    distribution over ``num_words`` words, the marker ``again``, the same span repeated, and
    ``<eos>``; stories of ``sentences_per_document`` sentences are the documents. The first
    half of a sentence is predictable only from word frequencies; the repeated half is exactly
    predictable by a model that can read the word ``span + 1`` steps back. An attention window
    of ``max_span + 1`` covers that distance, so window attention reaches a clearly lower
    perplexity than a plain LSTM of the same size, which must squeeze the span into its state.

    Args:
        train_tokens, valid_tokens, test_tokens: approximate length of each split.
        num_words: content vocabulary size.
        min_span, max_span: range of the span length.
        sentences_per_document: sentences per story.
        zipf_exponent: exponent of the content-word distribution.
        seed: random seed (the corpus is a pure function of the arguments).

    Returns:
        An `LMCorpus` named ``"generated"``.

    Example:

    >>> corpus = generate_copy_corpus(train_tokens=1000, valid_tokens=100, test_tokens=100)
    >>> words = corpus.vocabulary.decode(corpus.train.ids[:12])
    >>> marker = words.index("again")
    >>> words[:marker] == words[marker + 1 : 2 * marker + 1]
    True
    """
    for name, value in (
        ("train_tokens", train_tokens),
        ("valid_tokens", valid_tokens),
        ("test_tokens", test_tokens),
        ("sentences_per_document", sentences_per_document),
    ):
        check_int(name, value, 1)
    check_int("num_words", num_words, 2)
    min_span = check_int("min_span", min_span, 1)
    max_span = check_int("max_span", max_span, 1)
    if max_span < min_span:
        raise ValueError(f"`max_span` ({max_span}) must be >= `min_span` ({min_span}).")
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(num_words)])
    probabilities = _zipf_probabilities(num_words, zipf_exponent)
    split_tokens = {
        split: _generate_stream(
            rng, size, words, probabilities, min_span, max_span, sentences_per_document
        )
        for split, size in (("train", train_tokens), ("valid", valid_tokens), ("test", test_tokens))
    }
    vocabulary = Vocabulary([EOS, COPY_MARKER, *words.tolist()])
    return _encode_corpus("generated", vocabulary, split_tokens)


# ---------------------------------------------------------------------------------------------
# Truncated-BPTT batching.


@dataclasses.dataclass(frozen=True)
class BPTTBatches:
    """A token stream laid out for truncated BPTT.

    Attributes:
        inputs: int32 ``[num_batches, batch_size, seq_len]``.
        targets: int32, same shape: the token following each input.
        weights: float32, same shape: 1 for a real target, 0 for padding.
        resets: bool ``[num_batches, batch_size]``: the row starts a new document at this
            batch, so its carried state must be cleared first.
    """

    inputs: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    resets: np.ndarray

    @property
    def num_batches(self):
        return self.inputs.shape[0]

    @property
    def batch_size(self):
        return self.inputs.shape[1]

    @property
    def seq_len(self):
        return self.inputs.shape[2]

    @property
    def num_targets(self):
        """The number of real (weight 1) targets."""
        return int(self.weights.sum())

    def dataset(self, prefetch=tf.data.AUTOTUNE):
        """A `tf.data.Dataset` of ``(inputs, targets, weights)`` batches, in order, prefetched.

        The order must not be shuffled: consecutive batches continue each other's rows.
        """
        dataset = tf.data.Dataset.from_tensor_slices((self.inputs, self.targets, self.weights))
        return dataset.prefetch(prefetch) if prefetch else dataset


def make_bptt_batches(stream, batch_size, seq_len, reset_at_documents=True, pad_id=0):
    """Lays a `TokenStream` out as truncated-BPTT batches (Zaremba et al. layout).

    The ``num_tokens - 1`` (input, target) pairs of the stream are grouped by document (the
    document of the input word); each document is cut into segments of ``seq_len`` pairs, its
    last segment padded with zero-weight pairs; the sequence of all segments is split into
    ``batch_size`` contiguous rows of equal length (the last row padded with empty segments);
    batch ``i`` holds segment ``i`` of every row. As in Zaremba et al.'s layout, a row may
    begin inside a document, which it then reads from a zero state.

    Args:
        stream: a `TokenStream`.
        batch_size: rows per batch (streams advanced in parallel).
        seq_len: time steps per batch (the truncated-BPTT length).
        reset_at_documents: if False the stream is treated as one document (no padding
            between documents, no resets).
        pad_id: input/target id of padding positions.

    Returns:
        A `BPTTBatches`.

    Example:

    >>> stream = TokenStream(np.arange(13), np.array([0]))
    >>> batches = make_bptt_batches(stream, batch_size=2, seq_len=3)
    >>> batches.inputs[:, 0].tolist()  # row 0: pairs 0..5
    [[0, 1, 2], [3, 4, 5]]
    >>> batches.inputs[:, 1].tolist()  # row 1: pairs 6..11
    [[6, 7, 8], [9, 10, 11]]
    >>> batches.targets[1, 1].tolist()
    [10, 11, 12]
    """
    batch_size = check_int("batch_size", batch_size, 1)
    seq_len = check_int("seq_len", seq_len, 1)
    ids = stream.ids
    num_pairs = len(ids) - 1
    if num_pairs < 1:
        raise ValueError(f"`stream` needs at least 2 tokens to form a target, got {len(ids)}.")
    starts = stream.document_starts if reset_at_documents else np.array([0])
    starts = starts[starts < num_pairs]
    lengths = np.diff(np.append(starts, num_pairs))
    segments_per_doc = -(-lengths // seq_len)
    first_segment = np.concatenate([[0], np.cumsum(segments_per_doc)[:-1]])
    num_segments = int(segments_per_doc.sum())
    rows = -(-num_segments // batch_size)

    # Where each pair goes in the flat [segments * seq_len] layout.
    pair = np.arange(num_pairs)
    document = np.searchsorted(starts, pair, side="right") - 1
    offset = pair - starts[document]
    slot = (first_segment[document] + offset // seq_len) * seq_len + offset % seq_len

    total = rows * batch_size * seq_len
    inputs = np.full(total, pad_id, np.int32)
    targets = np.full(total, pad_id, np.int32)
    weights = np.zeros(total, np.float32)
    inputs[slot], targets[slot], weights[slot] = ids[:-1], ids[1:], 1.0
    starts_document = np.zeros(rows * batch_size, bool)
    starts_document[first_segment] = True

    # Segment s belongs to row s // rows, at batch s % rows.
    to_batches = lambda a: a.reshape(batch_size, rows, *a.shape[1:]).swapaxes(0, 1)  # noqa: E731
    return BPTTBatches(
        inputs=np.ascontiguousarray(to_batches(inputs.reshape(-1, seq_len))),
        targets=np.ascontiguousarray(to_batches(targets.reshape(-1, seq_len))),
        weights=np.ascontiguousarray(to_batches(weights.reshape(-1, seq_len))),
        resets=np.ascontiguousarray(to_batches(starts_document)),
    )
