"""A generated language-model corpus, for machines without a downloaded one.

`generate_copy_corpus` writes sentences whose second half repeats their first half, so that
a model that reads a few steps back (window attention) beats one that must keep the words in
its state (a plain LSTM). It is the default corpus of ``examples/ptb_memory_lm.py``.
"""

import numpy as np

from examples.harness.checks import check_int
from examples.harness.data.vocabulary import EOS, Vocabulary
from examples.language_modeling.token_streams import encode_corpus

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
        train_tokens, valid_tokens, test_tokens: int, approximate length of each split.
            Default to 200,000, 20,000 and 20,000.
        num_words: int, content vocabulary size, at least 2. Defaults to 200.
        min_span, max_span: int, range of the span length. Default to 2 and 4.
        sentences_per_document: int, sentences per story. Defaults to 25.
        zipf_exponent: float, exponent of the content-word distribution. Defaults to 1.0.
        seed: int, random seed (the corpus is a pure function of the arguments). Defaults
            to 0.

    Returns:
        An `LMCorpus` named ``"generated"`` with the closed vocabulary ``<eos>``,
        ``again``, ``w0`` ... ``w{num_words - 1}``.

    Raises:
        ValueError: a size is below its minimum, or ``max_span < min_span``.
        TypeError: a size is not an integer.

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
    return encode_corpus("generated", vocabulary, split_tokens)
