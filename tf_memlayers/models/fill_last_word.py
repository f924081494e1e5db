"""Gaffney's last-word prediction model: LSTM encoder, attention pooling, heap cache attention.

Two behaviours, side by side (``faithful_to_code``):

==========================  ================================  ===================================
aspect                      paper (default)                   reference code (``True``)
==========================  ================================  ===================================
padding                     masked: the LSTM skips the        processed: the LSTM runs over all
                            leading padding steps             40 steps, padding included
attention pooling           ``softmax_t(v^T tanh(W^T h_t))``  plain sum over all 40 steps (the
                            weighted sum (`AttentionPooling`) softmax was over a size-1 axis)
batch normalization         none                              frozen (inference-mode) batch norm
                                                              on the state and on the logits
empty cache slots           no attention weight               take part with logit 0
output bias initializer     zeros                             Glorot uniform
optimizer                   Adam(lr 0.01), clip norm 5        Adam(lr 1e-3), no clipping
==========================  ================================  ===================================

Both use an L2 penalty ``1e-5 * sum ||w||^2 / 2`` over every trainable weight, and the cache
vector of an example is the state the cache read is added to (post batch norm in the code).
"""

import numbers
import warnings

import keras
import numpy as np

from tf_memlayers._validation import (
    check_bool,
    check_bool_or_auto,
    check_choice,
    check_int,
    check_number,
)
from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.layers.frozen_batch_normalization import FrozenBatchNormalization
from tf_memlayers.layers.lstm_use_cudnn import lstm_use_cudnn
from tf_memlayers.models._compiling import compile_and_build_optimizer
from tf_memlayers.models.heap_cache_model import HeapCacheModel

POOLINGS = ("last", "attention")
PAPER_LEARNING_RATE, CODE_LEARNING_RATE, PAPER_CLIP_NORM = 0.01, 1e-3, 5.0


def _frozen_batch_norm(name):
    return FrozenBatchNormalization(epsilon=1e-3, name=name)


def _is_zero(value):
    """Whether ``value`` is the integer 0 (not `False`, ``0.0`` or ``""``)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value == 0


def build_fill_last_word_model(
    vocabulary_size,
    *,
    max_length=40,
    embedding_dim=100,
    hidden=128,
    pooling="last",
    attention_units=64,
    cache_size=None,
    policy="heap",
    query="none",
    mask_empty=None,
    cache_gate_initializer=None,
    embeddings=None,
    weight_decay=1e-5,
    faithful_to_code=False,
    name="fill_last_word",
    hidden_units=None,
    embedding_matrix=None,
):
    """Builds the (uncompiled) last-word model; see the module docstring for the two modes.

    Args:
        vocabulary_size: number of token ids (id 0 is padding).
        max_length: context steps (40 in the paper).
        embedding_dim: word vector size (100 in the paper; ignored with ``embeddings``).
        hidden: width ``H`` of the LSTM (128), as ``hidden`` of `build_language_model`.
        pooling: ``"last"`` (the final LSTM state) or ``"attention"``.
        attention_units: width ``A`` of both attentions (64).
        cache_size: number of cached states ``K``; ``None`` or 0 for no cache. A cache needs
            the TensorFlow backend (`HeapCacheModel` writes it in TensorFlow's training step):
            on another backend the model is refused with a `ValueError`.
        policy: `HeapCacheAttention` write rule, ``"heap"`` (default) or ``"topk"``.
        query: `HeapCacheAttention` read: ``"none"`` (default, the paper), ``"additive"`` or
            ``"dot"`` (the read that can find one specific earlier example).
        mask_empty: `HeapCacheAttention` option; default ``not faithful_to_code``.
        cache_gate_initializer: initializer of the cache read's gate ``z``; default ones with
            ``query="dot"`` (the read enters the state at full strength, along the state's own
            directions, so that the output layer reads a recalled state as it reads the
            example's own), else Glorot uniform as in the reference code.
        embeddings: optional initial embeddings ``[vocabulary_size, dim]`` (GloVe), as
            ``embeddings`` of `build_snli_model`; otherwise ``N(0, 0.9^2)`` as in the
            reference code.
        weight_decay: L2 coefficient (``1e-5``).
        faithful_to_code: reproduce the reference code instead of the paper.
        name: model name.
        hidden_units: deprecated spelling of ``hidden`` (a `DeprecationWarning`); giving both
            with different values is a `TypeError`.
        embedding_matrix: deprecated spelling of ``embeddings`` (a `DeprecationWarning`);
            giving both is a `TypeError`.

    Returns:
        A `HeapCacheModel` mapping ``[batch, max_length]`` int ids to ``[batch, vocabulary]``
        float32 logits.

    Raises:
        TypeError, ValueError: an argument has the wrong type or is out of range (sizes
            >= 1); the message names it. ``attention_units``, a ``cache_size`` other than
            `None` or 0 and ``weight_decay`` (finite, >= 0) are checked by the classes that
            take them (`AttentionPooling`, `HeapCacheAttention`, `HeapCacheModel`).

    Example:

    >>> model = build_fill_last_word_model(50, embedding_dim=8, hidden=16,
    ...                                    pooling="attention", cache_size=32)
    >>> compile_fill_last_word_model(model)
    >>> model.output_shape
    (None, 50)
    """
    vocabulary_size = check_int("vocabulary_size", vocabulary_size, 2)
    max_length = check_int("max_length", max_length, 1)
    if hidden_units is not None:
        warnings.warn(
            "build_fill_last_word_model: `hidden_units` is deprecated; use `hidden`, the LSTM "
            "width.",
            DeprecationWarning,
            stacklevel=2,
        )
        if hidden not in (128, hidden_units):
            raise TypeError(
                f"build_fill_last_word_model: give the LSTM width once, as `hidden`; got "
                f"hidden={hidden!r} and hidden_units={hidden_units!r}."
            )
        hidden = check_int("hidden_units", hidden_units, 1)
    hidden = check_int("hidden", hidden, 1)
    check_choice("pooling", pooling, POOLINGS)
    check_bool("faithful_to_code", faithful_to_code)
    if embedding_matrix is not None:
        warnings.warn(
            "build_fill_last_word_model: `embedding_matrix` is deprecated; use `embeddings`, "
            "as in build_snli_model.",
            DeprecationWarning,
            stacklevel=2,
        )
        if embeddings is not None:
            raise TypeError(
                "build_fill_last_word_model: give the initial embeddings once, as "
                "`embeddings`; got both `embeddings` and `embedding_matrix`."
            )
        embeddings = embedding_matrix
    if embeddings is not None:
        embeddings = np.asarray(embeddings)
        if embeddings.ndim != 2 or embeddings.shape[0] != vocabulary_size:
            raise ValueError(
                f"`embeddings` must have shape ({vocabulary_size}, dim); got {embeddings.shape}."
            )
    if mask_empty is None:
        mask_empty = not faithful_to_code
    if cache_gate_initializer is None:
        cache_gate_initializer = "ones" if query == "dot" else "glorot_uniform"
    masked = not faithful_to_code

    tokens = keras.Input((max_length,), dtype="int32", name="context")
    if embeddings is not None:
        embedding_dim = int(embeddings.shape[1])
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
    sequences = keras.layers.LSTM(
        hidden,
        return_sequences=pooling == "attention",
        use_cudnn=False if masked else use_cudnn,
        name="encoder",
    )(embedded)
    if pooling == "last":
        state = sequences
    elif faithful_to_code:
        state = keras.layers.GlobalAveragePooling1D(name="time_mean")(sequences)
        state = keras.layers.Rescaling(float(max_length), name="time_sum")(state)
    else:
        state = AttentionPooling(attention_units, name="attention_pooling")(sequences)
    if faithful_to_code:
        state = _frozen_batch_norm("state_norm")(state)
    # None or 0: no cache; any other value is the layer's to check.
    if not (cache_size is None or _is_zero(cache_size)):
        state = HeapCacheAttention(
            cache_size,
            attention_units,
            policy=policy,
            query=query,
            mask_empty=mask_empty,
            gate_initializer=cache_gate_initializer,
            name="cache_attention",
        )(state)
    logits = keras.layers.Dense(
        vocabulary_size,
        bias_initializer="glorot_uniform" if faithful_to_code else "zeros",
        dtype="float32" if not faithful_to_code else None,
        name="logits",
    )(state)
    if faithful_to_code:
        logits = _frozen_batch_norm("logits_norm")(logits)
        logits = keras.layers.Activation("linear", dtype="float32", name="logits_float32")(logits)
    return HeapCacheModel(tokens, logits, weight_decay=weight_decay, name=name)


def fill_last_word_optimizer(faithful_to_code=False, learning_rate=None, clip_norm=None):
    """Adam as in the paper (lr 0.01, per-gradient norm clip 5) or the code (lr 1e-3, none).

    Args:
        faithful_to_code: the reference code's defaults instead of the paper's.
        learning_rate: a finite number > 0; default 0.01 (paper) or 1e-3 (code).
        clip_norm: per-gradient norm threshold, a finite number >= 0 (0: no clipping);
            default 5 (paper) or none (code).

    Returns:
        A `keras.optimizers.Adam`.
    """
    check_bool("faithful_to_code", faithful_to_code)
    if learning_rate is not None:
        learning_rate = check_number("learning_rate", learning_rate, 0.0, low_open=True)
    if clip_norm is not None:
        clip_norm = check_number("clip_norm", clip_norm, 0.0)
    if learning_rate is None:
        learning_rate = CODE_LEARNING_RATE if faithful_to_code else PAPER_LEARNING_RATE
    if clip_norm is None and not faithful_to_code:
        clip_norm = PAPER_CLIP_NORM
    return keras.optimizers.Adam(learning_rate, clipnorm=clip_norm or None)


def compile_fill_last_word_model(
    model, faithful_to_code=False, learning_rate=None, clip_norm=None, jit_compile=False
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
        clip_norm: Optional finite number >= 0, the threshold of each gradient's norm (0: no
            clipping). Default: `None` (5, the paper's; no clipping with
            ``faithful_to_code``).
        jit_compile: Boolean or `"auto"` (as in `keras.Model.compile`), whether to compile
            the train step with XLA. Default: `False`.

    Example:

    >>> import numpy as np
    >>> model = build_fill_last_word_model(30, max_length=6, embedding_dim=4, hidden=8)
    >>> compile_fill_last_word_model(model, learning_rate=1e-2)
    >>> history = model.fit(np.ones((4, 6), "int32"), np.zeros(4, "int32"), verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """
    jit_compile = check_bool_or_auto("jit_compile", jit_compile)
    compile_and_build_optimizer(
        model,
        optimizer=fill_last_word_optimizer(faithful_to_code, learning_rate, clip_norm),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
