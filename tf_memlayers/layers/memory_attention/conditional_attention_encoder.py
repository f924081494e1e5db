"""`ConditionalAttentionEncoder`: conditional encoding with attention over the premise
(Rocktäschel et al. 2016, §2.3-2.4), the comparator of Weissenborn's (2016) Table 1."""

import keras
import numpy as np
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.layers.memory_attention.attention_rnn import AttentionRNN
from tf_memlayers.layers.memory_cell_wrapper import (
    RematerializedByPosition,
    flat_state_sizes,
)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class ConditionalAttentionEncoder(RematerializedByPosition, keras.layers.Layer):
    r"""Encodes a sentence pair: a recurrent layer reads the premise, and an `AttentionRNN`
    reads the hypothesis from the premise's final states, attending over the premise's
    outputs at every step.

    This is the LSTM with word-by-word attention of Rocktäschel et al. (2016), "LSTM-Attention"
    in Weissenborn's (2016) Table 1, when the premise layer is a `keras.layers.LSTM` and the
    hypothesis layer an `AttentionRNN` over a `tf_memlayers.WordByWordAttention` of a
    `keras.layers.LSTMCell`: the premise LSTM gives :math:`Y = [y_1 \dots y_L]` and its final
    states; the hypothesis LSTM (its own weights) starts from those states, with
    :math:`r_0 = 0`, and its last output is :math:`h^* = \tanh(W^p r_N + W^x h_N)`. Any other
    `AttentionWrapper` (Bahdanau's or Luong's attention) fits the same way.

    The two layers have their own weights (the paper's two LSTMs); the hypothesis cell's
    states must match the premise layer's (the same cell type and width). As a pair layer it
    goes into `tf_memlayers.ConditionalEncoder`, or straight into
    `tf_memlayers.models.build_snli_model` as the ``encoder``.

    Args:
        premise_layer: A `keras.layers.RNN` (such as `keras.layers.LSTM`) built with
            ``return_sequences=True`` and ``return_state=True``, reading forwards: its outputs
            are the memory, its final states start the hypothesis.
        hypothesis_layer: An `AttentionRNN`; its cell's ``memory_dim``, where set, must be the
            premise layer's output width.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: List ``[premise, hypothesis]`` of 3D tensors ``[batch, Tp, dim]`` and
            ``[batch, Th, dim]``.
        mask: Optional list ``[premise mask, hypothesis mask]`` of boolean tensors
            ``[batch, Tp]`` and ``[batch, Th]`` (padding at the end). The premise's mask is
            also the memory's: padding is never attended to, and ``p`` is the output at each
            premise's last word. Default: `None`.
        training: Python boolean, passed to both layers. Default: `None`.

    Returns:
        ``[p, h]``: the premise layer's final output ``[batch, units]`` and the hypothesis
        layer's output (:math:`h^*` for the word-by-word attention; every step's with its
        ``return_sequences=True``). A hypothesis cell built with
        ``return_attention_scores=True`` has its weights left out: `premise_attention` gives
        them, for one pair.

    Raises:
        TypeError: If a layer has the wrong type; the message names it.
        ValueError: If the premise layer does not return its sequences and states or runs
            backwards, the hypothesis cell has several ``mechanisms``, the premise's states do
            not match the hypothesis cell's, or its width is not the attention's
            ``memory_dim``; the message names the layers.

    Example:

    Rocktäschel et al.'s model (scaled down): an LSTM over the premise, an LSTM with
    word-by-word attention over the hypothesis.

    >>> import keras, numpy as np
    >>> from tf_memlayers import AttentionRNN, WordByWordAttention
    >>> from tf_memlayers import ConditionalAttentionEncoder
    >>> encoder = ConditionalAttentionEncoder(
    ...     keras.layers.LSTM(8, return_sequences=True, return_state=True),
    ...     AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(8))),
    ... )
    >>> p, h = encoder([np.ones((2, 5, 4), "float32"), np.ones((2, 3, 4), "float32")])
    >>> tuple(p.shape), tuple(h.shape)
    ((2, 8), (2, 8))
    """

    def __init__(self, premise_layer, hypothesis_layer, **kwargs):
        super().__init__(**kwargs)
        owner = type(self).__name__
        if not isinstance(premise_layer, keras.layers.RNN):
            raise TypeError(
                f"{owner}: `premise_layer` must be a keras.layers.RNN (such as "
                f"keras.layers.LSTM); got {premise_layer!r}."
            )
        if not isinstance(hypothesis_layer, AttentionRNN):
            raise TypeError(
                f"{owner}: `hypothesis_layer` must be an AttentionRNN; got {hypothesis_layer!r}."
            )
        if hypothesis_layer.cell.mechanisms:
            raise ValueError(
                f"{owner}: the hypothesis attends over one memory, the premise's outputs; got "
                f"`hypothesis_layer` ({hypothesis_layer.name!r}) whose cell has "
                f"{len(hypothesis_layer.cell.mechanisms)} `mechanisms`."
            )
        if not (premise_layer.return_sequences and premise_layer.return_state):
            raise ValueError(
                f"{owner}: `premise_layer` ({premise_layer.name!r}) must be built with "
                "return_sequences=True and return_state=True: its outputs are the memory and "
                "its final states start the hypothesis."
            )
        if premise_layer.go_backwards:
            raise ValueError(
                f"{owner}: `premise_layer` ({premise_layer.name!r}) has go_backwards=True: its "
                "outputs would come in reverse order, not in the order of the premise's words "
                "and mask that the attention reads. Build it with go_backwards=False."
            )
        self.premise_layer = premise_layer
        self.hypothesis_layer = hypothesis_layer
        self.supports_masking = True

    @property
    def return_sequences(self):
        return bool(self.hypothesis_layer.return_sequences)

    def _memory_shape(self, premise_shape):
        return tuple(self.premise_layer.compute_output_shape(premise_shape)[0])

    def build(self, input_shape):
        owner, premise, hypothesis = (
            type(self).__name__,
            self.premise_layer.name,
            self.hypothesis_layer.name,
        )
        # Two layers, so the sentences may differ in width.
        shapes = check.check_sentence_pair(input_shape, owner, same_width=False)
        self.input_spec = check.later_calls_spec(shapes)
        premise_shape, hypothesis_shape = shapes
        memory_shape = self._memory_shape(premise_shape)
        # An `AttentionWrapper` takes the memory's width when built, unless given one.
        memory_dim = self.hypothesis_layer.cell.memory_dim
        if memory_dim is not None and memory_shape[-1] != memory_dim:
            raise ValueError(
                f"{owner}: the premise layer {premise!r} outputs vectors {memory_shape[-1]} "
                f"wide, but the hypothesis layer {hypothesis!r} attends over a memory "
                f"{memory_dim} wide (its cell's `memory_dim`)."
            )
        premise_states = flat_state_sizes(self.premise_layer.cell.state_size)
        hypothesis_states = list(self.hypothesis_layer.cell.cell_state_sizes)
        if premise_states != hypothesis_states:
            raise ValueError(
                f"{owner}: the hypothesis starts from the premise's final states, but the "
                f"premise layer {premise!r} has states of sizes {premise_states} and the cell "
                f"of the hypothesis layer {hypothesis!r} states of sizes {hypothesis_states}; "
                "use the same kind of cell, of the same width, in both."
            )
        if not self.premise_layer.built:
            self.premise_layer.build(premise_shape)
        if not self.hypothesis_layer.built:
            self.hypothesis_layer.build(hypothesis_shape, memory_shape)

    def call(self, inputs, mask=None, training=None):
        premise, hypothesis = check.check_pair("inputs", inputs, type(self).__name__)
        premise_mask, hypothesis_mask = check.check_pair_masks(mask, inputs, type(self).__name__)
        memory, *states = self.premise_layer(premise, mask=premise_mask, training=training)
        outputs = self.hypothesis_layer(
            hypothesis,
            memory=memory,
            memory_mask=premise_mask,
            initial_state=self._hypothesis_states(memory, states),
            mask=hypothesis_mask,
            training=training,
        )
        cell = self.hypothesis_layer.cell
        if self.hypothesis_layer.return_state or cell.return_attention_scores:
            outputs = outputs[0]
        # In the encoder's own compute dtype, as `keras.layers.Bidirectional` returns its
        # layers' outputs, whatever the dtype policies of the layers it holds.
        final = _final_outputs(memory, premise_mask)
        return [ops.cast(final, self.compute_dtype), ops.cast(outputs, self.compute_dtype)]

    def _hypothesis_states(self, memory, premise_states):
        """The hypothesis starts from the premise's states; the attention's own state
        (Rocktäschel's r_0, or Luong's fed-back attention) starts at zero."""
        cell = self.hypothesis_layer.cell
        batch = ops.shape(memory)[0]
        extra = [
            ops.zeros((batch, size), memory.dtype)
            for size in cell.state_size[len(cell.cell_state_sizes) :]
        ]
        return [*premise_states, *extra]

    def premise_attention(self, premise, hypothesis):
        r"""Where the hypothesis attends in the premise, over ONE pair: at each hypothesis
        word, the attention's weights over the premise's words (Rocktäschel et al.'s
        :math:`\alpha_t`), as an eager call in inference computes them
        (`tf_memlayers.AttentionRNN.attention_scores`).

        Args:
            premise: Tensor or array ``[Tp, dim]``, the embedded premise.
            hypothesis: Tensor or array ``[Th, dim]``, the embedded hypothesis.

        Returns:
            float64 NumPy array ``[Th, Tp]``; each row sums to 1.

        Raises:
            ValueError: If a sentence is not one ``[time, dim]`` matrix with a step; the
                message names it.

        Example:

        >>> import keras, numpy as np
        >>> from tf_memlayers import AttentionRNN, WordByWordAttention
        >>> from tf_memlayers import ConditionalAttentionEncoder
        >>> encoder = ConditionalAttentionEncoder(
        ...     keras.layers.LSTM(8, return_sequences=True, return_state=True),
        ...     AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(8))),
        ... )
        >>> weights = encoder.premise_attention(np.ones((5, 4)), np.ones((3, 4)))
        >>> weights.shape, bool(np.allclose(weights.sum(axis=-1), 1.0))
        ((3, 5), True)
        """
        premise, hypothesis = ops.convert_to_tensor(premise), ops.convert_to_tensor(hypothesis)
        for name, sentence in (("premise", premise), ("hypothesis", hypothesis)):
            if len(sentence.shape) != 2 or sentence.shape[0] == 0:
                raise ValueError(
                    f"{type(self).__name__}.premise_attention: `{name}` must be one embedded "
                    f"sentence [time, dim] of at least one step; got shape {tuple(sentence.shape)}."
                )
        premise, hypothesis = ops.expand_dims(premise, 0), ops.expand_dims(hypothesis, 0)
        if not self.built:
            self.build([tuple(premise.shape), tuple(hypothesis.shape)])
        memory, *states = self.premise_layer(premise)
        scores = self.hypothesis_layer.attention_scores(
            hypothesis, memory, initial_state=self._hypothesis_states(memory, states)
        )
        return np.asarray(ops.convert_to_numpy(scores)[0], np.float64)

    def compute_mask(self, inputs, mask=None):
        if mask is None or not self.return_sequences:
            return None
        return [None, mask[1]]

    def compute_output_shape(self, input_shape):
        pair = check.check_pair("inputs", input_shape, type(self).__name__, shapes=True)
        premise_shape, hypothesis_shape = (tuple(shape) for shape in pair)
        memory_shape = self._memory_shape(premise_shape)
        width = self.hypothesis_layer.cell.output_size
        if self.hypothesis_layer.cell.return_attention_scores:
            width -= self.hypothesis_layer.cell.memory_length
        head = hypothesis_shape[:2] if self.return_sequences else hypothesis_shape[:1]
        return [(memory_shape[0], memory_shape[-1]), (*head, width)]

    def get_config(self):
        config = super().get_config()
        config["premise_layer"] = keras.layers.serialize(self.premise_layer)
        config["hypothesis_layer"] = keras.layers.serialize(self.hypothesis_layer)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for name in ("premise_layer", "hypothesis_layer"):
            if isinstance(config[name], dict):  # else `__init__` names the edited entry
                config[name] = keras.layers.deserialize(config[name])
        return cls(**config)


def _final_outputs(outputs, mask):
    """Each row's output at its last unmasked step (the padding at the end). Taken by the mask,
    not from the last step, which holds zeros where a loop zeroes the padding's outputs
    (``zero_output_for_mask=True``, or cuDNN's kernel on a GPU)."""
    if mask is None:
        return outputs[:, -1]
    last = ops.sum(ops.cast(mask, "int32"), axis=1) - 1
    index = ops.expand_dims(ops.expand_dims(ops.maximum(last, 0), -1), -1)
    return ops.squeeze(ops.take_along_axis(outputs, index, axis=1), 1)
