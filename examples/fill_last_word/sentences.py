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

from examples.harness.checks import check_int
from examples.harness.data.files import check_not_blank, read_text
from examples.harness.data.vocabulary import (  # noqa: F401  (PAD re-exported)
    PAD,
    UNK,
    build_token_list,
)


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
    """``[PAD, UNK, words...]`` with words sorted by (-count, word), the reference's order
    (`examples.harness.data.vocabulary.build_token_list` over the whitespace-split sentences).

    Args:
        sentences: Iterable of strings (split on whitespace).
        max_size: Optional integer >= 2, a cap on the vocabulary length (PAD and UNK
            included). Default: `None` (no cap).
    """
    return build_token_list((s.split() for s in sentences), max_size=max_size)


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
        row[max_length - len(context) :] = context
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
_THINGS = ("fence", "door", "gate", "roof", "car", "boat")
_END = "."


def _house_names():
    return sorted(a + b for a in _SYLLABLES for b in _SYLLABLES if a != b)


GENERATED_HOUSES = len(_house_names())  # the made-up names, e.g. "kalo"
GENERATED_STEPS = 3  # context steps of the generated sentences: one padding step and 2 words


class LastWordEpisode(collections.namedtuple("LastWordEpisode", "facts questions houses")):
    """One episode of the generated corpus: facts, then the questions they answer.

    Attributes:
        facts: sentences ``"<colour> <house> ."`` (last word ``"."``), in the order given.
        questions: sentences ``"<house> <colour>"`` about the episode's houses, and colour
            sentences ``"<colour> <thing> <colour>"`` that name no house, in the order given.
        houses: ``{house: colour}`` of the episode.
    """

    @staticmethod
    def house(sentence):
        """The house a generated sentence is about, or ``None`` (a colour sentence)."""
        words = sentence.split()
        if len(words) == 3 and words[-1] == _END:
            return words[1]
        if len(words) == 2:
            return words[0]
        return None


def generated_last_word_vocabulary():
    """Every word of `generated_last_word_corpus`, in a fixed order (for `build_vocabulary`)."""
    return [_END, *_COLOURS, *_THINGS, *_house_names()]


def _episode(rng, names, houses, copies):
    picked = [names[i] for i in rng.choice(len(names), houses, replace=False)]
    # Different colours for up to 8 houses, each colour as often as the others with more: the
    # commonest colour of an episode is no better a guess than any other.
    drawn = np.resize(rng.permutation(len(_COLOURS)), houses)
    colours = {name: _COLOURS[i] for name, i in zip(picked, drawn)}
    facts = [f"{colour} {name} {_END}" for name, colour in colours.items()]
    questions = [f"{name} {colour}" for name, colour in colours.items()]
    for thing, i in zip(
        rng.integers(0, len(_THINGS), copies), rng.integers(0, len(_COLOURS), copies)
    ):
        questions.append(f"{_COLOURS[i]} {_THINGS[thing]} {_COLOURS[i]}")
    facts = [facts[i] for i in rng.permutation(len(facts))]
    questions = [questions[i] for i in rng.permutation(len(questions))]
    return LastWordEpisode(facts, questions, colours)


def generated_last_word_corpus(
    epoch=0, episodes=20, houses=8, copies=8, evaluation_episodes=10, seed=0
):
    """Episodes of facts about made-up houses, and questions that only those facts answer.

    An episode names ``houses`` houses (made-up two-syllable names such as ``kalo``), each
    with a colour: different colours for up to 8 houses, each colour equally often with more.
    Its facts are ``"red kalo ."``, one per house, whose last word is ``"."``; its questions
    are ``"kalo red"``, one per house: the house's name, and its colour as the last word to
    predict. In training, ``copies`` colour sentences ``"red fence red"``, which name no
    house, come among the questions. An epoch is ``episodes`` episodes drawn afresh for that
    epoch (houses and colours), so a house has other colours in other episodes; the
    evaluation episodes come from a random stream of their own and are the same in every
    epoch.

    The corpus is meant for episodes with a cache that is emptied before each one: the facts
    are trained (and written to the cache by their training step), then the questions, whose
    answers only the facts of their own episode state. No weight can hold a house's colour: it
    changes from episode to episode, and no training sentence about a house ends in its
    colour unless that colour is stated in the same episode. An evaluation episode writes its
    facts to the emptied cache, then asks its questions (``examples/fill_last_word_cache.py``
    does both, with `tf_memlayers.callbacks.cache_episodes_callback.CacheEpisodesCallback`).
    Without a cache a model can only guess: always answering the commonest colour gets 1/8 of
    the answers with 8 houses.

    To answer, a cache read has to match the name in a question with the same name in one
    cached fact, and to pass on the colour that the fact's state carries. The read with
    ``query="dot"`` of `build_fill_last_word_model` learns both on this corpus, and the
    paper's ``query="none"`` cannot (it gives every question the same read); the
    documentation's results page has the table (``benchmarks/papers/fill_last_word_generated.py``).
    The corpus is shaped for that; in trial runs each of these choices was needed:

    * short sentences, so that a state is mostly its house's name (with facts such as
      ``"the house of kalo is painted red ."`` the states of different houses hardly differed
      and the read did not learn to find the facts);
    * small episodes with different colours, so that even a diffuse read starts with some
      weight on the right fact, and only the asked house's fact has the answer's colour;
    * the colour sentences: the cache holds states without a gradient, so nothing else
      teaches the encoder to keep a colour it has read in a form the output layer reads
      (without them the output layer did not learn to read the colour even from the right
      fact, given to it directly);
    * a read gate that starts at 1 (`build_fill_last_word_model` does so for the dot read),
      so that a recalled state reaches the output layer along the directions the output
      layer reads in the example's own state.

    Earlier versions of this corpus asked about houses held out of training, mentioned only
    in facts ending in ``"."``: the model learnt to answer ``"."`` about those names, and no
    read found their facts. Here every name is trained, with colours that change; what is
    held out is the colours of the evaluation episodes.

    Args:
        epoch: which epoch's training episodes to draw (each epoch draws new ones).
        episodes: training episodes per epoch.
        houses: houses per episode (at most 132).
        copies: colour sentences ``"<colour> <thing> <colour>"`` among each episode's
            questions (0: none).
        evaluation_episodes: number of evaluation episodes (the same for every epoch).
        seed: seed of the whole corpus.

    Returns:
        ``(training episodes of the epoch, evaluation episodes)``: two lists of
        `LastWordEpisode`. Evaluation episodes have no colour sentences.
    """
    epoch = check_int("epoch", epoch, 0)
    episodes = check_int("episodes", episodes, 1)
    names = _house_names()
    houses = check_int("houses", houses, 1)
    if houses > GENERATED_HOUSES:
        raise ValueError(
            f"`houses` must be <= {GENERATED_HOUSES} (the made-up names), got {houses}."
        )
    copies = check_int("copies", copies, 0)
    evaluation_episodes = check_int("evaluation_episodes", evaluation_episodes, 1)
    seed = check_int("seed", seed, 0)
    train_rng = np.random.default_rng([seed, 1, epoch])
    evaluation_rng = np.random.default_rng([seed, 2])
    train = [_episode(train_rng, names, houses, copies) for _ in range(episodes)]
    evaluation = [_episode(evaluation_rng, names, houses, 0) for _ in range(evaluation_episodes)]
    return train, evaluation
