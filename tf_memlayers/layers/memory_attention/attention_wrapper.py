"""`AttentionWrapper` and `AttentionRNN`: a recurrent cell that attends over a memory at every
step (Bahdanau et al. 2015; Luong et al. 2015), the memory given at call time."""

import weakref

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.memory_cell_wrapper import (
    call_cell,
    cell_output_size,
    flat_state_sizes,
    with_deserialized_cell,
)
from tf_memlayers.layers.resets import check_reset, zero_where
from tf_memlayers.layers.resettable_rnn import ResettableRNN
from tf_memlayers.ops.products import dot_last_axis

SCORES = ("additive", "dot", "general")
POSITIONS = ("after", "before")


def masked_softmax(scores, mask):
    """Softmax over the last axis of ``scores`` ``[batch, length]`` where ``mask`` is true.

    Computed in float32 where the scores are 16-bit floats (which cannot hold the masking
    value, and lose the softmax's precision); a row with no true entry gets all-zero weights, so
    that its context is zero, not NaN.

    Args:
        scores: Tensor ``[batch, length]``.
        mask: Optional bool tensor ``[batch, length]``; `None`: every entry.

    Returns:
        Tensor ``[batch, length]``, float32 or float64.
    """
    if keras.backend.standardize_dtype(scores.dtype) in ("float16", "bfloat16"):
        scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.softmax(scores, axis=-1)
    mask = ops.cast(mask, "bool")
    masked = ops.where(mask, scores, ops.full_like(scores, -1e30))
    weights = ops.softmax(masked, axis=-1)
    return ops.where(mask, weights, ops.zeros_like(weights))


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionWrapper(keras.layers.Layer):
    r"""A Keras RNN cell that attends over a memory at every step.

    At step :math:`t` a query :math:`q_t` scores every memory vector :math:`m_j`, the softmax
    of the scores over the unmasked vectors weighs them into a context :math:`c_t`:

    .. math::

        e_{tj} = \mathrm{score}(q_t, m_j), \qquad
        \alpha_{tj} = \frac{\exp e_{tj}}{\sum_{k} \exp e_{tk}}, \qquad
        c_t = \sum_j \alpha_{tj} m_j,

    with the scores

    * ``"additive"`` (Bahdanau et al. 2015): :math:`v^\top \tanh(W_q q_t + W_m m_j)`; with
      ``normalize=True``, :math:`v` is weight-normalised, :math:`g\, v / \lVert v \rVert`, and
      a bias :math:`b` is added inside the tanh;
    * ``"dot"`` (Luong et al. 2015): :math:`q_t^\top m_j` (the query as wide as the memory);
    * ``"general"`` (Luong et al. 2015): :math:`q_t^\top W_a m_j`;

    the last two times a learned scalar :math:`g` with ``scale=True``.

    ``position="after"`` (Luong): the wrapped cell runs first, on the step's input joined
    with the previous attention vector (input feeding; ``input_feeding=False``: on the input
    alone), and its output :math:`h_t` is the query; the attention vector is
    :math:`a_t = \tanh(W_c [c_t; h_t])`.
    ``position="before"`` (Bahdanau's RNNsearch): the query is the cell's previous output
    :math:`h_{t-1}`, and the cell runs on the step's input joined with :math:`c_t`. The step
    outputs :math:`a_t` (``output_attention=True``; with ``position="before"``,
    :math:`a_t = \tanh(W_c [c_t; h_t])` too) or the cell's :math:`h_t`.

    The memory is a call argument, never constructor state: a layer of this package or your
    own loop passes it at every step. `AttentionRNN` is the sequence layer over this cell,
    taking the memory once per call.

    Args:
        cell: A Keras RNN cell (`keras.layers.LSTMCell`, `keras.layers.GRUCell`,
            `tf_memlayers.AssociativeGRUCell`, ...).
        score: ``"additive"``, ``"dot"`` or ``"general"``. Default: ``"additive"``.
        attention_units: Positive integer, the width of the additive score's hidden layer
            (``score="additive"`` only). Default: `None` (the cell's output width).
        normalize: Boolean, weight-normalise the additive score (``score="additive"`` only).
            Default: `False`.
        scale: Boolean, multiply the dot or general score by a learned scalar. Default:
            `False`.
        position: ``"after"`` or ``"before"`` the cell, as above. Default: ``"after"``.
        attention_size: Positive integer, the width of the attention vector :math:`a_t`
            (not with ``position="before"`` and ``output_attention=False``, which compute
            none). Default: `None` (the cell's output width).
        output_attention: Boolean, output :math:`a_t` (else the cell's output). Default:
            `True`.
        input_feeding: Boolean, join the previous attention vector to the cell's input
            (``position="after"`` only: before the cell, the context is the cell's input by
            definition). Default: `True`.
        return_attention_scores: Boolean, append the step's weights :math:`\alpha_t` over the
            memory to its output (the memory's length must be known when the cell is built);
            `AttentionRNN` returns them apart, as the alignment history. Default: `False`.
        kernel_initializer: Initializer of the attention's kernels. Default:
            ``"glorot_uniform"``.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: Tensor ``[batch, features]``, the step's input.
        states: List, the wrapped cell's states followed by the fed-back vector (the
            previous attention vector with ``position="after"``, the cell's previous output
            with ``"before"``).
        memory: Tensor ``[batch, length, memory_dim]``, the vectors attended over.
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding. A row with
            no true entry attends to nothing: its context is zero. Default: `None`.
        training: Python boolean, passed to the wrapped cell. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new sequence
            at this step: their states are zeroed first. Default: `None`.

    Returns:
        ``(output, new_states)``: the step's output (``[batch, attention_size]``, or the
        cell's output; followed by the weights over the memory with ``return_attention_scores``)
        and the new states.

    Example:

    A decoder step by step, as a hand-written loop runs it:

    >>> import numpy as np, keras
    >>> cell = AttentionWrapper(keras.layers.LSTMCell(16), score="general")
    >>> memory = np.random.default_rng(0).normal(size=(2, 7, 12)).astype("float32")
    >>> states = [np.zeros((2, size), "float32") for size in cell.state_size]
    >>> output, states = cell(np.ones((2, 5), "float32"), states, memory=memory)
    >>> output.shape, [s.shape[-1] for s in states]
    (TensorShape([2, 16]), [16, 16, 16])
    """

    def __init__(
        self,
        cell,
        score="additive",
        attention_units=None,
        normalize=False,
        scale=False,
        position="after",
        attention_size=None,
        output_attention=True,
        input_feeding=True,
        return_attention_scores=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = type(self).__name__
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(
                f"{owner}: `cell` must be a Keras RNN cell with a `state_size`, got {cell!r}."
            )
        self.cell = cell
        self.score = check.check_choice("score", score, SCORES, owner)
        self.position = check.check_choice("position", position, POSITIONS, owner)
        self.normalize = check.check_bool("normalize", normalize, owner)
        self.scale = check.check_bool("scale", scale, owner)
        self.output_attention = check.check_bool("output_attention", output_attention, owner)
        self.return_attention_scores = check.check_bool(
            "return_attention_scores", return_attention_scores, owner
        )
        self.input_feeding = check.check_bool("input_feeding", input_feeding, owner)
        if not self.input_feeding and self.position == "before":
            raise ValueError(
                f"{owner}: `input_feeding=False` leaves the attention vector out of the cell's "
                "input with position='after'; with position='before' the context is the cell's "
                "input (RNNsearch)."
            )
        if self.normalize and self.score != "additive":
            raise ValueError(
                f"{owner}: `normalize=True` weight-normalises the additive score; got "
                f"score={self.score!r} (use `scale=True` for a learned scale)."
            )
        if self.scale and self.score == "additive":
            raise ValueError(
                f"{owner}: `scale=True` scales the dot or general score; got score='additive' "
                "(use `normalize=True`)."
            )
        self.cell_state_sizes = flat_state_sizes(cell.state_size)
        self.cell_output_size = cell_output_size(cell)
        self.attention_units = (
            check.check_optional_int("attention_units", attention_units, 1, owner)
            or self.cell_output_size
        )
        self.attention_size = (
            check.check_optional_int("attention_size", attention_size, 1, owner)
            or self.cell_output_size
        )
        # A width the layer would never use is refused, as `normalize` and `scale` are.
        if attention_units is not None and self.score != "additive":
            raise ValueError(
                f"{owner}: `attention_units` is the width of the additive score's hidden "
                f"layer; got attention_units={attention_units!r} with score={self.score!r}."
            )
        if attention_size is not None and not self.uses_attention_kernel:
            where = " and position='before'" if self.position == "before" else ""
            raise ValueError(
                f"{owner}: `attention_size` is the width of the attention vector, which the "
                f"step never computes with output_attention=False{where}; got "
                f"attention_size={attention_size!r}."
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.memory_dim = None
        self.memory_length = None
        self._bound = None

    @property
    def feedback_size(self):
        """The width of the fed-back state (the last of `state_size`)."""
        return self.attention_size if self.position == "after" else self.cell_output_size

    @property
    def query_size(self):
        """The width of the query the scores read (the cell's output)."""
        return self.cell_output_size

    def fed_input_size(self):
        """The width joined to the step's input before the cell (once the memory's width is
        known): the previous attention vector (``"after"``, input feeding) or the context
        (``"before"``)."""
        if self.position == "before":
            return self.memory_dim
        return self.feedback_size if self.input_feeding else 0

    @property
    def uses_attention_kernel(self):
        """Whether the step computes the attention vector (``attention_kernel``)."""
        return self.output_attention or self.position == "after"

    @property
    def feeds_back(self):
        """Whether a step's attention reaches the next step: the context joins the cell's
        input (``position="before"``) or the previous attention vector does (input
        feeding). Where it does not, `AttentionRNN` runs the wrapped cell's loop alone and
        attends for all steps at once after it (`attend_steps`)."""
        return self.position == "before" or self.input_feeding

    @property
    def state_size(self):
        return [*self.cell_state_sizes, self.feedback_size]

    @property
    def output_size(self):
        size = self.attention_size if self.output_attention else self.cell_output_size
        # With the alignments, each step's output is [output, weights over the memory].
        return size + self.memory_length if self.return_attention_scores else size

    def build(self, inputs_shape, memory_shape=None):
        owner = type(self).__name__
        if memory_shape is None or len(memory_shape) != 3 or memory_shape[-1] is None:
            raise ValueError(
                f"{owner}: `memory` must be a 3D tensor [batch, length, memory_dim] with a known "
                f"memory_dim; got shape {memory_shape}."
            )
        self.memory_dim = int(memory_shape[-1])
        if self.return_attention_scores:
            if memory_shape[1] is None:
                raise ValueError(
                    f"{owner}: `return_attention_scores=True` needs the memory's length known "
                    "when the layer is built (each step outputs its weights over it); got "
                    f"memory shape {tuple(memory_shape)}. Pad the memory to a fixed length."
                )
            self.memory_length = int(memory_shape[1])
        query = self.query_size
        if self.score == "dot" and query != self.memory_dim:
            raise ValueError(
                f"{owner}: score='dot' needs the query (the cell's output, {query} wide) as wide "
                f"as the memory ({self.memory_dim}); use score='general' or 'additive'."
            )
        if not self.cell.built:
            self.cell.build((inputs_shape[0], int(inputs_shape[-1]) + self.fed_input_size()))

        # A clone per kernel: one stateless initializer would start them all alike.
        def init():
            return for_one_weight(self.kernel_initializer)

        if self.score == "additive":
            units = self.attention_units
            self.query_kernel = self.add_weight(
                name="query_kernel", shape=(query, units), initializer=init()
            )
            self.memory_kernel = self.add_weight(
                name="memory_kernel", shape=(self.memory_dim, units), initializer=init()
            )
            self.score_vector = self.add_weight(
                name="score_vector", shape=(units,), initializer=init()
            )
            if self.normalize:
                self.score_norm = self.add_weight(
                    name="score_norm",
                    shape=(),
                    initializer=keras.initializers.Constant((1.0 / units) ** 0.5),
                )
                self.score_bias = self.add_weight(
                    name="score_bias", shape=(units,), initializer="zeros"
                )
        elif self.score == "general":
            self.memory_kernel = self.add_weight(
                name="memory_kernel", shape=(self.memory_dim, query), initializer=init()
            )
        if self.scale:
            self.score_scale = self.add_weight(name="score_scale", shape=(), initializer="ones")
        if self.uses_attention_kernel:
            self.attention_kernel = self.add_weight(
                name="attention_kernel",
                shape=(self.memory_dim + self.cell_output_size, self.attention_size),
                initializer=init(),
            )
        self.built = True

    def memory_keys(self, memory):
        """The memory's keys, computed once per sequence: ``memory W_m`` (additive),
        ``memory W_a`` (general) or the memory itself (dot)."""
        if self.score == "dot":
            return memory
        # Called by `AttentionRNN` outside the cell's own call: cast as the call would.
        return ops.matmul(memory, ops.cast(self.memory_kernel, memory.dtype))

    def attend(self, query, memory, keys, memory_mask=None):
        """The context ``[batch, memory_dim]`` and the weights ``[batch, length]`` (at least
        float32) of ``query`` ``[batch, query_dim]`` over ``memory`` with its precomputed
        ``keys``."""
        if self.score == "additive":
            hidden = keys + ops.expand_dims(ops.matmul(query, self.query_kernel), 1)
            vector = self.score_vector
            if self.normalize:
                hidden = hidden + self.score_bias
                vector = self.score_norm * vector / ops.sqrt(ops.sum(ops.square(vector)))
            scores = ops.matmul(ops.tanh(hidden), vector)
        else:
            # Batched matrix products ([b, L, d] x [b, d, 1]), not a broadcast product and
            # a sum: one kernel each, forward and backward, at every step of the loop.
            scores = ops.squeeze(ops.matmul(keys, ops.expand_dims(query, -1)), -1)
            if self.scale:
                scores = self.score_scale * scores
        weights = masked_softmax(scores, memory_mask)
        context = ops.squeeze(
            ops.matmul(ops.expand_dims(ops.cast(weights, memory.dtype), 1), memory), 1
        )
        return context, weights

    def attention_vector(self, context, output):
        return ops.tanh(ops.matmul(ops.concatenate([context, output], -1), self.attention_kernel))

    def attend_steps(self, outputs, memory, keys, memory_mask=None):
        """The attention of every step at once, for a cell whose attention does not feed
        back (`feeds_back` is false): the cell's outputs ``[batch, time, cell output]`` are
        the queries.

        The same equations as `step`, as batched products over all steps; called by
        `AttentionRNN` outside the cell's own call, so the weights are cast to the compute
        dtype here, as a call would cast them.

        Args:
            outputs: Tensor ``[batch, time, cell output width]``, the wrapped cell's outputs
                :math:`h_t`.
            memory: Tensor ``[batch, length, memory_dim]``, padding zeroed.
            keys: The memory's keys (`memory_keys`).
            memory_mask: Optional bool tensor ``[batch, length]``. Default: `None`.

        Returns:
            ``(step outputs, attention vectors)``: the outputs the loop would give
            (``[batch, time, output_size]``, the weights over the memory appended with
            ``return_attention_scores``) and :math:`a_t` ``[batch, time, attention_size]``, the
            fed-back state of each step.
        """
        dtype = outputs.dtype

        def weight(variable):
            return ops.cast(variable, dtype)

        if self.score == "additive":
            query = ops.matmul(outputs, weight(self.query_kernel))  # [b, t, units]
            hidden = ops.expand_dims(keys, 1) + ops.expand_dims(query, 2)  # [b, t, L, units]
            vector = weight(self.score_vector)
            if self.normalize:
                hidden = hidden + weight(self.score_bias)
                vector = weight(self.score_norm) * vector / ops.sqrt(ops.sum(ops.square(vector)))
            scores = dot_last_axis(ops.tanh(hidden), vector)
        else:
            scores = ops.matmul(outputs, ops.transpose(keys, (0, 2, 1)))  # [b, t, L]
            if self.scale:
                scores = weight(self.score_scale) * scores
        mask = None if memory_mask is None else ops.expand_dims(memory_mask, 1)
        weights = masked_softmax(scores, mask)
        context = ops.matmul(ops.cast(weights, memory.dtype), memory)  # [b, t, memory_dim]
        attention = ops.tanh(
            ops.matmul(ops.concatenate([context, outputs], -1), weight(self.attention_kernel))
        )
        step_outputs = attention if self.output_attention else outputs
        if self.return_attention_scores:
            step_outputs = ops.concatenate([step_outputs, ops.cast(weights, dtype)], -1)
        return step_outputs, attention

    def call(
        self, inputs, states, memory=None, memory_mask=None, training=None, reset=None, keys=None
    ):
        owner = type(self).__name__
        if memory is None and self._bound is not None:
            # Inside `AttentionRNN`'s loop: the memory of the running call, keys precomputed.
            memory, memory_mask, keys = self._bound
        if memory is None:
            raise ValueError(
                f"{owner}: no `memory` given: pass the vectors to attend over, [batch, length, "
                "memory_dim], at every call."
            )
        # Keras casts a call's first input to the compute dtype, not its keyword arguments.
        memory = ops.cast(memory, self.compute_dtype)
        states = list(states)
        if reset is not None:
            reset = check_reset(reset, tuple(inputs.shape)[:1], owner)
            states = zero_where(reset, states)
        if keys is None:
            if memory_mask is not None:
                mask = ops.expand_dims(ops.cast(memory_mask, "bool"), -1)
                memory = ops.where(mask, memory, ops.zeros_like(memory))
            keys = self.memory_keys(memory)
        step_output, weights, new_cell_states, feedback = self.step(
            inputs, states[:-1], states[-1], memory, keys, memory_mask, training
        )
        if self.return_attention_scores:
            step_output = ops.concatenate([step_output, ops.cast(weights, step_output.dtype)], -1)
        return step_output, [*new_cell_states, feedback]

    def step(self, inputs, cell_states, fed, memory, keys, memory_mask, training):
        """One step after the resets: ``(output, weights over the memory, the cell's new
        states, the new fed-back vector)``."""
        if self.position == "after":
            cell_inputs = ops.concatenate([inputs, fed], -1) if self.input_feeding else inputs
            output, new_cell_states = call_cell(self.cell, cell_inputs, cell_states, training)
            context, weights = self.attend(output, memory, keys, memory_mask)
            attention = self.attention_vector(context, output)
            feedback = attention
        else:
            context, weights = self.attend(fed, memory, keys, memory_mask)
            output, new_cell_states = call_cell(
                self.cell, ops.concatenate([inputs, context], -1), cell_states, training
            )
            attention = self.attention_vector(context, output) if self.output_attention else None
            feedback = output
        step_output = attention if self.output_attention else output
        return step_output, weights, new_cell_states, feedback

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "score": self.score,
                "attention_units": self.attention_units if self.score == "additive" else None,
                "normalize": self.normalize,
                "scale": self.scale,
                "position": self.position,
                "attention_size": self.attention_size if self.uses_attention_kernel else None,
                "output_attention": self.output_attention,
                "return_attention_scores": self.return_attention_scores,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "input_feeding": self.input_feeding,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_deserialized_cell(config))


class _CellAlone:
    """Stands in for an `AttentionWrapper` whose attention does not feed back, inside the loop
    of `AttentionRNN`: runs the wrapped cell alone on the step's input, after the step's
    resets; the fed-back state passes through (`AttentionRNN` sets it after the loop).

    With ``marked`` (a call with a mask), the output carries one more column of ones, which
    the loop's masking carries over or zeroes as it does the output, and two more states
    follow the wrapper's: the cell's output and a one, which masked steps keep."""

    def __init__(self, wrapper, training, marked):
        self.wrapper = wrapper
        self.training = training
        self.marked = marked
        self.compute_dtype = wrapper.compute_dtype
        self.output_size = wrapper.cell_output_size + int(marked)
        self.state_size = [*wrapper.state_size, *((wrapper.cell_output_size, 1) if marked else ())]

    def __call__(self, inputs, states, reset=None):
        states = list(states)
        if reset is not None:
            states = zero_where(reset, states)
        count = len(self.wrapper.cell_state_sizes)
        output, cell_states = call_cell(self.wrapper.cell, inputs, states[:count], self.training)
        new_states = [*cell_states, states[count]]
        if self.marked:
            one = ops.ones_like(output[:, :1])
            new_states += [output, one]
            output = ops.concatenate([output, one], -1)
        return output, new_states


# `AttentionRNN.attention_scores`'s copies of each layer, by the memory's length: kept
# outside the layer, so that saving, loading and cloning never see them.
_ATTENTION_PROBES = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionRNN(ResettableRNN):
    """`keras.layers.RNN` over an `AttentionWrapper`, with the memory as a call argument.

    The memory's keys are computed once per call, and every step of the loop attends over the
    memory given to that call (so a stateful layer may read another memory at each call).
    Where the cell's attention feeds nothing back (`AttentionWrapper.feeds_back` is false:
    ``position="after"`` without input feeding), the loop runs the wrapped cell alone and the
    attention of all steps follows it in batched products, with the step-by-step loop's
    outputs, states and gradients.

    Args:
        cell: An `AttentionWrapper` (or a `WordByWordAttention`, which is one).
        **kwargs: The arguments of `keras.layers.RNN` (``return_sequences``,
            ``return_state``, ``stateful``, ``unroll``, ``zero_output_for_mask``, ...).

    Call arguments:
        sequences: Tensor ``[batch, time, features]``.
        memory: Tensor ``[batch, length, memory_dim]``, the vectors attended over.
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding. Default:
            `None`.
        initial_state: Optional list of the cell's initial states. Default: `None`.
        mask: Optional bool tensor ``[batch, time]`` of the sequences. Default: `None`.
        training: Python boolean. Default: `False`.
        reset: Optional bool tensor ``[batch, time]``, true where a new sequence starts.
            Default: `None`.

    Returns:
        As `keras.layers.RNN`: the last output ``[batch, size]``, or every step's ``[batch,
        time, size]`` with ``return_sequences=True``; with the cell's ``return_attention_scores``,
        followed by the weights over the memory (``[batch, length]`` or ``[batch, time,
        length]``); with ``return_state=True``, the final states after them.

    Example:

    A decoder over an encoder's outputs, padding masked, with the alignment history:

    >>> import numpy as np, keras
    >>> rng = np.random.default_rng(0)
    >>> encoded = rng.normal(size=(2, 7, 12)).astype("float32")
    >>> encoded_mask = np.array([[True] * 7, [True] * 4 + [False] * 3])
    >>> targets = rng.normal(size=(2, 5, 3)).astype("float32")
    >>> cell = AttentionWrapper(keras.layers.GRUCell(16), return_attention_scores=True)
    >>> decoder = AttentionRNN(cell, return_sequences=True)
    >>> outputs, alignments = decoder(targets, memory=encoded, memory_mask=encoded_mask)
    >>> outputs.shape, alignments.shape
    (TensorShape([2, 5, 16]), TensorShape([2, 5, 7]))
    >>> float(keras.ops.max(alignments[1, :, 4:]))  # nothing on the padding
    0.0
    """

    def __init__(self, cell, **kwargs):
        if not isinstance(cell, AttentionWrapper):
            raise TypeError(f"AttentionRNN: `cell` must be an AttentionWrapper, got {cell!r}.")
        super().__init__(cell, **kwargs)

    def build(self, sequences_shape, memory_shape=None, initial_state_shape=None):
        if not self.cell.built:
            step_shape = (sequences_shape[0], sequences_shape[-1])
            self.cell.build(step_shape, memory_shape)
        # The inputs' width, which `attention_scores` checks (the cell's kernels take it).
        self._sequences_width = sequences_shape[-1]
        super().build(sequences_shape, initial_state_shape)

    def call(
        self,
        sequences,
        memory=None,
        memory_mask=None,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
    ):
        owner = type(self).__name__
        if memory is None:
            raise ValueError(
                f"{owner}: no `memory` given: pass the vectors to attend over, [batch, length, "
                "memory_dim]."
            )
        memory = ops.cast(ops.convert_to_tensor(memory), self.cell.compute_dtype)
        if len(memory.shape) != 3 or memory.shape[-1] != self.cell.memory_dim:
            raise ValueError(
                f"{owner}: `memory` must be [batch, length, {self.cell.memory_dim}] (the width "
                f"it was built with); got shape {tuple(memory.shape)}."
            )
        if memory_mask is not None:
            memory_mask = ops.convert_to_tensor(memory_mask)
            if tuple(memory_mask.shape) != tuple(memory.shape[:2]) and None not in tuple(
                memory_mask.shape
            ):
                raise ValueError(
                    f"{owner}: `memory_mask` must be [batch, length] = {tuple(memory.shape[:2])}, "
                    f"the memory's; got shape {tuple(memory_mask.shape)}."
                )
            memory_mask = ops.cast(memory_mask, "bool")
            # Padding is never read: zeroed before the keys, so that nothing there (NaN
            # included) reaches the outputs or the gradients.
            memory = ops.where(ops.expand_dims(memory_mask, -1), memory, ops.zeros_like(memory))
        if mask is not None:
            # The same for the sequences' padding: the masked steps' inputs are never used.
            keep = ops.expand_dims(ops.cast(mask, "bool"), -1)
            sequences = ops.where(keep, sequences, ops.zeros_like(sequences))
        self.cell._bound = (memory, memory_mask, self.cell.memory_keys(memory))
        try:
            results = super().call(
                sequences, initial_state=initial_state, mask=mask, training=training, reset=reset
            )
        finally:
            self.cell._bound = None
        return self._split_alignments(results)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        wrapper = self.cell
        if wrapper.feeds_back:
            return super().inner_loop(sequences, initial_state, mask, training=training)
        # Nothing of the attention reaches the next step: the loop runs the wrapped cell
        # alone, and every step's attention is computed at once from the cell's outputs.
        memory, memory_mask, keys = wrapper._bound
        marked = mask is not None
        alone = _CellAlone(wrapper, training, marked)
        extra = []
        if marked:
            # The cell's output at each row's last unmasked step, and whether it had one:
            # states, so that masked steps keep them.
            batch = ops.shape(sequences)[0]
            extra = [
                ops.zeros((batch, wrapper.cell_output_size), wrapper.compute_dtype),
                ops.zeros((batch, 1), wrapper.compute_dtype),
            ]
        object.__setattr__(self, "cell", alone)
        try:
            last, outputs, states = super().inner_loop(
                sequences, [*initial_state, *extra], mask, training=training
            )
        finally:
            object.__setattr__(self, "cell", wrapper)
        states = list(states)
        if not self.return_sequences:
            # Keras's loop keeps every step's output only with `return_sequences`.
            outputs = ops.expand_dims(last, 1)
        if marked:
            # The marker column: 1 where the loop's output is a step's, 0 where it has none
            # yet (before a row's first unmasked step) or zeroes it (`zero_output_for_mask`).
            real = outputs[..., -1:] > 0.5
            outputs = outputs[..., :-1]
            last_output, seen = states[-2], states[-1] > 0.5
            states = states[:-2]
        else:
            last_output = last
        step_outputs, _ = wrapper.attend_steps(outputs, memory, keys, memory_mask)
        _, final = wrapper.attend_steps(ops.expand_dims(last_output, 1), memory, keys, memory_mask)
        final = final[:, 0]
        if marked:
            step_outputs = ops.where(real, step_outputs, ops.zeros_like(step_outputs))
            # A row without an unmasked step keeps the fed-back state it started with.
            final = ops.where(seen, final, states[-1])
        states[-1] = final
        return step_outputs[:, -1], step_outputs, states

    def _split_alignments(self, results):
        """With the cell's ``return_attention_scores``, the outputs split into ``(outputs,
        alignments)``, the states (with ``return_state``) after them."""
        if not self.cell.return_attention_scores:
            return results
        outputs, states = (results[0], list(results[1:])) if self.return_state else (results, [])
        width = self.cell.output_size - self.cell.memory_length
        return (outputs[..., :width], outputs[..., width:], *states)

    def attention_scores(self, sequences, memory, memory_mask=None, initial_state=None):
        """The cell's weights over the memory at every step, as an eager call in inference
        computes them from ``initial_state``: what the cell's ``return_attention_scores``
        would append to the outputs, from a layer built without it (to look at what a trained
        model attends to).

        A copy of the layer whose cell returns its weights runs the call with this layer's
        current weights (copied at each call, so call it eagerly, not inside a compiled
        function). The copy is kept outside the layer, which saves, loads and clones as it
        did, for later calls with a memory of the same length.

        Args:
            sequences: Tensor ``[batch, time, features]``, without padding, ``features`` the
                width the layer was built with.
            memory: Tensor ``[batch, length, memory_dim]`` of a known ``length``, the vectors
                attended over.
            memory_mask: Optional bool tensor ``[batch, length]``, false at padding.
                Default: `None`.
            initial_state: Optional list of the cell's initial states. Default: `None`
                (zeros; a stateful layer's carried states are not read).

        Returns:
            A tensor ``[batch, time, length]``: at each step, the weights over the memory (in
            the steps' order of the outputs, reversed with ``go_backwards``).

        Raises:
            ValueError: If ``sequences`` is not as wide as the layer's inputs, or the
                memory's length is not known; the message names the argument.

        Example:

        >>> import numpy as np, keras
        >>> decoder = AttentionRNN(AttentionWrapper(keras.layers.GRUCell(4)))
        >>> memory = np.ones((1, 6, 3), "float32")
        >>> _ = decoder(np.ones((1, 2, 5), "float32"), memory=memory)
        >>> scores = decoder.attention_scores(np.ones((1, 2, 5), "float32"), memory)
        >>> tuple(scores.shape), float(keras.ops.sum(scores[0, 0]))
        ((1, 2, 6), 1.0)
        """
        owner = f"{type(self).__name__}.attention_scores"
        memory = ops.convert_to_tensor(memory)
        sequences = ops.convert_to_tensor(sequences)
        if not self.built:
            self.build(tuple(sequences.shape), tuple(memory.shape))
        if len(memory.shape) != 3 or memory.shape[1] is None:
            raise ValueError(
                f"{owner}: `memory` must be [batch, length, memory_dim] with a known length; "
                f"got shape {tuple(memory.shape)}."
            )
        if sequences.shape[-1] != self._sequences_width:
            raise ValueError(
                f"{owner}: `sequences` must be [batch, time, {self._sequences_width}] (the width "
                f"the layer was built with); got shape {tuple(sequences.shape)}."
            )
        length = int(memory.shape[1])
        probes = _ATTENTION_PROBES.setdefault(self, {})
        if length not in probes:
            config = dict(self.cell.get_config(), return_attention_scores=True)
            probe = AttentionRNN(
                type(self.cell).from_config(config),
                return_sequences=True,
                go_backwards=self.go_backwards,
                dtype=self.dtype_policy,
            )
            probe.build((None, None, self._sequences_width), (None, length, self.cell.memory_dim))
            probes[length] = probe
        probe = probes[length]
        probe.set_weights(self.get_weights())
        _, scores = probe(
            sequences, memory=memory, memory_mask=memory_mask, initial_state=initial_state
        )
        return scores

    def compute_output_spec(
        self,
        sequences,
        memory=None,
        memory_mask=None,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
    ):
        spec = super().compute_output_spec(
            sequences, initial_state=initial_state, mask=mask, training=training, reset=reset
        )
        if not self.cell.return_attention_scores:
            return spec
        output, states = (spec[0], list(spec[1:])) if self.return_state else (spec, [])
        width = self.cell.output_size - self.cell.memory_length
        head = tuple(output.shape[:-1])
        return (
            keras.KerasTensor(head + (width,), output.dtype),
            keras.KerasTensor(head + (self.cell.memory_length,), output.dtype),
            *states,
        )
