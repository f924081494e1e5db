"""Gaffney's last-word prediction model: LSTM encoder, attention pooling, heap cache attention.

`build_fill_last_word_model` takes the pooling and the cache as layers, as
`build_language_model` takes its memory and `build_snli_model` its encoder. What it builds in
two ways (``faithful_to_code``), with the layers each way passes in:

==========================  ================================  ===================================
aspect                      paper (default)                   reference code (``True``)
==========================  ================================  ===================================
padding                     masked: the LSTM skips the        processed: the LSTM runs over all
                            leading padding steps             40 steps, padding included
attention pooling           ``softmax_t(v^T tanh(W^T h_t))``  plain sum over all 40 steps (the
                            weighted sum (``pooling=``        softmax was over a size-1 axis;
                            `AttentionPooling`)               ``pooling=`` a sum over time)
batch normalization         none                              frozen (inference-mode) batch norm
                                                              on the state and on the logits
empty cache slots           no attention weight (``cache=``   take part with logit 0
                            `HeapCacheAttention` with         (``mask_empty=False``)
                            ``mask_empty=True``)
output bias initializer     zeros                             Glorot uniform as a [1, V] matrix
optimizer                   Adam(lr 0.01), ``clipnorm=5``     Adam(lr 1e-3), no clipping
==========================  ================================  ===================================

Both use an L2 penalty ``1e-5 * sum ||w||^2 / 2`` over every trainable weight, and the cache
vector of an example is the state the cache read is added to (post batch norm in the code).
"""

import keras
import numpy as np

from tf_memlayers._validation import (
    called_as,
    check_bool,
    check_int,
    check_number,
    errors_named,
    removed_arguments,
    renamed_arguments,
)
from tf_memlayers.layers.frozen_batch_normalization import FrozenBatchNormalization
from tf_memlayers.layers.lstm_use_cudnn import lstm_use_cudnn
from tf_memlayers.models._compiling import backend_jit_compile, compile_and_build_optimizer
from tf_memlayers.models.heap_cache_model import HeapCacheModel

PAPER_LEARNING_RATE, CODE_LEARNING_RATE, PAPER_CLIP_NORM = 0.01, 1e-3, 5.0
# The width of the paper's attention pooling and cache reads (the reference code's too).
PAPER_ATTENTION_UNITS = 64


def _frozen_batch_norm(name):
    return FrozenBatchNormalization(epsilon=1e-3, name=name)


def _check_layer(name, layer):
    """``layer``, a Keras layer or `None`; anything else is a `TypeError` naming ``name``."""
    if layer is not None and not isinstance(layer, keras.layers.Layer):
        raise TypeError(
            f"`{name}` must be a Keras layer or None; got {layer!r} of type {type(layer).__name__}."
        )
    return layer


@removed_arguments(
    "build_fill_last_word_model",
    hidden_units="the LSTM's width is `units`",
    max_length="it is `sequence_length`",
    embedding_matrix="the word vectors are `embeddings`",
    **dict.fromkeys(
        "attention_units cache_size policy query mask_empty cache_gate_initializer".split(),
        "it is an argument of the layers given: pass pooling=AttentionPooling(64) and "
        "cache=HeapCacheAttention(cache_size, 64, ...)",
    ),
)
@errors_named("build_fill_last_word_model")
def build_fill_last_word_model(
    vocabulary_size,
    pooling=None,
    cache=None,
    *,
    sequence_length=40,
    embedding_dim=100,
    units=128,
    embeddings=None,
    weight_decay=1e-5,
    faithful_to_code=False,
    name="fill_last_word",
):
    """Builds the (uncompiled) last-word model; see the module docstring for the two modes.

    ``context ids [batch, sequence_length] -> Embedding -> LSTM -> pooling -> cache ->
    logits``, the LSTM's final state standing for the pooling when there is none.

    Args:
        vocabulary_size: Integer >= 2, the number of token ids (id 0 is padding).
        pooling: Optional Keras layer that pools the LSTM's outputs ``[batch,
            sequence_length, units]`` into one vector ``[batch, features]``: the paper's
            `AttentionPooling` (64 units), or, for the reference code, a sum over time.
            Renamed ``"pooling"``. Default: `None` (the LSTM's final state).
        cache: Optional Keras layer over that vector, usually a `HeapCacheAttention`
            (Gaffney's cache of ``cache_size`` earlier states, read with 64 attention units;
            ``mask_empty=False`` as in the reference code, ``gate_initializer="ones"`` for the
            dot read). Renamed ``"cache_attention"``. The model's training step writes a
            `HeapCacheAttention` (`HeapCacheModel`). Default: `None` (no cache).
        sequence_length: Positive integer, the context steps (40 in the paper). Default:
            `40`.
        embedding_dim: Positive integer, the word vector size (ignored with
            ``embeddings``). Default: `100`.
        units: Positive integer, the width of the LSTM, as ``units`` of
            `build_language_model`. Default: `128`.
        embeddings: Optional array ``[vocabulary_size, dim]``, the initial embeddings
            (GloVe), as ``embeddings`` of `build_snli_model`. Default: `None` (drawn from
            ``N(0, 0.9^2)`` as in the reference code).
        weight_decay: Finite number >= 0, the L2 coefficient (checked by `HeapCacheModel`).
            Default: `1e-5`.
        faithful_to_code: Boolean, reproduce the reference code instead of the paper (the
            table of the module docstring). Default: `False`.
        name: String, the model's name. Default: `"fill_last_word"`.

    Returns:
        A `HeapCacheModel` mapping ``[batch, sequence_length]`` int ids to ``[batch,
        vocabulary_size]`` float32 logits.

    Raises:
        TypeError: If an argument has the wrong type (``pooling`` or ``cache`` not a layer);
            the message names it.
        ValueError: If an argument is out of range (sizes >= 1, ``embeddings`` of another
            vocabulary), or ``pooling`` does not give one vector per example; the message
            names it.

    Example:

    >>> from tf_memlayers import AttentionPooling, HeapCacheAttention
    >>> from tf_memlayers.models import build_fill_last_word_model, compile_fill_last_word_model
    >>> model = build_fill_last_word_model(
    ...     50,
    ...     pooling=AttentionPooling(8),
    ...     cache=HeapCacheAttention(cache_size=32, attention_units=8),
    ...     embedding_dim=8,
    ...     units=16,
    ... )
    >>> model = compile_fill_last_word_model(model)
    >>> model.output_shape
    (None, 50)
    """
    vocabulary_size = check_int("vocabulary_size", vocabulary_size, 2)
    sequence_length = check_int("sequence_length", sequence_length, 1)
    units = check_int("units", units, 1)
    check_bool("faithful_to_code", faithful_to_code)
    pooling, cache = _check_layer("pooling", pooling), _check_layer("cache", cache)
    if embeddings is not None:
        embeddings = np.asarray(embeddings)
        if embeddings.ndim != 2 or embeddings.shape[0] != vocabulary_size or not embeddings.size:
            raise ValueError(
                f"`embeddings` must have shape ({vocabulary_size}, dim), dim >= 1; got "
                f"{embeddings.shape}."
            )
        embedding_dim = int(embeddings.shape[1])
    masked = not faithful_to_code

    tokens = keras.Input((sequence_length,), dtype="int32", name="context")
    embedding = keras.layers.Embedding(
        vocabulary_size,
        check_int("embedding_dim", embedding_dim, 1),
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.9),
        mask_zero=masked,
        name="embedding",
    )
    embedded = embedding(tokens)
    if embeddings is not None:
        embedding.set_weights([embeddings])
    # Keras's LSTM defaults are the reference's TF1 LSTMCell: Glorot kernels, forget bias 1.
    # cuDNN takes right-padded masks only, and these contexts are left-padded: with the mask,
    # a GPU runs Keras's own loop (and so it does in a dtype JAX's cuDNN LSTM cannot take).
    use_cudnn = lstm_use_cudnn()
    state = keras.layers.LSTM(
        units,
        return_sequences=pooling is not None,
        use_cudnn=False if masked else use_cudnn,
        name="encoder",
    )(embedded)
    if pooling is not None:
        pooling.name = "pooling"
        state = pooling(state)
        if len(state.shape) != 2:
            raise ValueError(
                f"`pooling` must pool the LSTM's outputs [batch, steps, units] into one vector "
                f"[batch, features]; {type(pooling).__name__} returned shape {state.shape}."
            )
    if faithful_to_code:
        state = _frozen_batch_norm("state_norm")(state)
    if cache is not None:
        cache.name = "cache_attention"
        state = cache(state)
    bias = "zeros"
    if faithful_to_code:
        # The code's bias is a [1, V] variable drawn Glorot-uniform, within sqrt(6 / (1 + V))
        # (Keras's Glorot of a vector [V] would draw within sqrt(3 / V)).
        limit = float(np.sqrt(6 / (1 + vocabulary_size)))
        bias = keras.initializers.RandomUniform(-limit, limit)
    logits = keras.layers.Dense(
        vocabulary_size,
        bias_initializer=bias,
        dtype="float32" if not faithful_to_code else None,
        name="logits",
    )(state)
    if faithful_to_code:
        logits = _frozen_batch_norm("logits_norm")(logits)
        logits = keras.layers.Activation("linear", dtype="float32", name="logits_float32")(logits)
    with called_as("build_fill_last_word_model"):  # its checks name the builder
        return HeapCacheModel(tokens, logits, weight_decay=weight_decay, name=name)


@renamed_arguments("fill_last_word_optimizer", "0.4", clip_norm="clipnorm")
@errors_named("fill_last_word_optimizer")
def fill_last_word_optimizer(faithful_to_code=False, learning_rate=None, clipnorm=None):
    """Adam as in the paper (lr 0.01, per-gradient norm clip 5) or the code (lr 1e-3, none).

    Args:
        faithful_to_code: the reference code's defaults instead of the paper's.
        learning_rate: a finite number > 0; default 0.01 (paper) or 1e-3 (code).
        clipnorm: each gradient's norm threshold (Keras's ``clipnorm``, not the global norm
            the other builders' ``clip_norm`` clips), a finite number >= 0 (0: no clipping);
            default 5 (paper) or none (code). ``clip_norm``, its name in 0.2, is taken with a
            `DeprecationWarning`.

    Returns:
        A `keras.optimizers.Adam`.
    """
    check_bool("faithful_to_code", faithful_to_code)
    if learning_rate is not None:
        learning_rate = check_number("learning_rate", learning_rate, 0.0, low_open=True)
    if clipnorm is not None:
        clipnorm = check_number("clipnorm", clipnorm, 0.0)
    if learning_rate is None:
        learning_rate = CODE_LEARNING_RATE if faithful_to_code else PAPER_LEARNING_RATE
    if clipnorm is None and not faithful_to_code:
        clipnorm = PAPER_CLIP_NORM
    return keras.optimizers.Adam(learning_rate, clipnorm=clipnorm or None)


@renamed_arguments("compile_fill_last_word_model", "0.4", clip_norm="clipnorm")
@errors_named("compile_fill_last_word_model")
def compile_fill_last_word_model(
    model, faithful_to_code=False, learning_rate=None, clipnorm=None, jit_compile=None
):
    """Compiles with sparse cross-entropy on logits and accuracy, and Adam as in the paper
    (learning rate 0.01, each gradient's norm clipped at 5) or as in the reference code
    (learning rate 1e-3, no clipping). The optimizer is built on the model's trainable
    weights, so that TensorFlow traces the first training step once.

    Args:
        model: A `keras.Model` from `build_fill_last_word_model`.
        faithful_to_code: Boolean, the reference code's optimizer defaults instead of the
            paper's. Default: `False`.
        learning_rate: Optional finite number > 0, Adam's learning rate. Default: `None`
            (0.01, the paper's; 1e-3 with ``faithful_to_code``).
        clipnorm: Optional finite number >= 0, the threshold of each gradient's norm (0: no
            clipping), as Keras's optimizers' ``clipnorm`` (`compile_language_model` and
            `compile_snli_model` clip the global norm, their ``clip_norm``). Default: `None`
            (5, the paper's; no clipping with ``faithful_to_code``). ``clip_norm``, its name
            in 0.2, is taken with a `DeprecationWarning`.
        jit_compile: `None`, a boolean or `"auto"` (as in `keras.Model.compile`), whether to
            compile the train step: with XLA on TensorFlow and JAX, with `torch.compile` on
            torch. `None`: True on JAX (else Keras runs the step operation by operation),
            False on TensorFlow (a TensorFlow graph, which traces faster than XLA compiles)
            and on torch (eager). Default: `None`.

    Returns:
        ``model``, compiled, its optimizer built.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers.models import build_fill_last_word_model, compile_fill_last_word_model
    >>> model = build_fill_last_word_model(30, sequence_length=6, embedding_dim=4, units=8)
    >>> model = compile_fill_last_word_model(model, learning_rate=1e-2)
    >>> history = model.fit(np.ones((4, 6), "int32"), np.zeros(4, "int32"), verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """
    jit_compile = backend_jit_compile(jit_compile, xla_on_tensorflow=False)
    return compile_and_build_optimizer(
        model,
        optimizer=fill_last_word_optimizer(faithful_to_code, learning_rate, clipnorm),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
