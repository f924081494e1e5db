"""`ConditionalEncoder`: conditional encoding of a sentence pair by a stack of layers.

Each layer of the stack reads the premise, then the hypothesis starting from the premise's
final state, with the same weights (Rocktäschel et al. 2016; Weissenborn 2016, §5). The
paper's SNLI model stacks `tf_memlayers.DualAssociativeEncoder` and a
`keras.layers.GRU`; `tf_memlayers.models.build_snli_model` puts the encoder between the word
vectors and the classifier.
"""

import keras
from keras import ops

from tf_memlayers._validation import (
    called_as,
    check_choice,
    check_pair,
    check_pair_masks,
    check_sentence_pair,
    later_calls_spec,
)
from tf_memlayers.layers.associative_memory.associative_gru import (
    AssociativeGRU,
    loaded_fused_loop,
)
from tf_memlayers.layers.associative_memory.dual_associative_encoder import (
    DualAssociativeEncoder,
    step_retrievals,
)
from tf_memlayers.layers.memory_cell_wrapper import RematerializedByPosition

_OWNER = "ConditionalEncoder"  # what its errors name


@keras.saving.register_keras_serializable(package="tf_memlayers")
class ConditionalEncoder(RematerializedByPosition, keras.layers.Layer):
    """Encodes a premise and a hypothesis with a stack of layers, each conditioning the
    hypothesis on the premise.

    Each layer of ``layers`` takes the premise and hypothesis sequences the layer before it
    gave (the first: the word vectors) and gives the next layer two sequences, the last
    layer two vectors (or sequences). A layer is one of:

    * a recurrent layer (a `keras.layers.RNN`, such as `keras.layers.GRU`,
      `keras.layers.LSTM` or `tf_memlayers.AssociativeGRU`, or a `keras.layers.Bidirectional`
      over one, built with ``return_state=True``): it reads the premise from its zero state,
      then the hypothesis from the premise's final states (each direction's), with the same
      weights;
    * a layer of a sentence pair (such as `tf_memlayers.DualAssociativeEncoder`):
      called on ``[premise, hypothesis]`` with both masks, it conditions the hypothesis on
      the premise itself and returns ``(premise output, hypothesis output, ...)``.

    Every layer but the last returns sequences (``return_sequences=True``). The encoder
    passes the masks on to every layer and owns the layers: a ``.keras`` file,
    `keras.models.clone_model` and ``from_config(get_config())`` rebuild the stack. A
    ``.keras`` file of tf-memlayers 0.1 or 0.2, which saved the encoder as the name of its
    first layer (``kind``) and its sizes, loads as the stack of those layers, with its weights.

    Args:
        layers: Non-empty list of Keras layers, as above.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: List ``[premise, hypothesis]`` of 3D tensors ``[batch, Tp, dim]`` and
            ``[batch, Th, dim]``.
        mask: Optional list ``[premise mask, hypothesis mask]`` of boolean tensors
            ``[batch, Tp]`` and ``[batch, Th]`` (set by a masking embedding). Default:
            `None`.
        training: Python boolean, passed to every layer. Default: `None`.

    Returns:
        ``[p, h]``: the last layer's outputs for the premise and the hypothesis (its final
        outputs ``[batch, units]``, or its output sequences if it returns sequences).

    Raises:
        TypeError: If ``layers`` is not a non-empty list of Keras layers; the message names
            the item.
        ValueError: If a recurrent layer does not return its state, or a layer before the
            last does not return sequences, or (when built) a layer that is not recurrent
            fails as a layer of a sentence pair; the message names the layer.

    Example:

    The paper's encoder (Weissenborn 2016, §5): the AM-GRU and Dual AM-GRU of conditional
    encoding, then a GRU.

    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers import DualAssociativeEncoder
    >>> from tf_memlayers import ConditionalEncoder
    >>> encoder = ConditionalEncoder([
    ...     DualAssociativeEncoder(8, num_copies=2, return_sequences=True),
    ...     keras.layers.GRU(8, return_state=True),
    ... ])
    >>> p, h = encoder([np.ones((2, 5, 4), "float32"), np.ones((2, 3, 4), "float32")])
    >>> tuple(p.shape), tuple(h.shape)
    ((2, 8), (2, 8))
    """

    def __init__(self, layers, **kwargs):
        super().__init__(**kwargs)
        owner = _OWNER
        if not isinstance(layers, (list, tuple)) or not layers:
            raise TypeError(
                f"{owner}: `layers` must be a non-empty list of Keras layers; got {layers!r}."
            )
        for i, layer in enumerate(layers):
            if not isinstance(layer, keras.layers.Layer):
                raise TypeError(
                    f"{owner}: `layers[{i}]` must be a Keras layer; got {layer!r} of type "
                    f"{type(layer).__name__}."
                )
            if _is_recurrent(layer) and not layer.return_state:
                raise ValueError(
                    f"{owner}: the recurrent layer `layers[{i}]` ({layer.name!r}) must be built "
                    "with return_state=True: the hypothesis pass starts from the premise's "
                    "final states."
                )
            if isinstance(layer, keras.layers.Bidirectional) and layer.merge_mode is None:
                raise ValueError(
                    f"{owner}: the Bidirectional layer `layers[{i}]` ({layer.name!r}) must "
                    "merge its two directions (merge_mode 'concat', 'sum', 'mul' or 'ave'): "
                    "with merge_mode=None it returns them apart."
                )
            if i < len(layers) - 1 and not getattr(layer, "return_sequences", True):
                raise ValueError(
                    f"{owner}: `layers[{i}]` ({layer.name!r}) must return sequences "
                    f"(return_sequences=True): layers[{i + 1}] reads them."
                )
        self.encoder_layers = list(layers)
        self.supports_masking = True

    @property
    def return_sequences(self):
        return bool(getattr(self.encoder_layers[-1], "return_sequences", False))

    def build(self, input_shape):
        # Checked here, so that errors name this layer, not one of its layers; a recurrent
        # first layer reads both sentences, which must then be as wide.
        same_width = _is_recurrent(self.encoder_layers[0])
        premise_shape, hypothesis_shape = check_sentence_pair(input_shape, _OWNER, same_width)
        self.input_spec = later_calls_spec([premise_shape, hypothesis_shape])
        with called_as(_OWNER):
            for index, layer in enumerate(self.encoder_layers):
                if _is_recurrent(layer):
                    # One deserialized with its build config (``clone_model``) is built already.
                    if not layer.built:
                        layer.build(premise_shape)
                    shapes = _output_shapes(layer, premise_shape, hypothesis_shape)
                else:
                    shapes = _pair_layer_shapes(index, layer, premise_shape, hypothesis_shape)
                premise_shape, hypothesis_shape = shapes

    def call(self, inputs, mask=None, training=None):
        premise, hypothesis = check_pair("inputs", inputs, _OWNER)
        masks = check_pair_masks(mask, inputs, _OWNER)
        for layer in self.encoder_layers:
            if _is_recurrent(layer):
                premise_out, *states = layer(premise, mask=masks[0], training=training)
                hypothesis_out, *_ = layer(
                    hypothesis, initial_state=states, mask=masks[1], training=training
                )
            else:
                premise_out, hypothesis_out, *_ = layer(
                    [premise, hypothesis], mask=masks, training=training
                )
            premise, hypothesis = premise_out, hypothesis_out
        # In the encoder's own compute dtype, as `keras.layers.Bidirectional` returns its
        # layers' outputs, whatever the dtype policies of the layers it holds.
        return [ops.cast(premise, self.compute_dtype), ops.cast(hypothesis, self.compute_dtype)]

    def compute_mask(self, inputs, mask=None):
        if mask is None or not self.return_sequences:
            return None
        return list(mask)

    def compute_output_shape(self, input_shape):
        pair = check_pair("inputs", input_shape, _OWNER, shapes=True)
        premise_shape, hypothesis_shape = (tuple(shape) for shape in pair)
        for layer in self.encoder_layers:
            premise_shape, hypothesis_shape = _output_shapes(layer, premise_shape, hypothesis_shape)
        return [premise_shape, hypothesis_shape]

    def memory_retrievals(self, premise, hypothesis):
        """What the first layer wrote to and read from its associative memory over ONE pair.

        The first layer reads the word vectors, so its memory is the one whose writes and
        reads line up with the words. A pair layer with a ``memory_retrievals`` method (the
        Dual AM-GRU's `tf_memlayers.DualAssociativeEncoder`) answers for itself; a
        recurrent layer whose cell reports retrievals (``call_with_retrievals``, as
        `tf_memlayers.AssociativeGRUCell` does) is stepped over the premise and then
        over the hypothesis from the premise's final states.

        Args:
            premise: Tensor or array ``[Tp, dim]``, the embedded premise.
            hypothesis: Tensor or array ``[Th, dim]``, the embedded hypothesis.

        Returns:
            Dict with ``"premise_written"`` ``[Tp, units]`` (the delta written at each
            premise step) and ``"hypothesis_read"`` ``[Th, units]`` (what each hypothesis step
            read: from the premise's memory for the Dual AM-GRU, from the memory it continues
            for the AM-GRU), float64; empty when the first layer has no such memory.
        """
        layer = self.encoder_layers[0]
        if hasattr(layer, "memory_retrievals"):
            return layer.memory_retrievals(premise, hypothesis)
        cell = getattr(layer, "cell", None)
        if not (_is_recurrent(layer) and hasattr(cell, "call_with_retrievals")):
            return {}
        if not layer.built:
            layer.build((None, None, keras.ops.shape(premise)[-1]))
        # Stepped outside `__call__`, so nothing autocasts the variables: under a mixed
        # precision policy the probe runs in the variables' dtype.
        return step_retrievals(cell, cell, premise, hypothesis, layer.variable_dtype, list, "read")

    def premise_attention(self, premise, hypothesis):
        """Where the first layer's attention over the premise looks, over ONE pair: a pair
        layer with a ``premise_attention`` method (`ConditionalAttentionEncoder`) answers.

        Args:
            premise: Tensor or array ``[Tp, dim]``, the embedded premise.
            hypothesis: Tensor or array ``[Th, dim]``, the embedded hypothesis.

        Returns:
            float64 NumPy array ``[Th, Tp]``, each hypothesis word's weights over the
            premise's words; `None` when the first layer does not attend over the premise.
        """
        layer = self.encoder_layers[0]
        if not hasattr(layer, "premise_attention"):
            return None
        return layer.premise_attention(premise, hypothesis)

    def get_config(self):
        config = super().get_config()
        config["layers"] = [keras.layers.serialize(layer) for layer in self.encoder_layers]
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "kind" in config:
            return _from_0_2_config(cls, config)
        # A hand-edited entry that is not a layer's config reaches `__init__`, which names it.
        if isinstance(config["layers"], (list, tuple)):
            deserialize = keras.layers.deserialize
            config["layers"] = [
                deserialize(x) if isinstance(x, dict) else x for x in config["layers"]
            ]
        return cls(**config)


def _is_recurrent(layer):
    # `keras.layers.Bidirectional` takes and returns both directions' states as an RNN does.
    return isinstance(layer, (keras.layers.RNN, keras.layers.Bidirectional))


def _output_shapes(layer, premise_shape, hypothesis_shape):
    """The shapes of the premise and hypothesis outputs of ``layer`` in the stack."""
    if not _is_recurrent(layer):
        shapes = layer.compute_output_shape([premise_shape, hypothesis_shape])
        return tuple(shapes[0]), tuple(shapes[1])
    # A recurrent layer's output shape, followed by its states' shapes.
    return tuple(
        tuple(layer.compute_output_shape(shape)[0]) for shape in (premise_shape, hypothesis_shape)
    )


def _pair_layer_shapes(index, layer, premise_shape, hypothesis_shape):
    """Builds a layer of a sentence pair on the pair's shapes, and gives its outputs' shapes;
    a layer that is neither recurrent nor of a pair is refused, naming it."""
    pair = [premise_shape, hypothesis_shape]
    try:
        if not layer.built:
            layer.build(pair)
        shapes = layer.compute_output_shape(pair)
        if not (isinstance(shapes, (list, tuple)) and len(shapes) >= 2):
            raise ValueError(f"its output shape is {shapes!r}, not one per sentence")
        return tuple(shapes[0]), tuple(shapes[1])
    except (ValueError, TypeError) as error:
        # A layer's own errors that name it (or this encoder, as the package's layers do
        # inside it) say what is wrong.
        if str(error).startswith((f"{_OWNER}:", f"{type(layer).__name__}:")):
            raise
        raise ValueError(
            f"{_OWNER}: `layers[{index}]` ({layer.name!r}, a {type(layer).__name__}) is not a "
            "recurrent layer (a keras.layers.RNN, or keras.layers.Bidirectional over one), so "
            "it must be a layer of a sentence pair, called on [premise, hypothesis] (shapes "
            f"{pair}) and returning (premise output, hypothesis output, ...); it failed as one: "
            f"{error}"
        ) from error


def _from_0_2_config(cls, config):
    """The encoder of a config that tf-memlayers 0.1 or 0.2 saved, which names layer 1 by
    ``kind`` (``"gru"``, ``"am_gru"`` or ``"dual_am_gru"``) with its sizes, under a GRU of
    ``top_units`` over both sentences, every kernel from ``kernel_initializer``.

    Those versions' ``.keras`` files hold the weights of layer 1's cell (the Dual AM-GRU's
    holding the AM-GRU's) under the encoder's ``hypothesis_cell`` and the GRU's under its
    ``top_layer``: the encoder built here has both names too, and loading, which tries each
    path to a layer until one is in the file, finds the weights there."""
    kind, units, top_units, seed = (config.pop(k) for k in ("kind", "units", "top_units", "seed"))
    check_choice("kind", kind, ("gru", "am_gru", "dual_am_gru"), "ConditionalEncoder")
    num_copies, dual_key = config.pop("num_copies"), config.pop("dual_key")
    init = keras.initializers.get(config.pop("kernel_initializer"))
    # A GRU has no fused loop: kind="gru" saved "auto".
    fused_loop = loaded_fused_loop(config.pop("fused_loop"), "ConditionalEncoder")
    unroll = config.pop("unroll", False)  # 0.1 did not save it
    sublayer = dict(kernel_initializer=init, unroll=unroll, dtype=config.get("dtype"))
    associative = dict(num_copies=num_copies, seed=seed, fused_loop=fused_loop, **sublayer)
    if kind == "gru":
        first = keras.layers.GRU(
            units, recurrent_initializer=init, return_sequences=True, return_state=True, **sublayer
        )
        cell = first.cell
    elif kind == "am_gru":
        first = AssociativeGRU(units, return_sequences=True, return_state=True, **associative)
        cell = first.cell
    else:
        first = DualAssociativeEncoder(
            units, dual_key=dual_key, return_sequences=True, **associative
        )
        cell = first.hypothesis_layer.cell
    top = keras.layers.GRU(top_units, recurrent_initializer=init, return_state=True, **sublayer)
    encoder = cls([first, top], **config)
    encoder.hypothesis_cell, encoder.top_layer = cell, top
    return encoder
