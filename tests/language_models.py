"""The language models of Daniluk et al. (2017) for the package's tests: each memory kind made
from the package's layers and given to `build_language_model`, in its two forms.

* ``"lstm"``: no memory (the baseline);
* ``"attention"``, ``"key_value"``, ``"key_value_predict"``: `SlidingWindowAttention` in that
  mode (the cell form: `SlidingWindowAttentionCell` around the top LSTM cell);
* ``"ngram"``: `NGramConcat` (the cell form: `NGramConcatCell`)."""

import keras

from tf_memlayers.layers import (
    NGramConcat,
    NGramConcatCell,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.models import build_language_model

KINDS = ("lstm", "attention", "key_value", "key_value_predict", "ngram")
ATTENTION_KINDS, FORMS = KINDS[1:4], ("parallel", "cell")
# The memory layers' names in the parallel form.
LAYER_NAMES = {**dict.fromkeys(ATTENTION_KINDS, "window_attention"), "ngram": "ngram"}
# The memory layers' own options that `language_model` passes on.
MEMORY_OPTIONS = ("sizes", "attention_units", "pad", "use_bias")


def pieces(kind, ngram=4):
    """The number of equal pieces ``kind``'s memory splits the top LSTM's output into."""
    if kind == "ngram":
        return max(1, ngram - 1)
    return ATTENTION_KINDS.index(kind) + 1 if kind in ATTENTION_KINDS else 1


def language_model(
    vocabulary_size,
    kind="lstm",
    form="parallel",
    window=5,
    ngram=4,
    memory_units=None,
    return_attention_scores=False,
    **options,
):
    """``build_language_model(vocabulary_size, memory, **options)`` with ``kind``'s memory (its
    kernels U(-init_scale, init_scale), as the builder's weights), named ``<kind>_language_model``.
    ``options`` are the builder's, and the memory's `MEMORY_OPTIONS`. The memory's output width is
    ``memory_units``, else ``embedding_dim`` with tied weights, else the layer's default for
    attention and ``sizes[0]`` or ``units // (ngram - 1)`` for the N-gram RNN."""
    layer_options = {name: options.pop(name) for name in MEMORY_OPTIONS if name in options}
    memory = None
    if kind != "lstm":
        scale = options.get("init_scale", 0.1)
        init = keras.initializers.RandomUniform(-scale, scale, seed=keras.random.SeedGenerator())
        layer_options["kernel_initializer"] = init
        width = memory_units
        if width is None and options.get("tie_weights"):
            width = options.get("embedding_dim", 300)
        stateful = options.get("stateful", True)
        if kind == "ngram":
            sizes = layer_options.get("sizes")
            even = max(1, options.get("units", 300) // pieces(kind, ngram))
            width = width or (sizes[0] if sizes else even)
            if form == "cell":
                memory = lambda cell: NGramConcatCell(cell, ngram, width, **layer_options)  # noqa: E731
            else:
                memory = NGramConcat(ngram, width, stateful=stateful, name="ngram", **layer_options)
        elif form == "cell":
            layer_options.update(window=window, mode=kind, units=width)
            memory = lambda cell: SlidingWindowAttentionCell(cell, **layer_options)  # noqa: E731
        else:
            layer_options.update(units=width, stateful=stateful, name="window_attention")
            scores = dict(return_attention_scores=return_attention_scores)
            memory = SlidingWindowAttention(window, kind, **scores, **layer_options)
    options.setdefault("name", f"{kind}_language_model")
    return build_language_model(vocabulary_size, memory, **options)
