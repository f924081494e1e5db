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

PAD, UNK = "<pad>", "<unk>"


def read_sentences(path):
    """Non-empty lines of a text file, whitespace-stripped.

    Handles CRLF line ends and undecodable bytes (replaced with U+FFFD), as in the PWKP files.
    """
    text = pathlib.Path(path).read_bytes().decode("utf-8", errors="replace")
    return [line.strip() for line in text.splitlines() if line.strip()]


def build_vocabulary(sentences, max_size=None):
    """``[PAD, UNK, words...]`` with words sorted by (-count, word), the reference's order.

    Args:
        sentences: iterable of strings (split on single spaces/whitespace).
        max_size: optional cap on the vocabulary length (including PAD and UNK).
    """
    counts = collections.Counter(token for s in sentences for token in s.split())
    words = sorted((w for w in counts if w not in (PAD, UNK)), key=lambda w: (-counts[w], w))
    vocabulary = [PAD, UNK, *words]
    return vocabulary if max_size is None else vocabulary[:max_size]


def encode_last_word(sentences, vocabulary, max_length=40):
    """Encodes sentences as (context ids, last-word id).

    A sentence of ``n`` tokens (``2 <= n <= max_length``; others are skipped) gives
    ``x[max_length - n + 1:] = ids of tokens[:-1]`` after ``max_length - n + 1 >= 1`` padding
    steps, and ``y = id(tokens[-1])``. Unknown words map to ``<unk>``.

    Returns:
        ``(x int32 [N, max_length], y int32 [N], kept)`` with ``kept`` the indices of the
        sentences used.
    """
    index = {word: i for i, word in enumerate(vocabulary)}
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


_ATTRIBUTES = ("red", "blue", "green", "yellow", "white", "black", "grey", "brown")
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "de", "pa", "zu", "ho")
_FACTS = (
    "everyone in town knows that {e} is painted {a} these days",
    "the old {a} house on the hill belongs to {e} they say",
    "we saw {e} yesterday and it was clearly {a} in the sun",
)
_QUESTIONS = (
    "what colour is {e} painted these days ? it is",
    "if you visit {e} you will find that it is painted",
    "the house of {e} has a colour , and that colour is",
)
_FILLER = (
    "the weather was mild and the streets were quiet all day",
    "a small market opens near the station every morning",
    "children walked to school along the river in the rain",
    "the library keeps old maps of the region in the basement",
)


def generated_last_word_corpus(entities=60, held_out=20, facts_per_entity=2, seed=0):
    """A corpus whose held-out answers are recoverable only from other training examples.

    Each of ``entities`` made-up house names gets a random colour. Training sentences state the
    colours inside the sentence (facts, ending in a predictable word) and ask for the colour of
    the first ``entities - held_out`` houses (questions, ending in the colour); a few filler
    sentences are mixed in. The evaluation set asks only about the ``held_out`` other houses:
    their colours never end a training sentence, so no weight learns them as answers: beyond
    the colours' overall frequencies, a model can only answer by reading the cached states of
    the fact sentences it saw earlier (with ``query="additive"``, which lets the read depend on
    the question).

    Returns:
        ``(train sentences, evaluation sentences)``, lists of strings.
    """
    rng = np.random.default_rng(seed)
    # Two-word names over a small syllable set: a held-out house is a new combination of
    # syllables that training questions use, so matching a question to its fact can be learned.
    names = sorted(a + " " + b for a in _SYLLABLES for b in _SYLLABLES if a != b)
    names = [names[i] for i in rng.choice(len(names), entities, replace=False)]
    picks = rng.integers(0, len(_ATTRIBUTES), entities)
    colours = {name: _ATTRIBUTES[i] for name, i in zip(names, picks)}
    train = []
    for name in names:
        for template in rng.choice(len(_FACTS), facts_per_entity, replace=False):
            train.append(_FACTS[template].format(e=name, a=colours[name]))
    asked, held = names[: entities - held_out], names[entities - held_out:]
    for name in asked:
        for template in _QUESTIONS:
            train.append(template.format(e=name) + " " + colours[name])
    train += list(_FILLER) * 2
    evaluation = [t.format(e=name) + " " + colours[name] for name in held for t in _QUESTIONS]
    order = rng.permutation(len(train))
    return [train[i] for i in order], evaluation
