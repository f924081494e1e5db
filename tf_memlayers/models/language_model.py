"""Word-level recurrent language models with a memory layer on top (Daniluk et al. 2017).

The model is ``embedding -> LSTM (x layers) -> memory layer -> softmax with bias``, where the
memory layer is one of

* ``"lstm"``: none (the baseline);
* ``"attention"``, ``"key_value"``, ``"key_value_predict"``: `SlidingWindowAttention` over
  the previous ``window`` outputs of the top LSTM, with the matching output split;
* ``"ngram"``: `NGramConcat`, the N-gram RNN.

Training defaults are those of Daniluk et al. (2017, §4.1): Adam with learning rate 1e-3,
mini-batches of 64, gradient clipping at global norm 5, forget-gate bias 1, all other
parameters U(-0.1, 0.1), truncated BPTT over 20 steps, states reset between documents. The
baselines of *Neural Language Models Explained* are options: dropout on the non-recurrent
connections (Zaremba et al. 2014), variational ("locked") dropout with one mask per sequence
(Gal & Ghahramani 2016) and tied input/output embeddings (Press & Wolf 2017).

Perplexity is exp(mean negative log-likelihood over all target tokens); with padding given
zero sample weights, the `Perplexity` metric computes exactly that over a whole split.
"""

import dataclasses
from typing import Callable

import keras

from tf_memlayers._validation import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_optional_int,
)
from tf_memlayers.initializers import ForgetGateBias
from tf_memlayers.layers import (
    NGramConcat,
    NGramConcatCell,
    PhiloxDropout,
    ResettableRNN,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
    TiedEmbedding,
    lstm_use_cudnn,
)
from tf_memlayers.losses import LOSS_REDUCTIONS, SequenceCrossentropy  # noqa: F401  (re-exported)
from tf_memlayers.metrics import Perplexity


@dataclasses.dataclass(frozen=True)
class MemoryKind:
    """How `build_language_model` puts one kind of memory on top of the LSTM.

    Attributes:
        layer: ``(units, ngram, stateful, **memory_args) -> layer`` over the top LSTM's
            outputs (the parallel form); `None` for no memory.
        cell: ``(lstm_cell, units, ngram, **memory_args) -> cell`` wrapping the top LSTM
            cell (the cell form).
        layer_name: The name of the parallel form's memory layer (its weights' paths).
        pieces: ``ngram -> int``: the number of equal pieces the LSTM output is split into,
            so that its width is a multiple of it.
        attention: Whether the memory attends over a window (takes ``window``,
            ``attention_units`` and ``pad``, and can return attention scores).
    """

    layer: Callable = None
    cell: Callable = None
    layer_name: str = None
    pieces: Callable = lambda ngram: 1
    attention: bool = False


def _window_attention(mode, pieces):
    return MemoryKind(
        layer=lambda units, ngram, stateful, **memory_args: SlidingWindowAttention(
            mode=mode, units=units, stateful=stateful, name="window_attention", **memory_args
        ),
        cell=lambda lstm_cell, units, ngram, **memory_args: SlidingWindowAttentionCell(
            lstm_cell, mode=mode, units=units, **memory_args
        ),
        layer_name="window_attention",
        pieces=lambda ngram: pieces,
        attention=True,
    )


# The memory kinds, by the name `build_language_model(kind=...)`, the parameter budget, the
# examples' ``--model`` choices and the benchmarks use.
MEMORY_KINDS = {
    "lstm": MemoryKind(),
    "attention": _window_attention("attention", 1),
    "key_value": _window_attention("key_value", 2),
    "key_value_predict": _window_attention("key_value_predict", 3),
    "ngram": MemoryKind(
        layer=lambda units, ngram, stateful, **memory_args: NGramConcat(
            ngram, units, stateful=stateful, name="ngram", **memory_args
        ),
        cell=lambda lstm_cell, units, ngram, **memory_args: NGramConcatCell(
            lstm_cell, ngram, units, **memory_args
        ),
        layer_name="ngram",
        pieces=lambda ngram: ngram - 1,
    ),
}
KINDS = tuple(MEMORY_KINDS)
ATTENTION_KINDS = tuple(name for name, kind in MEMORY_KINDS.items() if kind.attention)
FORMS = ("parallel", "cell")

# Daniluk et al. (2017) §4.1.
DANILUK_DEFAULTS = {
    "learning_rate": 1e-3,
    "batch_size": 64,
    "clip_norm": 5.0,
    "forget_bias": 1.0,
    "init_scale": 0.1,
    "seq_len": 20,
    "window": 5,
    "ngram": 4,
    "hidden": 300,
    "embedding_dim": 300,
}


def _check_kind_arguments(kind, form, ngram, layers, dropout, recurrent_dropout):
    check_choice("kind", kind, KINDS)
    check_choice("form", form, FORMS)
    check_int("ngram", ngram, 2)
    check_int("layers", layers, 1)
    for name, rate in (("dropout", dropout), ("recurrent_dropout", recurrent_dropout)):
        check_number(name, rate, 0.0, 1.0)


def _dropout(x, rate, variational, name):
    """Dropout on a ``[batch, time, features]`` tensor; variational = one mask per sequence."""
    if not rate:
        return x
    noise_shape = (None, 1, x.shape[-1]) if variational else None
    return PhiloxDropout(rate, noise_shape=noise_shape, name=name)(x)


def _lstm_options(hidden, init, forget_bias, recurrent_dropout, name):
    """The arguments the LSTM layer and the LSTM cell of the model share."""
    return dict(
        units=hidden,
        kernel_initializer=init,
        recurrent_initializer=init,
        bias_initializer=ForgetGateBias(forget_bias),
        unit_forget_bias=False,
        recurrent_dropout=recurrent_dropout,
        name=name,
    )


def _lstm_cell(hidden, init, forget_bias, recurrent_dropout, name):
    options = _lstm_options(hidden, init, forget_bias, recurrent_dropout, name)
    return keras.layers.LSTMCell(**options)


def _lstm(hidden, init, forget_bias, recurrent_dropout, stateful, name):
    options = _lstm_options(hidden, init, forget_bias, recurrent_dropout, name)
    use_cudnn = lstm_use_cudnn()
    return keras.layers.LSTM(
        return_sequences=True, stateful=stateful, use_cudnn=use_cudnn, **options
    )


def _default_units(kind, hidden, ngram, sizes, units, tie_weights, embedding_dim):
    """Width of the memory layer's output."""
    if tie_weights:
        if units is not None and units != embedding_dim:
            raise ValueError(
                f"with `tie_weights=True` the memory output width `units` ({units}) must equal "
                f"`embedding_dim` ({embedding_dim})."
            )
        return embedding_dim
    if units is not None or MEMORY_KINDS[kind].attention:
        return units  # None: the attention layer's default, the value-piece width
    if sizes is not None:
        return int(sizes[0])
    return max(1, hidden // MEMORY_KINDS[kind].pieces(ngram))


def build_language_model(
    vocabulary_size,
    kind="lstm",
    hidden=300,
    embedding_dim=300,
    window=5,
    ngram=4,
    sizes=None,
    attention_units=None,
    units=None,
    layers=1,
    dropout=0.0,
    variational_dropout=False,
    recurrent_dropout=0.0,
    tie_weights=False,
    batch_size=None,
    seq_len=20,
    stateful=True,
    form="parallel",
    init_scale=0.1,
    forget_bias=1.0,
    pad="mask",
    use_bias=False,
    return_attention_scores=False,
    resets=False,
    name=None,
):
    """Builds a word-level LSTM language model with an optional memory layer on top.

    ``tokens [batch, seq_len] -> Embedding -> LSTM x layers -> memory layer -> logits``.
    The model outputs vocabulary logits ``[batch, seq_len, vocabulary_size]`` (softmax with a
    bias; compile with `compile_language_model`). The defaults are those of Daniluk et al.
    (2017, §4.1), see `DANILUK_DEFAULTS`.

    Args:
        vocabulary_size: Integer >= 2, the number of word ids.
        kind: String, the memory layer: `"lstm"` (none), `"attention"`, `"key_value"`,
            `"key_value_predict"` (`SlidingWindowAttention` with that split of the top
            LSTM's output) or `"ngram"` (the N-gram RNN, `NGramConcat`). Default: `"lstm"`.
        hidden: Positive integer, the units of every LSTM layer (the top one is split into
            key/value/predict or N-1 pieces; equal pieces must divide it unless ``sizes`` is
            given). Default: `300`.
        embedding_dim: Positive integer, the word embedding width. Default: `300`.
        window: Positive integer, the attention window L (attention kinds). Default: `5`.
        ngram: Integer >= 2, the order N of the N-gram RNN (``kind="ngram"``; the argument
            ``n`` of `NGramConcat`). Default: `4`.
        sizes: Optional tuple of positive integers, explicit piece sizes of the top LSTM
            output (key first, or the N-1 pieces). Default: `None` (equal pieces).
        attention_units: Optional positive integer, the width of the attention hidden
            layer. Default: `None` (the key size).
        units: Optional positive integer, the output width of the memory layer. Default:
            `None` (the value-piece width for the attention kinds, ``hidden // (ngram - 1)``
            (or ``sizes[0]``) for the N-gram RNN, ``embedding_dim`` when tying weights).
        layers: Positive integer, the number of stacked LSTM layers; the memory layer reads
            the top one. Default: `1`.
        dropout: Float in [0, 1), the dropout rate on the embeddings, between LSTM layers
            and before the softmax (Zaremba et al.'s non-recurrent dropout). Default: `0.0`.
        variational_dropout: Boolean, (default `False`), whether to use one dropout mask per
            sequence, shared by all time steps (Gal & Ghahramani's locked dropout), instead
            of a new mask per step.
        recurrent_dropout: Float in [0, 1), the dropout rate on the LSTMs' recurrent state
            (Keras's variational recurrent dropout, one mask per sequence). Default: `0.0`.
        tie_weights: Boolean, (default `False`), whether to use the input embedding,
            transposed, as the output layer (Press & Wolf, `TiedEmbedding`). The layer
            feeding the softmax then has ``embedding_dim`` units (for `"lstm"`, ``hidden``
            must equal ``embedding_dim``).
        batch_size: Optional positive integer, the fixed batch size; required when
            ``stateful``. Default: `None`.
        seq_len: Optional positive integer, the time steps per batch (the truncated-BPTT
            length), or `None` for a variable length (e.g. probe models). Default: `20`.
        stateful: Boolean, (default `True`), whether to carry the LSTM states and the memory
            from batch to batch (truncated BPTT); reset them with
            `tf_memlayers.callbacks.reset_language_model_states`.
        form: String, `"parallel"` (`keras.layers.LSTM` followed by the sequence form of the
            memory layer, the fast path) or `"cell"` (the memory cell wrapping an `LSTMCell`
            inside `keras.layers.RNN`); both compute the same function. Default:
            `"parallel"`.
        init_scale: Float > 0, every weight is initialised U(-init_scale, init_scale).
            Default: `0.1`.
        forget_bias: Float, the initial LSTM forget-gate bias (the other biases start at
            0). Default: `1.0`.
        pad: String, the start-of-stream treatment of the attention window, `"mask"` or
            `"zeros"` (see `SlidingWindowAttention`). Default: `"mask"`.
        use_bias: Boolean, (default `False`), whether the memory layer has biases (the paper
            has none).
        return_attention_scores: Boolean, (default `False`), whether to also output the
            attention weights ``[batch, seq_len, window]`` (parallel attention kinds only;
            used by probe models).
        resets: Boolean, (default `False`), whether the model takes a second input,
            ``reset`` (bool ``[batch, seq_len]``, true where a new document starts), and
            starts each row's LSTM states and memory again there, inside the graph: for
            documents packed back to back in each row (as in the PTB example's batches
            with ``pack=True``). The inputs are then a dict ``{"tokens", "reset"}``, and the LSTM
            layers are `ResettableRNN` over an `LSTMCell` (the same weights, in the same
            order, as `keras.layers.LSTM`).
        name: Optional string, the model name. Default: `None` (``"<kind>_language_model"``).

    Returns:
        A `keras.Model` with the token ids as input and the logits (followed, with
        ``return_attention_scores=True``, by the attention weights) as output.

    Example:

    >>> import numpy as np
    >>> model = build_language_model(50, kind="key_value", hidden=16, embedding_dim=8,
    ...                              window=3, batch_size=2, seq_len=5)
    >>> model(np.zeros((2, 5), "int32")).shape
    TensorShape([2, 5, 50])
    """
    vocabulary_size = check_int("vocabulary_size", vocabulary_size, 2)
    hidden = check_int("hidden", hidden, 1)
    embedding_dim = check_int("embedding_dim", embedding_dim, 1)
    seq_len = check_optional_int("seq_len", seq_len, 1)
    batch_size = check_optional_int("batch_size", batch_size, 1)
    _check_kind_arguments(kind, form, ngram, layers, dropout, recurrent_dropout)
    if stateful and batch_size is None:
        raise ValueError("`stateful=True` needs a fixed `batch_size`; got batch_size=None.")
    init_scale = check_number("init_scale", init_scale, 0.0, low_open=True)
    if return_attention_scores and (kind not in ATTENTION_KINDS or form != "parallel"):
        raise ValueError(
            "`return_attention_scores=True` needs an attention kind "
            f"{ATTENTION_KINDS} in the parallel form; got kind={kind!r}, form={form!r}."
        )
    if tie_weights and kind == "lstm" and hidden != embedding_dim:
        raise ValueError(
            f"`tie_weights=True` with kind='lstm' needs `hidden` == `embedding_dim`; got "
            f"hidden={hidden}, embedding_dim={embedding_dim}."
        )
    resets = check_bool("resets", resets)
    init = keras.initializers.RandomUniform(-init_scale, init_scale)
    units = _default_units(kind, hidden, ngram, sizes, units, tie_weights, embedding_dim)
    memory = MEMORY_KINDS[kind]
    memory_args = {"sizes": sizes, "use_bias": use_bias, "kernel_initializer": init}
    if memory.attention:
        memory_args.update(window=window, attention_units=attention_units, pad=pad)

    tokens = keras.Input((seq_len,), batch_size=batch_size, dtype="int32", name="tokens")
    reset = None
    if resets:
        reset = keras.Input((seq_len,), batch_size=batch_size, dtype="bool", name="reset")
    starts = {} if reset is None else {"reset": reset}

    def lstm(name):
        if reset is None:
            return _lstm(hidden, init, forget_bias, recurrent_dropout, stateful, name)
        cell = _lstm_cell(hidden, init, forget_bias, recurrent_dropout, "lstm_cell")
        return ResettableRNN(cell, return_sequences=True, stateful=stateful, name=name)

    embedding_type = TiedEmbedding if tie_weights else keras.layers.Embedding
    embedding = embedding_type(
        vocabulary_size, embedding_dim, embeddings_initializer=init, name="embedding"
    )
    x = _dropout(embedding(tokens), dropout, variational_dropout, "embedding_dropout")
    for i in range(layers - 1):
        x = lstm(f"lstm_{i}")(x, **starts)
        x = _dropout(x, dropout, variational_dropout, f"lstm_{i}_dropout")
    top = f"lstm_{layers - 1}"
    scores = None
    if memory.cell is not None and form == "cell":
        cell = memory.cell(
            _lstm_cell(hidden, init, forget_bias, recurrent_dropout, top), units, ngram,
            **memory_args,
        )  # fmt: skip
        rnn_type = keras.layers.RNN if reset is None else ResettableRNN
        x = rnn_type(cell, return_sequences=True, stateful=stateful, name=f"{kind}_rnn")(
            x, **starts
        )
    else:
        x = lstm(top)(x, **starts)
        if return_attention_scores:  # an attention kind: checked above
            memory_args["return_attention_scores"] = True
        if memory.layer is not None:
            x = memory.layer(units, ngram, stateful, **memory_args)(x, **starts)
        if return_attention_scores:
            x, scores = x
    x = _dropout(x, dropout, variational_dropout, "output_dropout")
    if tie_weights:
        logits = embedding(x, reverse=True)
    else:
        logits = keras.layers.Dense(vocabulary_size, kernel_initializer=init, name="softmax")(x)
    outputs = logits if scores is None else [logits, scores]
    inputs = tokens if reset is None else {"tokens": tokens, "reset": reset}
    return keras.Model(inputs, outputs, name=name or f"{kind}_language_model")


OPTIMIZERS = ("adam", "sgd")


def make_optimizer(optimizer="adam", learning_rate=1e-3, clip_norm=5.0):
    """The optimizer named by ``optimizer`` with global-norm gradient clipping.

    Args:
        optimizer: String, `"adam"` (Daniluk et al.) or `"sgd"` (plain SGD without
            momentum, Zaremba et al.). Default: `"adam"`.
        learning_rate: Float > 0, the initial learning rate. Default: `1e-3`.
        clip_norm: Optional float >= 0, the global gradient-norm threshold; `None` or 0: no
            clipping. Default: `5.0`.

    Returns:
        A `keras.optimizers.Optimizer`.

    Example:

    >>> make_optimizer("sgd", 1.0, clip_norm=None).global_clipnorm is None
    True
    """
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_number("learning_rate", learning_rate, 0.0, low_open=True)
    if clip_norm is not None:
        check_number("clip_norm", clip_norm, 0.0)
    optimizer_type = keras.optimizers.Adam if optimizer == "adam" else keras.optimizers.SGD
    return optimizer_type(learning_rate, global_clipnorm=clip_norm or None)


def compile_language_model(
    model,
    learning_rate=1e-3,
    clip_norm=5.0,
    jit_compile=True,
    perplexity=True,
    optimizer="adam",
    loss_reduction="token_mean",
):
    """Compiles a language model: optimizer with global-norm clipping, cross-entropy.

    The `Perplexity` metric (weighted) reports the corpus perplexity whatever the loss
    reduction.

    Args:
        model: A `keras.Model` from `build_language_model`.
        learning_rate: Float > 0, the initial learning rate. Default: `1e-3`.
        clip_norm: Optional float >= 0, the global gradient-norm threshold; `None` or 0: no
            clipping. Default: `5.0`.
        jit_compile: Boolean, (default `True`), whether to compile the train step with XLA
            (works on CPU for these layers; Keras disables it by itself where a layer, e.g.
            cuDNN LSTM, does not support it).
        perplexity: Boolean, (default `True`), whether to add the `Perplexity` metric.
        optimizer: String or `keras.optimizers.Optimizer`: `"adam"` (also for `None`),
            `"sgd"` (see `make_optimizer`) or an optimizer instance (then ``learning_rate``
            and ``clip_norm`` are ignored). Default: `"adam"`.
        loss_reduction: String, `"token_mean"` or `"sum_over_time"` (see
            `SequenceCrossentropy`). Default: `"token_mean"`.

    Returns:
        The model, compiled.

    Example:

    >>> import numpy as np
    >>> model = build_language_model(20, hidden=8, embedding_dim=8, batch_size=2, seq_len=4)
    >>> model = compile_language_model(model, jit_compile=False)
    >>> x = np.ones((2, 4), "int32")
    >>> logs = model.fit(x, x, verbose=0).history
    >>> sorted(logs)
    ['loss', 'perplexity']
    """
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        optimizer = make_optimizer(optimizer or "adam", learning_rate, clip_norm)
    model.compile(
        optimizer=optimizer,
        loss=SequenceCrossentropy(loss_reduction),
        weighted_metrics=[Perplexity()] if perplexity else None,
        jit_compile=jit_compile,
    )
    return model
