"""`WordByWordAttention`: the word-by-word attention of Rocktäschel et al. (2016) as a cell that
attends over a memory (the premise's outputs) at every step of the hypothesis."""

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.memory_attention.attention_wrapper import AttentionWrapper
from tf_memlayers.layers.memory_cell_wrapper import call_cell, with_deserialized_cell


@keras.saving.register_keras_serializable(package="tf_memlayers")
class WordByWordAttention(AttentionWrapper):
    r"""The word-by-word attention of Rocktäschel et al. (2016) as a Keras RNN cell.

    The wrapped cell reads the hypothesis; after each of its steps the output :math:`h_t`
    and the previous attention representation :math:`r_{t-1}` query the premise's outputs
    :math:`Y = [y_1 \dots y_L]` (the memory, given at call time), and :math:`r_t` carries what
    was attended over so far (Rocktäschel et al. 2016, §2.4):

    .. math::

        M_t &= \tanh\left(W^y Y + (W^h h_t + W^r r_{t-1}) \otimes e_L\right), \qquad
        \alpha_t = \mathrm{softmax}(w^\top M_t), \\
        r_t &= Y \alpha_t^\top + \tanh(W^t r_{t-1}), \qquad
        h^*_t = \tanh(W^p r_t + W^x h_t).

    The softmax runs over the memory's unmasked vectors; :math:`r_0 = 0`. Each step outputs
    :math:`h^*_t` (the pair's representation :math:`h^* = h^*_N` at the last step of the
    hypothesis) or, with ``output_attention=False``, the cell's :math:`h_t`. Unlike
    `AttentionWrapper`'s Luong form, nothing is fed back into the cell's input: the cell reads
    the hypothesis alone, and :math:`r_t` is carried as the last state. One step costs time
    and memory linear in the premise's length :math:`L`; :math:`W^y Y` is computed once per
    call.

    The weights, in the paper's names (row-vector layout: each kernel multiplies from the
    right): ``memory_kernel`` :math:`W^y` ``[memory_dim, attention_units]``;
    ``query_kernel`` :math:`[W^h; W^r]` ``[units + memory_dim, attention_units]`` (the rows
    of :math:`h_t`, then those of :math:`r_{t-1}`); ``score_vector`` :math:`w`;
    ``transition_kernel`` :math:`W^t` ``[memory_dim, memory_dim]``; ``attention_kernel``
    :math:`[W^p; W^x]` ``[memory_dim + units, attention_size]``. The paper's matrices have
    no biases, and neither have these.

    `AttentionRNN` runs it over a sequence, taking the memory once per call.

    Args:
        cell: A Keras RNN cell (`keras.layers.LSTMCell` in the paper, or any other).
        memory_dim: Positive integer, the width :math:`k` of the memory's vectors and of
            :math:`r_t`. Default: `None` (the cell's output width: the paper's premise and
            hypothesis LSTMs have one width).
        attention_units: Positive integer, the rows of :math:`M_t`. Default: `None`
            (``memory_dim``, the paper's :math:`k`).
        attention_size: Positive integer, the width of :math:`h^*_t`. Default: `None` (the
            cell's output width).
        output_attention: Boolean, output :math:`h^*_t` (else the cell's :math:`h_t`).
            Default: `True`.
        return_attention_scores: Boolean, append the step's weights :math:`\alpha_t` to its output,
            as `AttentionWrapper` does. Default: `False`.
        kernel_initializer: Initializer of the attention's kernels. Default:
            ``"glorot_uniform"``.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: Tensor ``[batch, features]``, the step's input.
        states: List, the wrapped cell's states followed by :math:`r_{t-1}` ``[batch,
            memory_dim]``.
        memory: Tensor ``[batch, length, memory_dim]``, the premise's outputs :math:`Y`.
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding. A row with
            no true entry attends to nothing: its :math:`Y \alpha_t^\top` is zero. Default:
            `None`.
        training: Python boolean, passed to the wrapped cell. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new sequence
            at this step: their states are zeroed first. Default: `None`.
        keys: Optional, the memory's keys (the ``memory_keys`` of its attention mechanism,
            of the memory with its padding zeroed), for a loop of your own that computes them
            once per sequence rather than at every step. Default: `None` (computed here).

    Returns:
        ``(output, new_states)``: :math:`h^*_t` ``[batch, attention_size]`` (or the cell's
        output; followed by :math:`\alpha_t` with ``return_attention_scores``) and the new states.

    Example:

    The hypothesis LSTM attending over the premise LSTM's outputs, as the paper's model:

    >>> import numpy as np, keras
    >>> from tf_memlayers import AttentionRNN
    >>> from tf_memlayers import WordByWordAttention
    >>> rng = np.random.default_rng(0)
    >>> premise = rng.normal(size=(2, 9, 16)).astype("float32")
    >>> hypothesis = rng.normal(size=(2, 6, 16)).astype("float32")
    >>> encoded = keras.layers.LSTM(16, return_sequences=True)(premise)
    >>> cell = WordByWordAttention(keras.layers.LSTMCell(16))
    >>> cell.state_size  # the LSTM's h and c, then r
    [16, 16, 16]
    >>> pair = AttentionRNN(cell)(hypothesis, memory=encoded)  # h* of each pair
    >>> tuple(pair.shape)
    (2, 16)
    """

    def __init__(
        self,
        cell,
        memory_dim=None,
        attention_units=None,
        attention_size=None,
        output_attention=True,
        return_attention_scores=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        owner = type(self).__name__
        fixed_by_the_paper = ("score", "position", "normalize", "scale", "input_feeding")
        weights = (
            "monotonic_mode",
            "sigmoid_noise",
            "score_bias_init",
            "seed",
            "probability_fn",
            "mechanisms",
        )
        for fixed in fixed_by_the_paper + weights:
            if fixed in kwargs:
                raise TypeError(
                    f"{owner}: `{fixed}` is fixed by the word-by-word attention (an additive "
                    "score after the cell, its softmax); use AttentionWrapper to choose it."
                )
        memory_dim = check.check_optional_int("memory_dim", memory_dim, 1, owner)
        super().__init__(
            cell,
            score="additive",
            attention_units=attention_units,
            position="after",
            input_feeding=False,  # the cell reads the hypothesis alone
            attention_size=attention_size,
            output_attention=output_attention,
            return_attention_scores=return_attention_scores,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )
        self.memory_dim = memory_dim or self.cell_output_size
        if attention_units is None:  # checked above when given; the paper's k by default
            self.attention_units = self.memory_dim

    @property
    def feedback_size(self):
        """:math:`r_t`'s width: the memory's."""
        return self.memory_dim

    @property
    def query_size(self):
        """The query :math:`[h_t; r_{t-1}]`."""
        return self.cell_output_size + self.memory_dim

    @property
    def uses_attention_kernel(self):
        return self.output_attention

    @property
    def feeds_back(self):
        """Always: :math:`r_{t-1}` enters the step's query and :math:`r_t`."""
        return True

    def build(self, inputs_shape, memory_shape=None):
        if (
            memory_shape is not None
            and len(memory_shape) == 3
            and (memory_shape[-1] is not None and int(memory_shape[-1]) != self.memory_dim)
        ):
            raise ValueError(
                f"{type(self).__name__}: the memory is {memory_shape[-1]} wide, but "
                f"memory_dim={self.memory_dim} (r_t and the memory have one width; "
                "`memory_dim` defaults to the cell's output width)."
            )
        super().build(inputs_shape, memory_shape)
        self.transition_kernel = self.add_weight(
            name="transition_kernel",
            shape=(self.memory_dim, self.memory_dim),
            initializer=for_one_weight(self.kernel_initializer),
        )

    def step(self, inputs, cell_states, fed, memory, keys, memory_mask, training):
        output, new_cell_states = call_cell(self.cell, inputs, cell_states, training)
        read, weights = self.attend(ops.concatenate([output, fed], -1), memory, keys, memory_mask)
        represented = read + ops.tanh(ops.matmul(fed, self.transition_kernel))
        step_output = (
            self.attention_vector(represented, output) if self.output_attention else output
        )
        return step_output, weights, new_cell_states, represented

    def get_config(self):
        config = super().get_config()
        for fixed in ("score", "position", "normalize", "scale", "input_feeding"):
            config.pop(fixed)
        config["memory_dim"] = self.memory_dim
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_deserialized_cell(config))
