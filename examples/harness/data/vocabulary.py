"""Tokens and vocabularies shared by every reader of the examples.

Holds the special tokens, the two tokenizers (`tokenize` for raw sentences, `tokenize_lines`
for the one-sentence-per-line language-model corpora), the ranking of tokens by frequency
that every vocabulary uses (most frequent first, ties in alphabetical order), and the two
forms of a vocabulary:

* `Vocabulary`, a bijection between tokens and ids with an optional unknown-word token, as
  the language-model corpora use it;
* `build_token_list`, a plain list of tokens after reserved special tokens (``<pad>`` at
  id 0, ``<unk>`` at id 1), as the sentence-pair and last-word readers use it.
"""

import collections
import re

import numpy as np

from examples.harness.checks import check_int

PAD = "<pad>"
UNK = "<unk>"
EOS = "<eos>"

_TOKEN = re.compile(r"\w+(?=n't\b)|n't\b|'\w*|\w+|[^\w\s]")


def tokenize(text):
    """Lower-cases a sentence and splits it into words and punctuation.

    Contractions are split as in the Penn Treebank (``"doesn't"`` gives ``"does", "n't"``,
    ``"it's"`` gives ``"it", "'s"``).

    Args:
        text: str, the sentence.

    Returns:
        A tuple of str tokens.

    Example:

    >>> tokenize("A man doesn't wear a hat, it's sunny.")
    ('a', 'man', 'does', "n't", 'wear', 'a', 'hat', ',', 'it', "'s", 'sunny', '.')
    """
    return tuple(_TOKEN.findall(text.lower()))


def tokenize_lines(lines, is_document_start=None, skip=None):
    """Splits lines into words, appending `EOS` to every line (blank lines included).

    Args:
        lines: sequence of str, the text lines.
        is_document_start: callable ``(lines, i) -> bool`` or `None`: a new document starts
            at line ``i`` (it sees the neighbouring lines, e.g. to require blank lines
            around a title). Defaults to `None`: the lines are one document.
        skip: callable ``(line) -> bool`` or `None`: the line is a marker, not text (it is
            dropped, after ``is_document_start`` has seen it). Defaults to `None`.

    Returns:
        ``(tokens, document_starts)``: the list of tokens and the token offsets at which
        documents start (always beginning with 0). Lines before the first document start
        belong to the first document.

    Example:

    >>> tokenize_lines(["a b", "", "c"])
    (['a', 'b', '<eos>', '<eos>', 'c', '<eos>'], [0])
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


def count_tokens(sequences):
    """Counts the tokens of several token sequences.

    Args:
        sequences: iterable of iterables of str (e.g. sentences split into words).

    Returns:
        A `collections.Counter` token -> count.
    """
    counts = collections.Counter()
    for tokens in sequences:
        counts.update(tokens)
    return counts


def rank_tokens(counts, min_count=1, exclude=()):
    """The tokens seen at least ``min_count`` times, most frequent first, ties alphabetical.

    Args:
        counts: mapping token -> count (e.g. a `collections.Counter`).
        min_count: int, drop tokens seen fewer times. Defaults to 1.
        exclude: collection of tokens to leave out (e.g. special tokens placed separately).
            Defaults to none.

    Returns:
        A list of str.

    Raises:
        ValueError: ``min_count`` is below 1.
        TypeError: ``min_count`` is not an integer.
    """
    min_count = check_int("min_count", min_count, 1)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [token for token, count in ranked if count >= min_count and token not in exclude]


def build_token_list(sequences, special_tokens=(PAD, UNK), max_size=None, min_count=1):
    """A vocabulary as a list: the special tokens, then the ranked tokens of ``sequences``.

    Row ``i`` of an embedding matrix is token ``i`` of the list; with the default special
    tokens, id 0 is padding and id 1 the unknown word. A special token found in the text is
    not listed twice.

    Args:
        sequences: iterable of iterables of str (e.g. ``s.split()`` of each sentence).
        special_tokens: sequence of str placed first, in this order. Defaults to
            ``("<pad>", "<unk>")``.
        max_size: int or `None`, the largest length of the list, special tokens included
            (at least their number). Defaults to `None` (no limit).
        min_count: int, drop tokens seen fewer times. Defaults to 1.

    Returns:
        A list of str: ``[*special_tokens, tokens by (-count, token)...]`` cut to
        ``max_size``.

    Raises:
        ValueError: ``max_size`` is below the number of special tokens, or ``min_count``
            below 1.
        TypeError: ``max_size`` or ``min_count`` is not an integer.

    Example:

    >>> build_token_list([["b", "a", "b"], ["c", "a", "b"]])
    ['<pad>', '<unk>', 'b', 'a', 'c']
    >>> build_token_list([["b", "a", "b"], ["c", "a", "b"]], max_size=3)
    ['<pad>', '<unk>', 'b']
    """
    special_tokens = list(special_tokens)
    if max_size is not None:
        max_size = check_int("max_size", max_size, len(special_tokens))
    words = rank_tokens(count_tokens(sequences), min_count, exclude=set(special_tokens))
    return (special_tokens + words)[:max_size]


class Vocabulary:
    """A bijection between tokens and integer ids.

    Args:
        tokens: iterable of str, the tokens in id order (no duplicates).
        unk_token: str or `None`, the token that unknown words map to; it must be one of
            ``tokens``. Defaults to `None`: unknown words are an error.

    Raises:
        ValueError: ``tokens`` has duplicates, or ``unk_token`` is not one of them.

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
            counts: mapping token -> count (e.g. a `collections.Counter`).
            max_size: int or `None`, keep at most this many tokens (``unk_token``
                included). Defaults to `None` (no limit).
            min_count: int, drop tokens seen fewer times. Defaults to 1.
            unk_token: str or `None`, the unknown-word token. It keeps its rank when it is
                counted and within ``max_size``; otherwise it is added last. Defaults to
                `None` (no unknown-word token).

        Returns:
            A `Vocabulary`.

        Raises:
            ValueError: ``max_size`` or ``min_count`` is below 1.
            TypeError: ``max_size`` or ``min_count`` is not an integer.
        """
        tokens = rank_tokens(counts, min_count)
        if max_size is not None:
            max_size = check_int("max_size", max_size, 1)
        if unk_token is None:
            return cls(tokens[:max_size])
        limit = None if max_size is None else max_size - 1
        kept = [token for token in tokens if token != unk_token][:limit]
        rank = tokens.index(unk_token) if unk_token in tokens else len(kept)
        kept.insert(min(rank, len(kept)), unk_token)
        return cls(kept, unk_token)

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self._index

    def id(self, token):
        """The id of a token.

        Args:
            token: str.

        Returns:
            int: the token's id, or the unknown-word id for an unseen token.

        Raises:
            ValueError: the token is unseen and the vocabulary has no unknown-word token.
        """
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
        """Maps tokens to ids.

        Args:
            tokens: sequence of str.

        Returns:
            An int32 NumPy array of ids.

        Raises:
            ValueError: a token is unseen and the vocabulary has no unknown-word token.
        """
        index, unk = self._index, self._index.get(self.unk_token)
        ids = [index.get(token, unk) for token in tokens]
        if unk is None and None in ids:
            self.id(tokens[ids.index(None)])  # raises, naming the token
        return np.asarray(ids, dtype=np.int32)

    def decode(self, ids):
        """Maps ids back to tokens.

        Args:
            ids: array-like of ints, any shape (read in row-major order).

        Returns:
            A list of str.
        """
        return [self.tokens[int(i)] for i in np.asarray(ids).reshape(-1)]
