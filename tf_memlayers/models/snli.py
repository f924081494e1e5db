"""The SNLI model of Weissenborn (2016, §5): conditional encoding with shared weights.

Embeddings → (dropout) → layer 1 over the premise, then over the hypothesis starting from the
premise's final state (GRU, AM-GRU, or AM-GRU + Dual AM-GRU reading the premise memory) →
layer 2, a GRU over the layer-1 outputs whose hypothesis pass starts from the premise's final
GRU state → features ``[p, h, |p - h|]`` → two ReLU layers → 3-way softmax.
"""


import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import check_bool, check_choice, check_int, check_number
from tf_memlayers.layers.associative_memory.am_gru import AssociativeGRU, check_fused_loop
from tf_memlayers.layers.associative_memory.dual_am_gru import DualAssociativeGRU
from tf_memlayers.layers.dropout import PhiloxDropout

KINDS = ("gru", "am_gru", "dual_am_gru")


@keras.saving.register_keras_serializable(package="tf_memlayers")
class ConditionalEncoder(keras.layers.Layer):
    """Encodes a premise and a hypothesis with shared weights (conditional encoding).

    Layer 1 (a `keras.layers.GRU` cell in `keras.layers.RNN`, or an `AssociativeGRU`) reads
    the premise from a zero state and then the hypothesis from the premise's final state, with
    the same weights. For ``kind="dual_am_gru"`` the hypothesis layer is a `DualAssociativeGRU`
    that shares every non-dual weight with the premise layer's cell, starts with an empty
    memory and the premise's last output, and reads the premise's final memory. Layer 2 is a
    `keras.layers.GRU` run over both layer-1 output sequences, the hypothesis pass starting
    from the premise's final state.

    Args:
        kind: String, layer 1: `"gru"`, `"am_gru"` or `"dual_am_gru"`. Default:
            `"dual_am_gru"`.
        units: Positive integer, the size of layer 1 (even for the associative kinds).
            Default: `100`.
        top_units: Optional positive integer, the size of the layer-2 GRU. Default: `None`
            (``units``).
        num_copies: Positive integer, the number of memory copies of the associative kinds.
            Default: `8`.
        dual_key: String, the key mode of the Dual AM-GRU: `"paper"` or `"released"`.
            Default: `"paper"`.
        seed: Integer, the seed of the memory permutations (and of the default kernel
            initializer). Default: `123`.
        kernel_initializer: Initializer for every kernel. Default: `None` (uniform ±0.05, as
            in the paper, seeded by ``seed``).
        fused_loop: `"auto"`, True or False, layer 1's ``fused_loop`` option
            (`AssociativeGRU`, `DualAssociativeGRU`): same results, faster training (XLA
            compiles once per batch shape). True is refused with ``kind="gru"``, which has
            no AM-GRU loop, and with ``unroll=True``. Default: `"auto"`.
        unroll: Boolean, unroll every time loop (layer 1 and layer 2) into one block of
            operations per step: the sentence lengths must then be fixed (known when the
            encoder is built). With ``fused_loop="auto"`` layer 1 then runs Keras's loop,
            unrolled. For fixed-length exports without loop ops (TFLite's built-in operators,
            see `build_fixed_length_snli_model`). Default: `False`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: List ``[premise, hypothesis]`` of 3D tensors ``[batch, Tp, dim]`` and
            ``[batch, Th, dim]``.
        mask: Optional list ``[premise mask, hypothesis mask]`` of boolean tensors
            ``[batch, Tp]`` and ``[batch, Th]`` (set by a masking embedding). Default:
            `None`.
        training: Python boolean, passed to the recurrent layers. Default: `None`.

    Returns:
        ``[p, h]``: the final layer-2 states of the premise and the hypothesis.

    Example:

    >>> import numpy as np
    >>> encoder = ConditionalEncoder("dual_am_gru", units=8, num_copies=2)
    >>> p, h = encoder([np.ones((2, 5, 4), "float32"), np.ones((2, 3, 4), "float32")])
    >>> p.shape, h.shape
    (TensorShape([2, 8]), TensorShape([2, 8]))
    """

    def __init__(
        self,
        kind="dual_am_gru",
        units=100,
        top_units=None,
        num_copies=8,
        dual_key="paper",
        seed=123,
        kernel_initializer=None,
        fused_loop="auto",
        unroll=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.kind = check_choice("kind", kind, KINDS, "ConditionalEncoder")
        self.unroll = check_bool("unroll", unroll, "ConditionalEncoder")
        if self.kind == "gru":  # else the AM-GRU layers own fused_loop and check it
            self.fused_loop = check_fused_loop(fused_loop, "ConditionalEncoder")
            if self.fused_loop is True:
                raise ValueError(
                    "ConditionalEncoder: `fused_loop=True` runs the AM-GRU loop; kind='gru' has "
                    "none (use kind='am_gru' or 'dual_am_gru')."
                )
        self.units = check_int("units", units, 1, "ConditionalEncoder")
        self.top_units = check_int(
            "top_units", self.units if top_units is None else top_units, 1, "ConditionalEncoder"
        )
        # Checked by the layers that take them (`AssociativeGRU`, `DualAssociativeGRU`).
        self.num_copies = num_copies
        self.dual_key = dual_key
        self.seed = check_int("seed", seed, None, "ConditionalEncoder")
        if kernel_initializer is None:
            kernel_initializer = keras.initializers.RandomUniform(-0.05, 0.05, seed=self.seed)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        init = self.kernel_initializer
        layer_options = dict(return_sequences=True, return_state=True, unroll=self.unroll)
        if self.kind == "gru":
            self.premise_cell = keras.layers.GRUCell(
                self.units, kernel_initializer=init, recurrent_initializer=init
            )
            self.premise_layer = keras.layers.RNN(self.premise_cell, **layer_options)
        else:
            self.premise_layer = AssociativeGRU(
                self.units,
                num_copies=self.num_copies,
                seed=self.seed,
                kernel_initializer=init,
                fused_loop=fused_loop,
                **layer_options,
            )
            self.premise_cell = self.premise_layer.cell
            self.fused_loop = self.premise_layer.fused_loop
        self.hypothesis_layer = self.premise_layer
        if self.kind == "dual_am_gru":
            self.hypothesis_layer = DualAssociativeGRU(
                self.units,
                num_copies=self.num_copies,
                dual_key=self.dual_key,
                seed=self.seed,
                premise_cell=self.premise_cell,
                kernel_initializer=init,
                fused_loop=fused_loop,
                **layer_options,
            )
        self.hypothesis_cell = self.hypothesis_layer.cell
        self.top_layer = keras.layers.GRU(
            self.top_units,
            kernel_initializer=init,
            recurrent_initializer=init,
            unroll=self.unroll,
        )
        self.supports_masking = True

    def build(self, input_shape):
        premise_shape, hypothesis_shape = input_shape
        self.premise_layer.build(premise_shape)
        if self.hypothesis_layer is not self.premise_layer:
            self.hypothesis_layer.build(hypothesis_shape)
        self.top_layer.build(tuple(premise_shape[:2]) + (self.units,))

    def _hypothesis_initial_state(self, premise_states):
        if self.kind == "dual_am_gru":
            memory, last_output = premise_states
            return [ops.zeros_like(memory), last_output, memory]
        return list(premise_states)

    def call(self, inputs, mask=None, training=None):
        premise, hypothesis = inputs
        premise_mask, hypothesis_mask = mask if mask is not None else (None, None)
        premise_seq, *premise_states = self.premise_layer(
            premise, mask=premise_mask, training=training
        )
        hypothesis_seq, *_ = self.hypothesis_layer(
            hypothesis,
            initial_state=self._hypothesis_initial_state(premise_states),
            mask=hypothesis_mask,
            training=training,
        )
        p = self.top_layer(premise_seq, mask=premise_mask, training=training)
        h = self.top_layer(hypothesis_seq, initial_state=p, mask=hypothesis_mask, training=training)
        return [p, h]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        batch = input_shape[0][0]
        return [(batch, self.top_units), (batch, self.top_units)]

    def memory_retrievals(self, premise, hypothesis):
        """Steps layer 1 over ONE unpadded pair and returns what was written and read.

        Args:
            premise: Tensor or array ``[Tp, dim]``, the embedded premise.
            hypothesis: Tensor or array ``[Th, dim]``, the embedded hypothesis.

        Returns:
            Dict with ``"premise_written"`` ``[Tp, units]`` (the delta written at each premise
            step) and ``"hypothesis_read"`` ``[Th, units]`` (for the Dual AM-GRU what was read
            from the premise memory, for the AM-GRU what was read from the memory it continues).
            Empty for ``kind="gru"``.
        """
        if self.kind == "gru":
            return {}
        # Stepped outside `__call__`, so nothing autocasts the variables: under a mixed
        # precision policy the probe runs in the variables' dtype.
        dtype = self.variable_dtype
        premise = ops.convert_to_tensor(premise, dtype=dtype)[None]
        hypothesis = ops.convert_to_tensor(hypothesis, dtype=dtype)[None]
        states = [ops.zeros((1, s), dtype=dtype) for s in self.premise_cell.state_size]
        written = []
        for t in range(premise.shape[1]):
            _, states, retrievals = self.premise_cell.call_with_retrievals(premise[:, t], states)
            written.append(retrievals["written"][0])
        states = self._hypothesis_initial_state(states)
        key = "source_read" if self.kind == "dual_am_gru" else "read"
        read = []
        for t in range(hypothesis.shape[1]):
            _, states, retrievals = self.hypothesis_cell.call_with_retrievals(
                hypothesis[:, t], states
            )
            read.append(retrievals[key][0])
        as_array = lambda rows: np.stack([ops.convert_to_numpy(r) for r in rows]).astype(np.float64)  # noqa: E731
        return {"premise_written": as_array(written), "hypothesis_read": as_array(read)}

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kind": self.kind,
                "units": self.units,
                "top_units": self.top_units,
                "num_copies": self.num_copies,
                "dual_key": self.dual_key,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "fused_loop": self.fused_loop,
                "unroll": self.unroll,
            }
        )
        return config


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
    init = keras.initializers.RandomUniform(-init_scale, init_scale, seed=seed)
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
