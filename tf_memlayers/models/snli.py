"""The SNLI model of Weissenborn (2016, §5): conditional encoding with shared weights.

Embeddings → (dropout) → an encoder of the sentence pair (`ConditionalEncoder`: the paper's
stacks the AM-GRU and Dual AM-GRU of `tf_memlayers.layers.DualAssociativeEncoder`, then a GRU
whose hypothesis pass starts from the premise's final state) → features ``[p, h, |p - h|]`` →
two ReLU layers → 3-way softmax. The builder takes the encoder as a layer: the GRU and AM-GRU
rows of the paper's Table 1, or any other pair encoder, need no edit of it.
"""

import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_int,
    check_keras_object,
    check_number,
    check_optional_int,
    errors_named,
    removed_arguments,
)
from tf_memlayers.initializers import GRUGateBias
from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES
from tf_memlayers.layers.associative_memory.dual_associative_encoder import DualAssociativeEncoder
from tf_memlayers.layers.conditional_encoder import ConditionalEncoder
from tf_memlayers.layers.philox_dropout import PhiloxDropout
from tf_memlayers.models._compiling import backend_jit_compile, compile_and_build_optimizer

# The width of the paper's encoder: its Dual AM-GRU and the GRU over it (Weissenborn 2016, §5).
PAPER_UNITS = 100

__all__ = [
    "build_fixed_length_snli_model",
    "build_snli_model",
    "compile_snli_model",
]


@removed_arguments(
    "build_snli_model",
    init_scale="pass kernel_initializer=keras.initializers.RandomUniform(-scale, scale)",
    **dict.fromkeys(
        "kind units top_units num_copies dual_key fused_loop".split(),
        "it is an argument of the encoder's layers: pass the encoder as `encoder`, e.g. "
        "encoder=ConditionalEncoder([DualAssociativeEncoder(100, return_sequences=True), "
        "keras.layers.GRU(100, return_state=True)])",
    ),
)
@errors_named("build_snli_model")
def build_snli_model(
    vocabulary_size,
    encoder=None,
    embedding_dim=300,
    embeddings=None,
    train_embeddings=True,
    dropout=0.1,
    classifier_units=None,
    seed=123,
    kernel_initializer=None,
    name="snli",
):
    """The paper's SNLI classifier as a functional `keras.Model`.

    Args:
        vocabulary_size: Integer >= 2, the number of word ids (id 0 = padding, masked).
        encoder: Optional layer that encodes the embedded pair: called on ``[premise,
            hypothesis]`` word vectors (``[batch, T, embedding_dim]``, with their masks), it
            returns ``[p, h]``, two vectors ``[batch, units]``; usually a
            `ConditionalEncoder`. Default: `None`, the paper's encoder:
            ``ConditionalEncoder([DualAssociativeEncoder(100, num_copies=8,
            return_sequences=True), keras.layers.GRU(100, reset_after=False,
            bias_initializer=GRUGateBias(1.0), return_state=True)])`` (the original code's
            GRU: `tf_memlayers.initializers.GRUGateBias`) with every kernel drawn from the
            builder's initializer and the permutations from ``seed``.
        embedding_dim: Positive integer, the word vector size (ignored when ``embeddings``
            is given). Default: `300`.
        embeddings: Optional array ``[vocabulary_size, dim]``, the initial embedding matrix
            (e.g. GloVe). Default: `None` (word vectors drawn from N(0, 1), as in the
            original code).
        train_embeddings: Boolean, (default `True`), whether the embeddings are tuned.
        dropout: Float in [0, 1), the dropout rate on the word vectors. Default: `0.1` (the
            paper's).
        classifier_units: Optional positive integer, the size of the two ReLU layers.
            Default: `None` (the width of the encoder's outputs).
        seed: Integer, the seed of the word vectors, the dropout and the default
            ``kernel_initializer`` (and of the default encoder's permutations). Default:
            `123`.
        kernel_initializer: Optional initializer of the classifier's kernels (and of the
            default encoder's). Pass the one your encoder's layers draw from, seeded by a
            `keras.random.SeedGenerator` (each draw advances it), so that no two kernels start
            alike. Default: `None`, uniform in ±0.05 (the paper's) from a generator seeded by
            ``seed``.
        name: String, the model's name. Default: `"snli"`.

    Returns:
        A model with inputs ``(premise ids, hypothesis ids)`` (int, ``[batch, time]``) and a
        softmax over (entailment, neutral, contradiction). Layers are named ``"embedding"``,
        ``"word_dropout"`` and ``"encoder"`` (``encoder``, renamed).

    Raises:
        TypeError: If an argument has the wrong type; the message names it.
        ValueError: If an argument is out of range (sizes >= 1, ``0 <= dropout < 1``) or the
            encoder does not return two vectors; the message names it.

    Example:

    The GRU row of the paper's Table 1 (126 units, scaled down here):

    >>> import keras
    >>> from tf_memlayers import ConditionalEncoder
    >>> from tf_memlayers.models import build_snli_model
    >>> gru = ConditionalEncoder([
    ...     keras.layers.GRU(6, return_sequences=True, return_state=True),
    ...     keras.layers.GRU(6, return_state=True),
    ... ])
    >>> model = build_snli_model(20, encoder=gru, embedding_dim=4)
    >>> model.output_shape
    (None, 3)
    """
    return _snli_model(
        vocabulary_size,
        encoder,
        embedding_dim,
        embeddings,
        train_embeddings,
        dropout,
        classifier_units,
        seed,
        kernel_initializer,
        name,
    )


@errors_named("paper_encoder")
def paper_encoder(seed, kernel_initializer, units=PAPER_UNITS, num_copies=NUM_COPIES):
    """The paper's encoder: `DualAssociativeEncoder` (``units``, ``num_copies``, permutations
    from ``seed``), then a GRU of ``units`` as the original code's (TensorFlow 0.8's
    ``GRUCell``: the reset gate applied before the product, gate biases starting at 1), every
    kernel from ``kernel_initializer``."""
    return ConditionalEncoder(
        [
            DualAssociativeEncoder(
                units,
                num_copies=num_copies,
                seed=seed,
                kernel_initializer=kernel_initializer,
                return_sequences=True,
            ),
            keras.layers.GRU(
                units,
                kernel_initializer=kernel_initializer,
                recurrent_initializer=kernel_initializer,
                reset_after=False,
                bias_initializer=GRUGateBias(1.0),
                return_state=True,
            ),
        ]
    )


def _snli_model(
    vocabulary_size,
    encoder,
    embedding_dim,
    embeddings,
    train_embeddings,
    dropout,
    classifier_units,
    seed,
    kernel_initializer,
    name,
    premise_length=None,
    hypothesis_length=None,
    batch_size=None,
):
    """`build_snli_model`, with the input shapes as options."""
    vocabulary_size = check_int("vocabulary_size", vocabulary_size, 2)
    check_bool("train_embeddings", train_embeddings)
    seed = check_int("seed", seed, 0)
    dropout = check_number("dropout", dropout, 0.0, 1.0)
    classifier_units = check_optional_int("classifier_units", classifier_units, 1)
    if encoder is not None and not isinstance(encoder, keras.layers.Layer):
        raise TypeError(
            f"`encoder` must be a Keras layer (such as a ConditionalEncoder) or None; got "
            f"{encoder!r} of type {type(encoder).__name__}."
        )
    if kernel_initializer is None:
        # Seeded by one generator that each draw advances: reproducible from ``seed``, and no
        # two weights start alike (an integer seed would give every weight the same stream).
        kernel_initializer = keras.initializers.RandomUniform(
            -0.05, 0.05, seed=keras.random.SeedGenerator(seed)
        )
    init = check_keras_object("kernel_initializer", kernel_initializer)
    if encoder is None:
        encoder = paper_encoder(seed, init)
    if embeddings is not None:
        embeddings = np.asarray(embeddings)
        if embeddings.ndim != 2 or embeddings.shape[0] != vocabulary_size or not embeddings.size:
            raise ValueError(
                f"`embeddings` must have shape ({vocabulary_size}, dim), dim >= 1; got "
                f"{embeddings.shape}."
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
    encoder.name = "encoder"
    p, h = _encode(encoder, drop(embed(premise)), drop(embed(hypothesis)))
    features = keras.layers.Concatenate(name="features")([p, h, ops.abs(p - h)])
    size = classifier_units or p.shape[-1]
    for i in range(2):
        features = keras.layers.Dense(size, "relu", kernel_initializer=init, name=f"relu_{i}")(
            features
        )
    probabilities = keras.layers.Dense(
        3, "softmax", kernel_initializer=init, dtype="float32", name="softmax"
    )(features)
    return keras.Model([premise, hypothesis], probabilities, name=name)


def _encode(encoder, premise, hypothesis):
    """``encoder``'s ``[p, h]`` for the embedded pair, checked to be two vectors."""
    outputs = encoder([premise, hypothesis])
    if (
        not isinstance(outputs, (list, tuple))
        or len(outputs) != 2
        or any(len(x.shape) != 2 for x in outputs)
    ):
        shapes = [tuple(x.shape) for x in keras.tree.flatten(outputs)]
        raise ValueError(
            f"`encoder` must return two vectors [p, h] of shape (batch, units); "
            f"{encoder.__class__.__name__} returned shapes {shapes} (the last recurrent layer "
            "of a ConditionalEncoder must not return sequences)."
        )
    return outputs


@errors_named("build_fixed_length_snli_model")
def build_fixed_length_snli_model(
    model, premise_length, hypothesis_length, batch_size=None, unroll=True, name=None
):
    """A copy of an SNLI classifier for fixed sentence lengths, for TFLite's built-in operators.

    The model of `build_snli_model` runs its recurrent layers as loops over sentences of any
    length; `tf.lite.TFLiteConverter` turns such loops into TensorFlow's list ops, which only
    an interpreter with the Flex delegate runs. This copy reads premises of exactly
    ``premise_length`` ids and hypotheses of exactly ``hypothesis_length`` ids (shorter
    sentences padded with id 0, which the embedding masks, as in training; longer ones must be
    cut, or a longer copy built) and runs the encoder's layers with Keras's loop
    (``fused_loop=False`` wherever a layer has the option), so that it converts with TFLite's
    built-in operators only
    (``converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]``) and gives
    ``model``'s probabilities. Two ways:

    * ``unroll=True`` (the default): every time loop unrolled, one block of operations per
      step; the batch size stays free. The graph, and the conversion time, grow with the
      lengths.
    * ``unroll=False`` with a fixed ``batch_size``: the loops stay loops, which TFLite runs as
      its built-in ``WHILE`` only when every shape in them is fixed, the batch size included;
      a smaller model that converts faster.

    Args:
        model: A `keras.Model` from `build_snli_model` (with any encoder, trained or not, or loaded
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
        same layers and copies of ``model``'s weights at the time of the call (quantized, and
        with LoRA weights, where ``model``'s are).

    Raises:
        ValueError: If ``model`` is not a model from `build_snli_model`, a length or the
            batch size is not a positive integer, or ``unroll=False`` comes without a
            ``batch_size``; the message names the argument.
        TypeError: If a length or the batch size is not an integer, or ``unroll`` is not a
            bool; the message names it.

    Example:

    >>> import numpy as np
    >>> import tensorflow as tf
    >>> import keras
    >>> from tf_memlayers import ConditionalEncoder
    >>> from tf_memlayers.models import build_fixed_length_snli_model, build_snli_model
    >>> gru = ConditionalEncoder([
    ...     keras.layers.GRU(4, return_sequences=True, return_state=True),
    ...     keras.layers.GRU(4, return_state=True),
    ... ])
    >>> model = build_snli_model(20, encoder=gru, embedding_dim=3)
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
    if not all(name in layers for name in ("embedding", "word_dropout", "encoder", "relu_0")):
        raise ValueError(
            f"{owner}: `model` must be a model from tf_memlayers.models.build_snli_model (layers "
            f"'embedding', 'word_dropout', 'encoder' and 'relu_0'); got {model!r}."
        )
    embedding, dropout = layers["embedding"], layers["word_dropout"]
    # The encoder's layers with their time loops unrolled, or in Keras's loop, wherever they
    # have the option: the loops TFLite's built-in operators run.
    fixed_encoder = keras.layers.deserialize(_fixed_loops(keras.layers.serialize(encoder), unroll))
    # Built under the encoder's dtype policy, so a mixed-precision model's copy computes as
    # it does.
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(encoder.dtype_policy)
    try:
        copy = _snli_model(
            embedding.input_dim,
            fixed_encoder,
            embedding.output_dim,
            None,
            embedding.trainable,
            dropout.rate,
            layers["relu_0"].units,
            dropout.seed,
            None,
            name or f"{model.name}_fixed",
            premise_length=premise_length,
            hypothesis_length=hypothesis_length,
            batch_size=batch_size,
        )
    finally:
        keras.config.set_dtype_policy(policy)
    # The encoder's config carries its layers' quantization and LoRA ranks; the layers around
    # it, built here, take the model's (`keras.Model.quantize`, ``enable_lora``).
    for layer in copy.layers:
        source = layers.get(layer.name)
        mode = getattr(getattr(source, "dtype_policy", None), "quantization_mode", None)
        if mode and not layer.dtype_policy.quantization_mode:
            layer.quantize(mode)
        if getattr(source, "lora_enabled", False) and not layer.lora_enabled:
            layer.enable_lora(source.lora_rank, lora_alpha=source.lora_alpha)
    for layer in copy.layers:
        _copy_weights(layers.get(layer.name), layer, owner)
    return copy


def _copy_weights(source, target, owner):
    """Assigns ``source``'s weights to ``target``'s: by name where each of a layer's weights
    has its own (a quantized layer loaded from a file orders them otherwise than one
    quantized in memory), else in order."""
    given, wanted = getattr(source, "weights", []), target.weights
    names = [weight.name for weight in wanted]
    by_name = {weight.name: weight for weight in given}
    if len(set(names)) == len(names) == len(by_name) and set(names) == set(by_name):
        given = [by_name[name] for name in names]
    if [tuple(w.shape) for w in given] != [tuple(w.shape) for w in wanted]:
        raise ValueError(
            f"{owner}: the weights of `model`'s layer {target.name!r} do not match its "
            "fixed-length copy's."
        )
    for weight, value in zip(wanted, given):
        # A copy of the values: on JAX the arrays themselves would be shared, and a compiled
        # call that donates one model's variables would delete the other's.
        weight.assign(keras.ops.convert_to_numpy(value))


def _fixed_loops(config, unroll):
    """A copy of the layer config ``config`` with ``unroll`` set, and the fused AM-GRU loop off,
    in every (nested) layer config that has these options."""
    if isinstance(config, list):
        return [_fixed_loops(item, unroll) for item in config]
    if not isinstance(config, dict):
        return config
    config = {key: _fixed_loops(value, unroll) for key, value in config.items()}
    if "fused_loop" in config:
        config["fused_loop"] = False
    if "fused_loop" in config or "unroll" in config:
        config["unroll"] = unroll
    return config


@errors_named("compile_snli_model")
def compile_snli_model(model, learning_rate=1e-3, clip_norm=5.0, jit_compile=None):
    """Compiles with the paper's optimiser: Adam(lr, beta_1=0), global-norm clipping.

    Args:
        model: A `keras.Model` from `build_snli_model`.
        learning_rate: Finite float > 0, Adam's learning rate. Default: `1e-3` (the
            paper's).
        clip_norm: Optional finite float >= 0, the global gradient-norm threshold; `None`
            or 0: no clipping. Default: `5.0` (the paper's).
        jit_compile: `None`, a boolean or `"auto"` (as in `keras.Model.compile`), whether to
            compile the train step: with XLA on TensorFlow and JAX, with `torch.compile` on
            torch. `None`: True on JAX (else Keras runs the step operation by operation),
            False on TensorFlow (a TensorFlow graph, which traces faster than XLA compiles)
            and on torch (eager). Default: `None`.

    Returns:
        ``model``, compiled with sparse categorical cross-entropy and accuracy, its optimizer
        built (so that TensorFlow traces the first training step once).

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers import ConditionalEncoder
    >>> from tf_memlayers.models import build_snli_model, compile_snli_model
    >>> gru = ConditionalEncoder([
    ...     keras.layers.GRU(4, return_sequences=True, return_state=True),
    ...     keras.layers.GRU(4, return_state=True),
    ... ])
    >>> model = compile_snli_model(build_snli_model(20, encoder=gru, embedding_dim=3))
    >>> pairs = [np.ones((2, 5), "int32"), np.ones((2, 3), "int32")]  # premise, hypothesis
    >>> history = model.fit(pairs, np.array([0, 2]), verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """
    learning_rate = check_number("learning_rate", learning_rate, 0.0, low_open=True)
    if clip_norm is not None:
        clip_norm = check_number("clip_norm", clip_norm, 0.0)
    jit_compile = backend_jit_compile(jit_compile, xla_on_tensorflow=False)
    optimizer = keras.optimizers.Adam(learning_rate, beta_1=0.0, global_clipnorm=clip_norm or None)
    return compile_and_build_optimizer(
        model,
        optimizer=optimizer,
        loss="sparse_categorical_crossentropy",
        # A metric object, not "accuracy": Keras makes its variables now rather than inside the
        # first trace of the train step, which TensorFlow would then trace a second time.
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
