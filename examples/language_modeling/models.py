"""The paper's language models (``--model``), built from the package's layers, and the LSTM
width at an equal parameter budget.

`tf_memlayers.models.build_language_model` takes the memory on top of the LSTM; `memory`
makes the one a ``--model`` name stands for:

* ``lstm``: none (the baseline);
* ``attention``, ``key_value``, ``key_value_predict``: `SlidingWindowAttention` over the
  previous ``window`` outputs, with that split of the top LSTM's output (its ``mode``);
* ``ngram``: `NGramConcat`, the N-gram RNN.

Each comes in two forms computing the same function: ``parallel`` (the LSTM layer, then the
memory over its output sequence: the fast path) and ``cell`` (the memory cell around the LSTM
cell, in `keras.layers.RNN`).
"""

import keras
import numpy as np

from tf_memlayers.layers import (
    NGramConcat,
    NGramConcatCell,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.models import DANILUK_DEFAULTS as PAPER
from tf_memlayers.models import build_language_model

KINDS = ("lstm", "attention", "key_value", "key_value_predict", "ngram")
ATTENTION_KINDS = KINDS[1:4]
FORMS = ("parallel", "cell")


def pieces(kind, ngram=PAPER["ngram"]):
    """How many equal pieces ``kind``'s memory splits the top LSTM's output into: its width
    must be a multiple of it (unless piece sizes are given)."""
    if kind == "ngram":
        return max(1, ngram - 1)
    return ATTENTION_KINDS.index(kind) + 1 if kind in ATTENTION_KINDS else 1


def memory(
    kind,
    units,
    form="parallel",
    window=PAPER["window"],
    ngram=PAPER["ngram"],
    sizes=None,
    tie_weights=False,
    embedding_dim=None,
    stateful=True,
    init_scale=PAPER["init_scale"],
    return_attention_scores=False,
):
    """The ``memory`` of `build_language_model` that ``kind`` names (`None` for ``lstm``):
    a layer (parallel form) or a function of the top LSTM cell (cell form), its kernels
    U(-init_scale, init_scale). Its output is ``embedding_dim`` wide with tied weights, else
    the layer's own width (the value piece's for attention, ``sizes[0]`` or ``units // (ngram
    - 1)`` for the N-gram RNN)."""
    if kind == "lstm":
        return None
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator()
    )
    options = dict(sizes=sizes, kernel_initializer=init)
    width = embedding_dim if tie_weights else None
    if kind == "ngram":
        width = width or (sizes[0] if sizes else max(1, units // pieces(kind, ngram)))
        if form == "cell":
            return lambda cell: NGramConcatCell(cell, ngram, width, **options)
        return NGramConcat(ngram, width, stateful=stateful, name="ngram", **options)
    options.update(window=window, mode=kind, units=width)
    if form == "cell":
        return lambda cell: SlidingWindowAttentionCell(cell, **options)
    return SlidingWindowAttention(
        stateful=stateful,
        return_attention_scores=return_attention_scores,
        name="window_attention",
        **options,
    )


def language_model(
    vocabulary_size,
    kind="attention",
    form="parallel",
    window=PAPER["window"],
    ngram=PAPER["ngram"],
    sizes=None,
    return_attention_scores=False,
    units=PAPER["units"],
    embedding_dim=PAPER["embedding_dim"],
    tie_weights=False,
    stateful=True,
    init_scale=PAPER["init_scale"],
    **build_options,
):
    """`build_language_model` with ``kind``'s `memory`, named ``<kind>_language_model``;
    ``build_options`` are the builder's others (``layers``, ``batch_size``, ``dropout``, ...).

    Example:

    >>> model = language_model(50, "key_value", units=16, embedding_dim=8, window=3,
    ...                        batch_size=2, sequence_length=5)
    >>> model.name, model.output.shape
    ('key_value_language_model', (2, 5, 50))
    """
    layer = memory(
        kind,
        units,
        form,
        window,
        ngram,
        sizes,
        tie_weights,
        embedding_dim,
        stateful,
        init_scale,
        return_attention_scores,
    )
    return build_language_model(
        vocabulary_size,
        layer,
        units=units,
        embedding_dim=embedding_dim,
        tie_weights=tie_weights,
        stateful=stateful,
        init_scale=init_scale,
        name=f"{kind}_language_model",
        **build_options,
    )


def parameter_count(model):
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


def units_for_budget(vocabulary_size, kind, budget, **options):
    """The LSTM width (a multiple of ``kind``'s `pieces`) at which ``kind``'s model has the
    trainable-parameter count closest to ``budget``, and that count: how Daniluk et al.
    (2017) compared the memory models with an LSTM of as many parameters. ``options`` are
    `language_model`'s, but ``units``.

    Example:

    >>> lstm = language_model(100, "lstm", units=30, embedding_dim=30, stateful=False)
    >>> budget = parameter_count(lstm)
    >>> units, count = units_for_budget(100, "key_value", budget, embedding_dim=30)
    >>> units % 2, abs(count - budget) < 0.05 * budget
    (0, True)
    """
    multiple = pieces(kind, options.get("ngram", PAPER["ngram"]))

    def count(steps):
        model = language_model(
            vocabulary_size, kind, units=steps * multiple, stateful=False, **options
        )
        return parameter_count(model)

    low, high = 1, 1
    while count(high) < budget:
        low, high = high, high * 2
    while high - low > 1:  # count(low) < budget <= count(high), unless high == 1
        middle = (low + high) // 2
        low, high = (middle, high) if count(middle) < budget else (low, middle)
    best = min((low, high), key=lambda steps: abs(count(steps) - budget))
    return best * multiple, count(best)
