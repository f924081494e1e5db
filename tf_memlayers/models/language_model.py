"""Word-level recurrent language models with a memory on top (Daniluk et al. 2017).

The model is ``embedding -> LSTM (x num_layers) -> memory -> softmax with bias``, where the memory
is a layer the caller makes and passes in (`build_language_model`'s ``memory``):

* none: the LSTM baseline;
* a sequence layer over the top LSTM's outputs (the parallel form), e.g.
  ``SlidingWindowAttention(window=5, mode="key_value", stateful=True)`` or
  ``NGramConcat(n=4, units=100, stateful=True)``;
* a function from the top `keras.layers.LSTMCell` to a memory cell wrapping it (the cell form),
  e.g. ``lambda cell: SlidingWindowAttentionCell(cell, window=5, mode="key_value")``, run by
  `keras.layers.RNN`.

Any layer or cell with the Keras layer protocol works: the builder dispatches on nothing.
Training defaults are those of Daniluk et al. (2017, §4.1): Adam with learning rate 1e-3,
mini-batches of 64, gradient clipping at global norm 5, forget-gate bias 1, all other
parameters U(-0.1, 0.1), truncated BPTT over 20 steps, states reset between documents. The
baselines of *Neural Language Models Explained* are options: dropout on the non-recurrent
connections (Zaremba et al. 2014), variational ("locked") dropout with one mask per sequence
(Gal & Ghahramani 2016) and tied input/output embeddings (Press & Wolf 2017).

Perplexity is exp(mean negative log-likelihood over all target tokens); with padding given
zero sample weights, the `Perplexity` metric computes exactly that over a whole split.
"""

import inspect
import types

import keras

from tf_memlayers._validation import (
    called_as,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_optional_int,
    errors_named,
    removed_arguments,
    renamed_arguments,
)
from tf_memlayers.initializers import ForgetGateBias
from tf_memlayers.layers import PhiloxDropout, ResettableRNN, TiedEmbedding, lstm_use_cudnn
from tf_memlayers.losses import LOSS_REDUCTIONS, SequenceCrossentropy  # noqa: F401  (re-exported)
from tf_memlayers.metrics import Perplexity
from tf_memlayers.models._compiling import backend_jit_compile, compile_and_build_optimizer

# The name of the `keras.layers.RNN` that runs a memory cell (the cell form).
MEMORY_RNN_NAME = "memory_rnn"

# Daniluk et al. (2017) §4.1: the defaults of the builder, of `compile_language_model` and of
# the examples' memories (the window of the attention, the order of the N-gram RNN); read-only.
DANILUK_DEFAULTS = types.MappingProxyType(
    {
        "learning_rate": 1e-3,
        "batch_size": 64,
        "clip_norm": 5.0,
        "forget_bias": 1.0,
        "init_scale": 0.1,
        "sequence_length": 20,
        "window": 5,
        "ngram": 4,
        "units": 300,
        "embedding_dim": 300,
    }
)


def _dropout(x, rate, variational, name):
    """Dropout on a ``[batch, time, features]`` tensor; variational = one mask per sequence."""
    if not rate:
        return x
    noise_shape = (None, 1, x.shape[-1]) if variational else None
    return PhiloxDropout(rate, noise_shape=noise_shape, name=name)(x)


def _lstm_options(units, init, forget_bias, recurrent_dropout, name):
    """The arguments the LSTM layer and the LSTM cell of the model share."""
    with called_as("build_language_model"):  # the initializer's check names the builder
        bias = ForgetGateBias(forget_bias)
    return dict(
        units=units,
        kernel_initializer=init,
        recurrent_initializer=init,
        bias_initializer=bias,
        unit_forget_bias=False,
        recurrent_dropout=recurrent_dropout,
        name=name,
    )


def _lstm_cell(units, init, forget_bias, recurrent_dropout, name):
    options = _lstm_options(units, init, forget_bias, recurrent_dropout, name)
    return keras.layers.LSTMCell(**options)


def _lstm(units, init, forget_bias, recurrent_dropout, stateful, name):
    options = _lstm_options(units, init, forget_bias, recurrent_dropout, name)
    use_cudnn = lstm_use_cudnn(stateful=stateful)
    return keras.layers.LSTM(
        return_sequences=True, stateful=stateful, use_cudnn=use_cudnn, **options
    )


def _is_cell(layer):
    return hasattr(layer, "state_size") and not isinstance(layer, keras.layers.RNN)


def _takes_reset(layer):
    return "reset" in inspect.signature(layer.call).parameters


def _check_memory(memory, stateful, resets):
    """``memory`` as ``(layer, None)`` (a sequence layer), ``(None, factory)`` (a function of
    the top LSTM cell) or ``(None, None)``; anything else is a `TypeError` naming it."""
    if memory is None:
        return None, None
    if isinstance(memory, keras.layers.Layer):
        if _is_cell(memory):
            raise TypeError(
                f"`memory` is the cell {memory.name!r} ({type(memory).__name__}); a memory "
                "cell wraps the top LSTM cell, which the builder makes: pass a function of "
                f"that cell, e.g. memory=lambda cell: {type(memory).__name__}(cell, ...)."
            )
        if getattr(memory, "stateful", stateful) != stateful:
            raise ValueError(
                f"`memory` ({memory.name!r}) has stateful={memory.stateful} but the model "
                f"has stateful={stateful}: the memory must carry across batches exactly when "
                "the LSTM states do. Make the layer with stateful=" + str(stateful) + "."
            )
        if resets and not _takes_reset(memory):
            raise ValueError(
                f"`resets=True` needs a memory that takes a `reset` call argument; "
                f"{memory.name!r} ({type(memory).__name__}) does not."
            )
        return memory, None
    if callable(memory):
        return None, memory
    raise TypeError(
        "`memory` must be None, a Keras layer over the top LSTM's outputs, or a function "
        f"from the top LSTM cell to a memory cell; got {memory!r}."
    )


_MEMORY_ARGUMENT = (
    "it is the memory layer's own argument: pass the layer as `memory`, e.g. "
    "memory=SlidingWindowAttention(window=5, mode='key_value', stateful=True)"
)


# Outermost, so that its warning names the caller's line.
@renamed_arguments("build_language_model", "0.4", layers="num_layers")
@removed_arguments(
    "build_language_model",
    hidden="the LSTMs' width is `units`",
    seq_len="it is `sequence_length`",
    **dict.fromkeys(
        "kind form window ngram sizes attention_units pad use_bias return_attention_scores".split(),
        _MEMORY_ARGUMENT,
    ),
)
@errors_named("build_language_model")
def build_language_model(
    vocabulary_size,
    memory=None,
    units=DANILUK_DEFAULTS["units"],
    embedding_dim=DANILUK_DEFAULTS["embedding_dim"],
    num_layers=1,
    dropout=0.0,
    variational_dropout=False,
    recurrent_dropout=0.0,
    tie_weights=False,
    batch_size=None,
    sequence_length=DANILUK_DEFAULTS["sequence_length"],
    stateful=True,
    init_scale=DANILUK_DEFAULTS["init_scale"],
    forget_bias=DANILUK_DEFAULTS["forget_bias"],
    resets=False,
    name=None,
):
    """Builds a word-level LSTM language model with an optional memory on top.

    ``tokens [batch, sequence_length] -> Embedding -> LSTM x num_layers -> memory -> logits``. The
    model outputs vocabulary logits ``[batch, sequence_length, vocabulary_size]`` (softmax with
    a bias; compile with `compile_language_model`). The defaults are those of Daniluk et al.
    (2017, §4.1), `DANILUK_DEFAULTS`: LSTMs of 300 units, 300-dimensional embeddings, segments
    of 20 words, an initialisation scale of 0.1 and a forget-gate bias of 1.

    Args:
        vocabulary_size: Integer >= 2, the number of word ids.
        memory: What reads the top LSTM: `None` (the LSTM baseline); a Keras layer over the
            top LSTM's outputs ``[batch, sequence_length, units]`` (the parallel form, e.g.
            ``SlidingWindowAttention(window=5, mode="key_value", stateful=True)`` or
            ``NGramConcat(n=4, units=100, stateful=True)``), whose ``stateful`` must equal
            the model's; or a function from the top `keras.layers.LSTMCell` (made by the
            builder, with ``units`` units and the model's initializers) to a cell wrapping
            it (the cell form, e.g. ``lambda cell: SlidingWindowAttentionCell(cell,
            window=5)``), run by `keras.layers.RNN` named ``"memory_rnn"`` (by
            `ResettableRNN`, a subclass of it, with ``resets`` or ``recurrent_dropout``, whose
            masks it draws for the cell inside the wrapper). A layer that
            returns several outputs (``return_attention_scores=True``) adds the others to
            the model's outputs. Default: `None`.
        units: Positive integer, the units of every LSTM layer. Default: `300`.
        embedding_dim: Positive integer, the word embedding width. Default: `300`.
        num_layers: Positive integer, the number of stacked LSTM layers (keras-hub's name);
            the memory reads the top one. ``layers``, its name in 0.2, is taken with a
            `DeprecationWarning`. Default: `1`.
        dropout: Float in [0, 1), the dropout rate on the embeddings, between LSTM layers
            and before the softmax (Zaremba et al.'s non-recurrent dropout). Default: `0.0`.
        variational_dropout: Boolean, (default `False`), whether to use one dropout mask per
            sequence, shared by all time steps (Gal & Ghahramani's locked dropout), instead
            of a new mask per step.
        recurrent_dropout: Float in [0, 1), the dropout rate on the LSTMs' recurrent state
            (Keras's variational recurrent dropout, one mask per sequence). Default: `0.0`.
        tie_weights: Boolean, (default `False`), whether to use the input embedding,
            transposed, as the output layer (Press & Wolf, `TiedEmbedding`). What feeds the
            softmax (the memory's output, or the top LSTM's) must then be ``embedding_dim``
            wide.
        batch_size: Optional positive integer, the fixed batch size; required when
            ``stateful``. Default: `None`.
        sequence_length: Optional positive integer, the time steps per batch (the truncated-BPTT
            length), or `None` for a variable length (e.g. probe models). Default: `20`.
        stateful: Boolean, (default `True`), whether to carry the LSTM states and the memory
            from batch to batch (truncated BPTT); reset them with
            `tf_memlayers.callbacks.reset_language_model_states`.
        init_scale: Float > 0, the embedding, LSTM and softmax weights start U(-init_scale,
            init_scale) (the memory's are its own). Default: `0.1`.
        forget_bias: Float, the initial LSTM forget-gate bias (the other biases start at
            0). Default: `1.0`.
        resets: Boolean, (default `False`), whether the model takes a second input,
            ``reset`` (bool ``[batch, sequence_length]``, true where a new document starts), and
            starts each row's LSTM states and memory again there, inside the graph: for
            documents packed back to back in each row (as in the PTB example's batches
            with ``pack=True``). The inputs are then a dict ``{"tokens", "reset"}``, and the
            LSTM layers are `ResettableRNN` over a `keras.layers.LSTMCell` (the same
            weights, in the same order, as `keras.layers.LSTM`); a memory layer must take ``reset``.
        name: Optional string, the model name. Default: `None` (``"language_model"``).

    Returns:
        A `keras.Model` with the token ids as input and the logits (followed by the memory
        layer's other outputs, if it has any) as output; the logits in float32 under a
        mixed-precision policy (`keras.config.set_dtype_policy`), as Keras advises.

    Raises:
        TypeError: If an argument has the wrong type (``memory`` a cell instead of a function
            of the top LSTM cell, say); the message names it.
        ValueError: If an argument is out of range, or ``memory`` does not fit the model
            (another ``stateful``, no ``reset`` with ``resets=True``, an output without the
            time axis, a width other than ``embedding_dim`` with ``tie_weights=True``); the
            message names it.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import SlidingWindowAttention
    >>> from tf_memlayers.models import build_language_model
    >>> memory = SlidingWindowAttention(window=3, mode="key_value", stateful=True)
    >>> model = build_language_model(50, memory, units=16, embedding_dim=8, batch_size=2,
    ...                              sequence_length=5)
    >>> tuple(model(np.zeros((2, 5), "int32")).shape)
    (2, 5, 50)
    """
    vocabulary_size = check_int("vocabulary_size", vocabulary_size, 2)
    units = check_int("units", units, 1)
    embedding_dim = check_int("embedding_dim", embedding_dim, 1)
    num_layers = check_int("num_layers", num_layers, 1)
    for rate_name, rate in (("dropout", dropout), ("recurrent_dropout", recurrent_dropout)):
        check_number(rate_name, rate, 0.0, 1.0)
    sequence_length = check_optional_int("sequence_length", sequence_length, 1)
    batch_size = check_optional_int("batch_size", batch_size, 1)
    stateful = check_bool("stateful", stateful)
    variational_dropout = check_bool("variational_dropout", variational_dropout)
    init_scale = check_number("init_scale", init_scale, 0.0, low_open=True)
    resets = check_bool("resets", resets)
    tie_weights = check_bool("tie_weights", tie_weights)
    memory_layer, memory_cell = _check_memory(memory, stateful, resets)
    if stateful and batch_size is None:
        raise ValueError("`stateful=True` needs a fixed `batch_size`; got batch_size=None.")
    # One generator for every weight: each draw advances it, so no two weights start alike
    # (an integer seed would give every weight of a shape the same values).
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator()
    )

    tokens = keras.Input((sequence_length,), batch_size=batch_size, dtype="int32", name="tokens")
    reset = None
    if resets:
        reset = keras.Input((sequence_length,), batch_size=batch_size, dtype="bool", name="reset")
    starts = {} if reset is None else {"reset": reset}

    def lstm(name):
        if reset is None:
            return _lstm(units, init, forget_bias, recurrent_dropout, stateful, name)
        cell = _lstm_cell(units, init, forget_bias, recurrent_dropout, "lstm_cell")
        return ResettableRNN(cell, return_sequences=True, stateful=stateful, name=name)

    # The logits in float32 under a mixed-precision policy (float16 ones would feed the
    # softmax), in the policy's dtype otherwise.
    policy = keras.config.dtype_policy()
    logits_dtype = policy.variable_dtype if policy.compute_dtype != policy.variable_dtype else None
    options = dict(embeddings_initializer=init, name="embedding")
    if tie_weights:
        embedding = TiedEmbedding(
            vocabulary_size, embedding_dim, reverse_dtype=logits_dtype, **options
        )
    else:
        embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, **options)
    x = _dropout(embedding(tokens), dropout, variational_dropout, "embedding_dropout")
    for i in range(num_layers - 1):
        x = lstm(f"lstm_{i}")(x, **starts)
        x = _dropout(x, dropout, variational_dropout, f"lstm_{i}_dropout")
    top = f"lstm_{num_layers - 1}"
    extra_outputs = []
    if memory_cell is not None:
        cell = memory_cell(_lstm_cell(units, init, forget_bias, recurrent_dropout, top))
        if not _is_cell(cell):
            raise TypeError(
                "`memory` must return a Keras RNN cell (a layer with a `state_size`) from the "
                f"top LSTM cell; got {cell!r}."
            )
        # `keras.layers.RNN` draws no dropout masks for the LSTM cell inside the memory cell.
        plain = reset is None and not recurrent_dropout
        rnn_type = keras.layers.RNN if plain else ResettableRNN
        x = rnn_type(cell, return_sequences=True, stateful=stateful, name=MEMORY_RNN_NAME)(
            x, **starts
        )
    else:
        x = lstm(top)(x, **starts)
        if memory_layer is not None:
            x = memory_layer(x, **starts)
            if isinstance(x, (list, tuple)):
                x, *extra_outputs = x
            if len(x.shape) != 3:
                raise ValueError(
                    "`memory` must keep the time axis, [batch, sequence_length, features], for "
                    f"the logits of every step; {type(memory_layer).__name__} returned shape "
                    f"{x.shape}."
                )
    if tie_weights and x.shape[-1] != embedding_dim:
        raise ValueError(
            f"`tie_weights=True` needs the softmax input to be `embedding_dim` "
            f"({embedding_dim}) wide; the {'memory' if memory is not None else 'top LSTM'} "
            f"outputs {x.shape[-1]} features."
        )
    x = _dropout(x, dropout, variational_dropout, "output_dropout")
    if tie_weights:
        logits = embedding(x, reverse=True)
    else:
        logits = keras.layers.Dense(
            vocabulary_size, kernel_initializer=init, dtype=logits_dtype, name="softmax"
        )(x)
    outputs = [logits, *extra_outputs] if extra_outputs else logits
    inputs = tokens if reset is None else {"tokens": tokens, "reset": reset}
    return keras.Model(inputs, outputs, name=name or "language_model")


OPTIMIZERS = ("adam", "sgd")


@errors_named("make_optimizer")
def make_optimizer(
    optimizer="adam",
    learning_rate=DANILUK_DEFAULTS["learning_rate"],
    clip_norm=DANILUK_DEFAULTS["clip_norm"],
):
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


@errors_named("compile_language_model")
def compile_language_model(
    model,
    learning_rate=DANILUK_DEFAULTS["learning_rate"],
    clip_norm=DANILUK_DEFAULTS["clip_norm"],
    jit_compile=None,
    perplexity=True,
    optimizer="adam",
    loss_reduction="token_mean",
):
    """Compiles a language model: optimizer with global-norm clipping, cross-entropy.

    The `Perplexity` metric (weighted) reports the corpus perplexity whatever the loss
    reduction. A model with a memory's other outputs after the logits
    (``return_attention_scores=True``) is trained on the logits alone: the others get no loss
    and no metric, ``fit`` takes a target for each output, ``[targets, None]``, and Keras
    names the metric after the logits' output (``"softmax_perplexity"``).

    Args:
        model: A `keras.Model` from `build_language_model`.
        learning_rate: Float > 0, the initial learning rate. Default: `1e-3`.
        clip_norm: Optional float >= 0, the global gradient-norm threshold; `None` or 0: no
            clipping. Default: `5.0`.
        jit_compile: `None`, a boolean or `"auto"` (as in `keras.Model.compile`), whether
            to compile the train step: with XLA on TensorFlow and JAX (Keras leaves it off
            where a layer does not support it), with `torch.compile` on torch (minutes a model
            on a CPU). `None`: True on TensorFlow and JAX (XLA compiles these layers on CPU
            too, where Keras's `"auto"` would not), False on torch, Keras's default there.
            Default: `None`.
        perplexity: Boolean, (default `True`), whether to add the `Perplexity` metric.
        optimizer: String or `keras.optimizers.Optimizer`: `"adam"` (also for `None`),
            `"sgd"` (plain SGD without momentum, as Zaremba et al.; both clip the gradients'
            global norm at ``clip_norm``) or an optimizer instance (then ``learning_rate``
            and ``clip_norm`` are ignored). Default: `"adam"`.
        loss_reduction: String, `"token_mean"` or `"sum_over_time"` (see
            `SequenceCrossentropy`). Default: `"token_mean"`.

    Returns:
        The model, compiled, its optimizer built (so that TensorFlow traces the first
        training step once).

    Example:

    >>> import numpy as np
    >>> from tf_memlayers.models import build_language_model, compile_language_model
    >>> model = build_language_model(20, units=8, embedding_dim=8, batch_size=2, sequence_length=4)
    >>> model = compile_language_model(model, jit_compile=False)
    >>> x = np.ones((2, 4), "int32")
    >>> logs = model.fit(x, x, verbose=0).history
    >>> sorted(logs)
    ['loss', 'perplexity']
    """
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        optimizer = make_optimizer(
            "adam" if optimizer is None else optimizer, learning_rate, clip_norm
        )
    perplexity = check_bool("perplexity", perplexity)
    jit_compile = backend_jit_compile(jit_compile, xla_on_tensorflow=True)
    with called_as("compile_language_model"):  # the loss's check names this function
        loss = SequenceCrossentropy(loss_reduction=loss_reduction)
    metrics = [Perplexity()] if perplexity else None
    # A memory's other outputs (attention scores) are there to be watched, not fitted.
    others = len(getattr(model, "outputs", None) or [None]) - 1
    if others:
        loss, metrics = [loss] + [None] * others, [metrics] + [None] * others
    return compile_and_build_optimizer(
        model, optimizer=optimizer, loss=loss, weighted_metrics=metrics, jit_compile=jit_compile
    )
