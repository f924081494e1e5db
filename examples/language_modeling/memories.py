"""The language-model example's ``--model`` choices, as memories for `build_language_model`.

`tf_memlayers.models.build_language_model` takes the memory itself: a layer over the top LSTM's
outputs, or a function from the top LSTM cell to a memory cell. The PTB example, its presets,
the parameter budget and the benchmarks name their memories; `make_memory` makes the one a name
stands for, and `language_model` builds a model from the names and sizes the command line
gives:

* ``"lstm"``: none (the baseline);
* ``"attention"``, ``"key_value"``, ``"key_value_predict"``: `SlidingWindowAttention` over the
  previous ``window`` outputs, with that split of the top LSTM's output;
* ``"ngram"``: `NGramConcat`, the N-gram RNN.

Each comes in two forms computing the same function: ``"parallel"`` (the LSTM layer, then the
sequence layer: the fast path) and ``"cell"`` (the memory cell around the LSTM cell, in
`keras.layers.RNN`).
"""

import keras

from examples.harness.checks import check_choice
from tf_memlayers.layers import (
    NGramConcat,
    NGramConcatCell,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.models.language_model import DANILUK_DEFAULTS, build_language_model

# The window-attention kinds, with the number of pieces each splits the LSTM output into.
_ATTENTION_PIECES = {"attention": 1, "key_value": 2, "key_value_predict": 3}
KINDS = ("lstm", *_ATTENTION_PIECES, "ngram")
ATTENTION_KINDS = tuple(_ATTENTION_PIECES)
FORMS = ("parallel", "cell")
# The names of the parallel form's memory layers (their weights' paths in saved runs).
LAYER_NAMES = {**{kind: "window_attention" for kind in ATTENTION_KINDS}, "ngram": "ngram"}


def pieces(kind, ngram=DANILUK_DEFAULTS["ngram"]):
    """The number of equal pieces the top LSTM's output is split into by ``kind``'s memory:
    its width must be a multiple of it (unless piece ``sizes`` are given)."""
    if kind == "ngram":
        return max(1, ngram - 1) if isinstance(ngram, int) else 1
    return _ATTENTION_PIECES.get(kind, 1)


def memory_width(
    kind,
    units,
    ngram=DANILUK_DEFAULTS["ngram"],
    sizes=None,
    memory_units=None,
    tie_weights=False,
    embedding_dim=None,
):
    """The output width of ``kind``'s memory over an LSTM of ``units``: ``memory_units`` if
    given; ``embedding_dim`` with tied weights; the attention layer's own default (the
    value-piece width) for the attention kinds; ``sizes[0]`` or ``units // (ngram - 1)`` for
    the N-gram RNN."""
    if tie_weights:
        if memory_units is not None and memory_units != embedding_dim:
            raise ValueError(
                f"with `tie_weights=True` the memory output width `memory_units` "
                f"({memory_units}) must equal `embedding_dim` ({embedding_dim})."
            )
        return embedding_dim
    if memory_units is not None or kind in ATTENTION_KINDS:
        return memory_units
    if sizes is not None:
        return int(sizes[0])
    return max(1, units // pieces(kind, ngram))


def make_memory(
    kind,
    units,
    form="parallel",
    window=DANILUK_DEFAULTS["window"],
    ngram=DANILUK_DEFAULTS["ngram"],
    sizes=None,
    attention_units=None,
    memory_units=None,
    tie_weights=False,
    embedding_dim=None,
    stateful=True,
    init_scale=DANILUK_DEFAULTS["init_scale"],
    pad="mask",
    use_bias=False,
    return_attention_scores=False,
):
    """The ``memory`` of `build_language_model` that ``kind`` names.

    Args:
        kind: String, one of `KINDS`.
        units: Positive integer, the top LSTM's width.
        form: String, `"parallel"` (a sequence layer) or `"cell"` (a function of the top
            LSTM cell). Default: `"parallel"`.
        window, pad, attention_units, return_attention_scores: The window attention's (see
            `SlidingWindowAttention`).
        ngram: Integer, the N-gram order (`NGramConcat`'s ``n``).
        sizes, use_bias: The memory layer's.
        memory_units, tie_weights, embedding_dim: Its output width (see `memory_width`).
        stateful: Boolean, whether the parallel form carries its memory across batches.
        init_scale: Float > 0; the memory's kernels start U(-init_scale, init_scale).

    Returns:
        None for ``"lstm"``, else a layer (parallel form) or a function ``lstm_cell ->
        memory cell`` (cell form).
    """
    check_choice("kind", kind, KINDS)
    check_choice("form", form, FORMS)
    if return_attention_scores and (kind not in ATTENTION_KINDS or form != "parallel"):
        raise ValueError(
            "`return_attention_scores=True` needs an attention kind "
            f"{ATTENTION_KINDS} in the parallel form; got kind={kind!r}, form={form!r}."
        )
    if kind == "lstm":
        if tie_weights and units != embedding_dim:
            raise ValueError(
                f"`tie_weights=True` with kind='lstm' needs `units` == `embedding_dim`; got "
                f"units={units}, embedding_dim={embedding_dim}."
            )
        return None
    width = memory_width(kind, units, ngram, sizes, memory_units, tie_weights, embedding_dim)
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator()
    )
    options = dict(sizes=sizes, use_bias=use_bias, kernel_initializer=init)
    if kind in ATTENTION_KINDS:
        options.update(
            mode=kind, units=width, window=window, attention_units=attention_units, pad=pad
        )
        if form == "cell":
            return lambda cell: SlidingWindowAttentionCell(cell, **options)
        return SlidingWindowAttention(
            stateful=stateful,
            return_attention_scores=return_attention_scores,
            name=LAYER_NAMES[kind],
            **options,
        )
    if form == "cell":
        return lambda cell: NGramConcatCell(cell, ngram, width, **options)
    return NGramConcat(ngram, width, stateful=stateful, name=LAYER_NAMES[kind], **options)


def language_model(
    vocabulary_size,
    kind="lstm",
    units=DANILUK_DEFAULTS["units"],
    form="parallel",
    window=DANILUK_DEFAULTS["window"],
    ngram=DANILUK_DEFAULTS["ngram"],
    sizes=None,
    attention_units=None,
    memory_units=None,
    pad="mask",
    use_bias=False,
    return_attention_scores=False,
    name=None,
    **build_kwargs,
):
    """`build_language_model` with the memory ``kind`` names (`make_memory`), named
    ``"<kind>_language_model"``.

    Args:
        vocabulary_size: Integer >= 2, the number of word ids.
        kind, units, form, window, ngram, sizes, attention_units, memory_units, pad,
            use_bias, return_attention_scores: See `make_memory`.
        name: Optional string, the model's name.
        **build_kwargs: The other arguments of `build_language_model` (``embedding_dim``,
            ``layers``, ``stateful``, ``init_scale``, ...).

    Returns:
        The `keras.Model` of `build_language_model`.

    Example:

    >>> model = language_model(50, "key_value", units=16, embedding_dim=8, window=3,
    ...                        batch_size=2, sequence_length=5)
    >>> model.name, model.output.shape
    ('key_value_language_model', (2, 5, 50))
    """
    memory = make_memory(
        kind,
        units,
        form=form,
        window=window,
        ngram=ngram,
        sizes=sizes,
        attention_units=attention_units,
        memory_units=memory_units,
        tie_weights=build_kwargs.get("tie_weights", False),
        embedding_dim=build_kwargs.get("embedding_dim", DANILUK_DEFAULTS["embedding_dim"]),
        stateful=build_kwargs.get("stateful", True),
        init_scale=build_kwargs.get("init_scale", DANILUK_DEFAULTS["init_scale"]),
        pad=pad,
        use_bias=use_bias,
        return_attention_scores=return_attention_scores,
    )
    return build_language_model(
        vocabulary_size,
        memory,
        units=units,
        name=name or f"{kind}_language_model",
        **build_kwargs,
    )
