"""The SNLI model of Weissenborn (2016, §5): conditional encoding with shared weights.

Embeddings → (dropout) → layer 1 over the premise, then over the hypothesis starting from the
premise's final state (GRU, AM-GRU, or AM-GRU + Dual AM-GRU reading the premise memory) →
layer 2, a GRU over the layer-1 outputs whose hypothesis pass starts from the premise's final
GRU state → features ``[p, h, |p - h|]`` → two ReLU layers → 3-way softmax.
"""


import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import check_bool, check_int, check_number
from tf_memlayers.layers.dropout import PhiloxDropout
from tf_memlayers.models.conditional_encoder import KINDS, ConditionalEncoder

__all__ = [
    "KINDS",
    "ConditionalEncoder",
    "build_fixed_length_snli_model",
    "build_snli_model",
    "compile_snli_model",
]


def build_snli_model(
    vocabulary_size,
    kind="dual_am_gru",
    units=100,
    top_units=None,
    embedding_dim=300,
    embeddings=None,
    train_embeddings=True,
    num_copies=8,
    dual_key="paper",
    dropout=0.1,
    seed=123,
    init_scale=0.05,
    fused_loop="auto",
):
    """The paper's SNLI classifier as a functional `keras.Model`.

    Args:
        vocabulary_size: Integer >= 2, the number of word ids (id 0 = padding, masked).
        kind: String, layer 1: `"gru"`, `"am_gru"` or `"dual_am_gru"`. Default:
            `"dual_am_gru"`.
        units: Positive integer, the layer-1 size (the paper: 100 for the Dual AM-GRU, 108
            AM-GRU, 126 GRU; even for the associative kinds). Default: `100`.
        top_units: Optional positive integer, the layer-2 GRU and classifier size.
            Default: `None` (``units``).
        embedding_dim: Positive integer, the word vector size (ignored when ``embeddings``
            is given). Default: `300`.
        embeddings: Optional array ``[vocabulary_size, dim]``, the initial embedding matrix
            (e.g. GloVe). Default: `None` (word vectors drawn from N(0, 1), as in the
            original code).
        train_embeddings: Boolean, (default `True`), whether the embeddings are tuned.
        num_copies: Positive integer, the number of memory copies. Default: `8` (the
            paper's).
        dual_key: String, the Dual AM-GRU's key mode, `"paper"` or `"released"`.
            Default: `"paper"`.
        dropout: Float in [0, 1), the dropout rate on the word vectors. Default: `0.1` (the
            paper's).
        seed: Integer, the seed of the initialisers, the dropout and the permutations.
            Default: `123`.
        init_scale: Finite float > 0; every kernel starts uniform in ``±init_scale``.
            Default: `0.05` (the paper's).
        fused_loop: `"auto"`, True or False, the `ConditionalEncoder` option (faster
            AM-GRU training on fixed-size batches). Default: `"auto"`.

    Returns:
        A model with inputs ``(premise ids, hypothesis ids)`` (int, ``[batch, time]``) and a
        softmax over (entailment, neutral, contradiction). Layers are named ``"embedding"``
        and ``"encoder"`` (a `ConditionalEncoder`).

    Raises:
        TypeError: If an argument has the wrong type; the message names it.
        ValueError: If an argument is out of range (sizes >= 1, ``0 <= dropout < 1``,
            finite ``init_scale > 0``); the message names it.
    """
    return _snli_model(
        vocabulary_size, kind, units, top_units, embedding_dim, embeddings, train_embeddings,
        num_copies, dual_key, dropout, seed, init_scale, fused_loop,
    )  # fmt: skip


def _snli_model(
    vocabulary_size, kind, units, top_units, embedding_dim, embeddings, train_embeddings,
    num_copies, dual_key, dropout, seed, init_scale, fused_loop,
    premise_length=None, hypothesis_length=None, batch_size=None, unroll=False, name=None,
):  # fmt: skip
    """`build_snli_model`, with the input shapes and the encoder's ``unroll`` as options."""
    # kind, units, top_units, num_copies, dual_key and fused_loop are the encoder's: it
    # checks them.
    vocabulary_size = check_int("vocabulary_size", vocabulary_size, 2)
    check_bool("train_embeddings", train_embeddings)
    seed = check_int("seed", seed)
    dropout = check_number("dropout", dropout, 0.0, 1.0)
    init_scale = check_number("init_scale", init_scale, 0.0, low_open=True)
    # Seeded by one generator that each draw advances: reproducible from ``seed``, and no two
    # weights start alike (an integer seed would give every weight the same stream).
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator(seed)
    )
    if embeddings is not None:
        embeddings = np.asarray(embeddings)
        if embeddings.ndim != 2 or embeddings.shape[0] != vocabulary_size:
            raise ValueError(
                f"`embeddings` must have shape ({vocabulary_size}, dim); got {embeddings.shape}."
            )
        embedding_dim = embeddings.shape[1]
        embedding_init = keras.initializers.Constant(embeddings)
    else:
        check_int("embedding_dim", embedding_dim, 1)
        # The original code draws every word vector from N(0, 1) before GloVe overwrites the
        # known words; ±0.05 word vectors would leave the whole network near zero.
        embedding_init = keras.initializers.RandomNormal(0.0, 1.0, seed=seed)
    premise = keras.Input((premise_length,), batch_size=batch_size, dtype="int32", name="premise")
    hypothesis = keras.Input(
        (hypothesis_length,), batch_size=batch_size, dtype="int32", name="hypothesis"
    )
    embed = keras.layers.Embedding(
        vocabulary_size,
        embedding_dim,
        embeddings_initializer=embedding_init,
        mask_zero=True,
        trainable=train_embeddings,
        name="embedding",
    )
    drop = PhiloxDropout(dropout, seed=seed, name="word_dropout")
    encoder = ConditionalEncoder(
        kind, units, top_units, num_copies, dual_key, seed, kernel_initializer=init,
        fused_loop=fused_loop, unroll=unroll, name="encoder",
    )
    p, h = encoder([drop(embed(premise)), drop(embed(hypothesis))])
    features = keras.layers.Concatenate(name="features")([p, h, ops.abs(p - h)])
    size = encoder.top_units
    for i in range(2):
        features = keras.layers.Dense(size, "relu", kernel_initializer=init, name=f"relu_{i}")(
            features
        )
    probabilities = keras.layers.Dense(
        3, "softmax", kernel_initializer=init, dtype="float32", name="softmax"
    )(features)
    return keras.Model([premise, hypothesis], probabilities, name=name or f"snli_{kind}")


def build_fixed_length_snli_model(
    model, premise_length, hypothesis_length, batch_size=None, unroll=True, name=None
):
    """A copy of an SNLI classifier for fixed sentence lengths, for TFLite's built-in operators.

    The model of `build_snli_model` runs its recurrent layers as loops over sentences of any
    length; `tf.lite.TFLiteConverter` turns such loops into TensorFlow's list ops, which only
    an interpreter with the Flex delegate runs. This copy reads premises of exactly
    ``premise_length`` ids and hypotheses of exactly ``hypothesis_length`` ids (shorter
    sentences padded with id 0, which the embedding masks, as in training; longer ones must be
    cut, or a longer copy built) and runs layer 1 with Keras's loop (``fused_loop=False``), so
    that it converts with TFLite's built-in operators only
    (``converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]``) and gives
    ``model``'s probabilities. Two ways:

    * ``unroll=True`` (the default): every time loop unrolled, one block of operations per
      step; the batch size stays free. The graph, and the conversion time, grow with the
      lengths.
    * ``unroll=False`` with a fixed ``batch_size``: the loops stay loops, which TFLite runs as
      its built-in ``WHILE`` only when every shape in them is fixed, the batch size included;
      a smaller model that converts faster.

    Args:
        model: A `keras.Model` from `build_snli_model` (of any kind, trained or not, or loaded
            from a ``.keras`` file).
        premise_length: Positive integer, the number of premise ids per row.
        hypothesis_length: Positive integer, the number of hypothesis ids per row.
        batch_size: Optional positive integer, a fixed number of rows; needed with
            ``unroll=False``. Default: `None` (any number of rows).
        unroll: Boolean, whether to unroll the time loops. Default: `True`.
        name: Optional string, the copy's name. Default: `None` (``"<model name>_fixed"``).

    Returns:
        A `keras.Model` with inputs ``premise`` int32 ``[batch, premise_length]`` and
        ``hypothesis`` int32 ``[batch, hypothesis_length]`` and ``model``'s output, with the
        same layers and copies of ``model``'s weights at the time of the call.

    Raises:
        ValueError: If ``model`` is not a model from `build_snli_model`, a length or the
            batch size is not a positive integer, or ``unroll=False`` comes without a
            ``batch_size``; the message names the argument.
        TypeError: If a length or the batch size is not an integer, or ``unroll`` is not a
            bool; the message names it.

    Example:

    >>> import numpy as np
    >>> import tensorflow as tf
    >>> model = build_snli_model(20, kind="gru", units=4, embedding_dim=3)
    >>> fixed = build_fixed_length_snli_model(model, premise_length=5, hypothesis_length=3)
    >>> premise = np.array([[3, 4, 5, 0, 0]])  # two padding ids
    >>> hypothesis = np.array([[6, 7, 0]])
    >>> bool(np.allclose(fixed([premise, hypothesis]), model([premise, hypothesis]), atol=1e-6))
    True
    >>> converter = tf.lite.TFLiteConverter.from_keras_model(fixed)
    >>> converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    >>> flatbuffer = converter.convert()  # doctest: +SKIP
    """
    owner = "build_fixed_length_snli_model"
    premise_length = check_int("premise_length", premise_length, 1, owner)
    hypothesis_length = check_int("hypothesis_length", hypothesis_length, 1, owner)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1, owner)
    unroll = check_bool("unroll", unroll, owner)
    if not unroll and batch_size is None:
        raise ValueError(
            f"{owner}: `unroll=False` needs a fixed `batch_size`: TFLite runs the time loops "
            "with its built-in WHILE only when every shape in them is fixed, the batch size "
            "included. Give batch_size=..., or unroll=True (the batch size then stays free)."
        )
    layers = {layer.name: layer for layer in getattr(model, "layers", [])}
    encoder = layers.get("encoder")
    if not (isinstance(encoder, ConditionalEncoder) and "embedding" in layers
            and "word_dropout" in layers):  # fmt: skip
        raise ValueError(
            f"{owner}: `model` must be a model from tf_memlayers.models.build_snli_model (layers "
            f"'embedding', 'word_dropout' and 'encoder', a ConditionalEncoder); got {model!r}."
        )
    embedding, config = layers["embedding"], encoder.get_config()
    # Built under the encoder's dtype policy, so a mixed-precision model's copy computes as
    # it does.
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(encoder.dtype_policy)
    try:
        copy = _snli_model(
            embedding.input_dim, config["kind"], config["units"], config["top_units"],
            embedding.output_dim, None, embedding.trainable, config["num_copies"],
            config["dual_key"], layers["word_dropout"].rate, config["seed"], 0.05,
            fused_loop=False, premise_length=premise_length,
            hypothesis_length=hypothesis_length, batch_size=batch_size, unroll=unroll,
            name=name or f"{model.name}_fixed",
        )  # fmt: skip
    finally:
        keras.config.set_dtype_policy(policy)
    weights = model.get_weights()
    if [w.shape for w in weights] != [tuple(w.shape) for w in copy.weights]:
        raise ValueError(f"{owner}: the weights of `model` do not match its fixed-length copy.")
    copy.set_weights(weights)
    return copy


def compile_snli_model(model, learning_rate=1e-3, clip_norm=5.0, jit_compile=False):
    """Compiles with the paper's optimiser: Adam(lr, beta_1=0), global-norm clipping.

    Args:
        model: A `keras.Model` from `build_snli_model`.
        learning_rate: Finite float > 0, Adam's learning rate. Default: `1e-3` (the
            paper's).
        clip_norm: Optional finite float >= 0, the global gradient-norm threshold; `None`
            or 0: no clipping. Default: `5.0` (the paper's).
        jit_compile: Boolean, (default `False`), whether to compile the train step with XLA.

    Returns:
        ``model``, compiled with sparse categorical cross-entropy and accuracy.
    """
    learning_rate = check_number("learning_rate", learning_rate, 0.0, low_open=True)
    if clip_norm is not None:
        clip_norm = check_number("clip_norm", clip_norm, 0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate, beta_1=0.0, global_clipnorm=clip_norm),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model
