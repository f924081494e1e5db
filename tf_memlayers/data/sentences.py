"""Last-word prediction data: one sentence per line, and a generated default corpus.

The task of Gaffney's *Cache Attention for Recurrent Language Modeling*: read a sentence minus
its last whitespace token and predict that token. The reference implementation skips sentences
of more than 40 tokens and right-aligns the context in 40 steps behind at least one padding
step (ORIGINAL_CODE.md §2.2); `encode_last_word` does the same, with id 0 as padding.
"""

import collections
import pathlib

import numpy as np
import tensorflow as tf

from tf_memlayers._validation import check_int
from tf_memlayers.data._files import check_not_blank, read_text

PAD, UNK = "<pad>", "<unk>"


def read_sentences(path):
    """Non-empty lines of a text file (``.gz`` decompressed), whitespace-stripped.

    Handles CRLF line ends and stray undecodable bytes (replaced with U+FFFD), as in the PWKP
    files.

    Args:
        path: the file, one sentence per line.

    Returns:
        A non-empty list of strings.

    Raises:
        ValueError: the file is empty or blank, is not text (NUL bytes, or mostly undecodable
            bytes or control characters), or is a ``.gz`` that is not gzip data; the message
            names the file.
    """
    text = check_not_blank(read_text(pathlib.Path(path)), path, "sentences")
    return [line.strip() for line in text.splitlines() if line.strip()]


def build_vocabulary(sentences, max_size=None):
    """``[PAD, UNK, words...]`` with words sorted by (-count, word), the reference's order.

    Args:
        sentences: iterable of strings (split on single spaces/whitespace).
        max_size: optional cap on the vocabulary length (including PAD and UNK).
    """
    if max_size is not None:
        check_int("max_size", max_size, 2)  # room for PAD and UNK
    counts = collections.Counter(token for s in sentences for token in s.split())
    words = sorted((w for w in counts if w not in (PAD, UNK)), key=lambda w: (-counts[w], w))
    vocabulary = [PAD, UNK, *words]
    return vocabulary if max_size is None else vocabulary[:max_size]


def encode_last_word(sentences, vocabulary, max_length=40):
    """Encodes sentences as (context ids, last-word id).

    A sentence of ``n`` tokens (``2 <= n <= max_length``; others are skipped) gives
    ``x[max_length - n + 1:] = ids of tokens[:-1]`` after ``max_length - n + 1 >= 1`` padding
    steps, and ``y = id(tokens[-1])``. Unknown words map to ``<unk>``.

    Args:
        sentences: iterable of strings.
        vocabulary: list of words (row = id) that holds ``<unk>``, e.g. from
            `build_vocabulary`.
        max_length: context steps, at least 2 (one padding step and one context word).

    Returns:
        ``(x int32 [N, max_length], y int32 [N], kept)`` with ``kept`` the indices of the
        sentences used.
    """
    max_length = check_int("max_length", max_length, 2)
    index = {word: i for i, word in enumerate(vocabulary)}
    if UNK not in index:
        raise ValueError(
            f"`vocabulary` must hold the unknown-word token {UNK!r} (see `build_vocabulary`); "
            f"got {len(index)} words without it."
        )
    unknown = index[UNK]
    x, y, kept = [], [], []
    for position, sentence in enumerate(sentences):
        tokens = sentence.split()
        if not 2 <= len(tokens) <= max_length:
            continue
        row = np.zeros(max_length, np.int32)
        context = [index.get(t, unknown) for t in tokens[:-1]]
        row[max_length - len(context):] = context
        x.append(row)
        y.append(index.get(tokens[-1], unknown))
        kept.append(position)
    x = np.stack(x) if x else np.zeros((0, max_length), np.int32)
    return x, np.asarray(y, np.int32), kept


def last_word_dataset(x, y, batch_size, shuffle=False, seed=0, repeat=False):
    """A batched, prefetched `tf.data.Dataset` of fixed-length ``(x, y)`` pairs."""
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if shuffle:
        dataset = dataset.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


_COLOURS = ("red", "blue", "green", "yellow", "white", "black", "grey", "brown")
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "de", "pa", "zu", "ho")
# A question (context and answer) is its fact without the final ".": the fact's context is the
# question's context followed by the answer.
_QUESTIONS = (
    "the house of {e} is painted",
    "{e} lives in a house that is painted",
)


def generated_last_word_corpus(entities=120, held_out=40, seed=0):
    """Facts about made-up houses, and questions whose answers only those facts state.

    Each of ``entities`` houses (a made-up two-syllable name, e.g. ``kalo``) gets a random
    colour. Training holds, for every house and every question template, a fact that ends right
    after the colour (``"the house of kalo is painted red ."``, whose last word is ``"."``)
    and, for the first ``entities - held_out`` houses only, the question that is the same
    sentence ending in the colour (``"the house of kalo is painted red"``). The evaluation set
    asks these questions about the ``held_out`` other houses.

    A held-out house's colour is never the last word of a training sentence about that house,
    so no weight is trained to give it; it appears only inside the house's facts, whose context
    is the question's context followed by the colour. With the default encoder (attention
    pooling) a question's state is, even untrained, nearer to its own fact's state than to
    any other training state, so a cache of training states holds the answer. A model gets
    beyond the colours' frequencies only if its cache read learns, from the training
    questions, to pick that fact (``query="additive"``). The corpus tests that; it does not
    make it happen: at the settings of ``examples/fill_last_word_cache.py`` the additive read
    does not learn the match, and the model with a cache does no better than the one without.

    The reason lies in the read, not in this corpus. A held-out house's answer needs a match
    between its name in the question and the same name in a cached fact, for names the read
    never saw asked, so the match has to be an identity test that generalises to new names.
    With ``query="none"`` the read is one vector for every example. With ``query="additive"``
    the score ``v_c^T tanh(W_c^T C_i + W_q^T h)`` learns associations between features of the
    training questions and of the cached states, which the weights can also learn from the
    same targets (and do, by memorising the training questions), and which do not carry over
    to names outside them. The encoder also drops a name from a fact's state when the fact's
    own last word does not need it, and the cache holds states written with older weights.

    Args:
        entities: number of houses (at most 132).
        held_out: number of houses asked about only in the evaluation set.
        seed: seed of the names, colours and training order.

    Returns:
        ``(train sentences, evaluation sentences)``, lists of strings.
    """
    if not 0 < held_out < entities <= len(_SYLLABLES) * (len(_SYLLABLES) - 1):
        raise ValueError(
            f"Need 0 < held_out < entities <= {len(_SYLLABLES) * (len(_SYLLABLES) - 1)}, got "
            f"entities={entities}, held_out={held_out}."
        )
    rng = np.random.default_rng(seed)
    names = sorted(a + b for a in _SYLLABLES for b in _SYLLABLES if a != b)
    names = [names[i] for i in rng.choice(len(names), entities, replace=False)]
    picks = rng.integers(0, len(_COLOURS), entities)
    colours = {name: _COLOURS[i] for name, i in zip(names, picks)}

    def questions(name):
        return [q.format(e=name) + " " + colours[name] for q in _QUESTIONS]

    asked, held = names[: entities - held_out], names[entities - held_out:]
    train = [question + " ." for name in names for question in questions(name)]
    train += [question for name in asked for question in questions(name)]
    evaluation = [question for name in held for question in questions(name)]
    order = rng.permutation(len(train))
    return [train[i] for i in order], evaluation
