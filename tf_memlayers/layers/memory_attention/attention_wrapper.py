"""`AttentionWrapper`: a recurrent cell that attends over a memory at every step (Bahdanau et
al. 2015; Luong et al. 2015), the memory given at call time; `AttentionRNN` runs it over a
sequence."""

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.memory_attention.attention_mechanism import (
    AttentionMechanism,
    ScoredAttention,
    masked_probabilities,
)
from tf_memlayers.layers.memory_cell_wrapper import (
    RecomputedWithItsLayer,
    call_cell,
    cell_output_size,
    flat_state_sizes,
    with_deserialized_cell,
)
from tf_memlayers.layers.resets import check_reset, zero_where
from tf_memlayers.ops.products import dot_last_axis

POSITIONS = ("after", "before")
ATTENTION_LAYERS = ("luong", "context")


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionWrapper(RecomputedWithItsLayer, ScoredAttention, keras.layers.Layer):
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

    ``probability_fn`` may replace the softmax: ``"hardmax"`` (one-hot at the first largest
    score) or a function of the scores of your own.

    With ``monotonic_mode`` the attention is monotonic (Raffel et al. 2017, "Online and
    Linear-Time Attention by Enforcing Monotonic Alignments"): it moves through the memory
    from left to right, never back. The score plus a learned scalar :math:`r` (initially
    ``score_bias_init``) and, in training, Gaussian noise of deviation ``sigmoid_noise`` gives
    the probability of stopping at each vector, :math:`p_{tj} = \sigma(e_{tj} + r +
    \epsilon)`, zero at padding, and the alignments follow from those of the previous step
    :math:`\alpha_{t-1}` (`monotonic_alignments`): their expectation,

    .. math::

        \alpha_{tj} = p_{tj} \sum_{k \le j} \alpha_{t-1,k} \prod_{l=k}^{j-1} (1 - p_{tl}),

    in closed form (``"parallel"``, as in training in the paper) or by its recurrence
    (``"recursive"``), or the hard alignment of decoding (``"hard"``: one-hot at the first
    vector at or after the previous step's whose :math:`p_{tj} > 1/2`; zeros, attending to
    nothing, where there is none). Before the first step :math:`\alpha_0` is one-hot at the
    memory's first vector. ``score="additive"`` is Bahdanau-style monotonic attention,
    ``"general"`` (or ``"dot"``) Luong-style.

    ``position="after"`` (Luong): the wrapped cell runs first, on the step's input joined
    with the previous attention vector (input feeding; ``input_feeding=False``: on the input
    alone), and its output :math:`h_t` is the query; the attention vector is
    :math:`a_t = \tanh(W_c [c_t; h_t])` (``attention_layer="luong"``), the context itself
    (``"context"``) or your layer of :math:`[c_t; h_t]`.
    ``position="before"`` (Bahdanau's RNNsearch): the query is the cell's previous output
    :math:`h_{t-1}`, and the cell runs on the step's input joined with :math:`c_t`. The step
    outputs :math:`a_t` (``output_attention=True``; with ``position="before"``,
    :math:`a_t = \tanh(W_c [c_t; h_t])` too) or the cell's :math:`h_t`.

    With ``mechanisms`` (tensorflow-addons' list of attention mechanisms) several
    `AttentionMechanism` layers attend at once, each over its own memory with its own score,
    from the same query: mechanism :math:`i` gives the context :math:`c^i_t`, its attention
    vector is :math:`a^i_t = \tanh(W^i_c [c^i_t; h_t])` (``attention_size`` wide, one width
    per mechanism; ``"context"``: :math:`c^i_t`; or a layer per mechanism), and the
    attention vector is :math:`a_t = [a^1_t; \ldots; a^n_t]` (with ``position="before"``,
    the cell reads :math:`[x_t; c^1_t; \ldots; c^n_t]`). The memories and their masks are
    then lists of one per mechanism at every call (or one tensor for all).

    The memory is a call argument, never constructor state: a layer of this package or your
    own loop passes it at every step. `AttentionRNN` is the sequence layer over this cell,
    taking the memory once per call; it also draws the dropout masks of a cell with
    ``dropout`` or ``recurrent_dropout`` (as wide as the inputs the cell reads) before its
    loop; your own loop steps through each sequence in training inside `dropout_masks`
    (training the wrapper without either is a ``ValueError``).

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
            none); with ``mechanisms``, a list of one width per mechanism (or one integer for
            each). Default: `None` (the cell's output width, for each mechanism).
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
        attention_layer: ``"luong"`` (:math:`\tanh(W_c [c_t; h_t])`, ``attention_size``
            wide), ``"context"`` (no layer: :math:`a_t = c_t`, as wide as the memory) or a
            Keras layer of :math:`[c_t; h_t]` (``[batch, memory_dim + cell output]``; the
            attention is its output, saved and loaded with the wrapper); with
            ``mechanisms``, ``"luong"``, ``"context"`` or a list of one layer per mechanism,
            each of :math:`[c^i_t; h_t]` (a layer not with ``position="before"`` and
            ``output_attention=False``, which compute no attention vector). Default:
            ``"luong"``.
        probability_fn: ``"softmax"``, ``"hardmax"`` (:math:`\alpha_t` one-hot at the first
            largest unmasked score; no gradient reaches the scores) or a function of the
            scores ``[..., length]`` to weights over the last axis (a Keras function: it sees
            the masked scores at -1e30, and its weights there are set to zero); register it
            with `keras.saving.register_keras_serializable` so that the layer saves and loads.
            Default: ``"softmax"``.
        monotonic_mode: `None` (the softmax), or ``"parallel"``, ``"recursive"`` or
            ``"hard"``: monotonic attention, as above. The memory's length must be known when
            the cell is built (the previous alignments are a state). Default: `None`.
        sigmoid_noise: Non-negative float, the deviation of the Gaussian noise added to the
            monotonic scores in training (``training=True``) only; it pushes the
            probabilities towards 0 and 1, so that training's expected alignments approach
            the hard ones of decoding. Default: ``0.0``.
        score_bias_init: Float, the initial value of the monotonic scores' learned bias
            :math:`r` (negative for long memories, so that the attention does not stop at
            once). Default: ``0.0``.
        seed: Optional integer, the seed of the noise (``sigmoid_noise > 0`` only). Default:
            `None`.
        mechanisms: Optional list of `AttentionMechanism` layers, each attending over its
            own memory (their scores, probability functions and monotonic modes are their
            own: the wrapper's score arguments then keep their defaults). Each monotonic
            mechanism's previous alignments are a state of their own; the weights appended
            with ``return_attention_scores`` are each mechanism's in turn. Default: `None`
            (one mechanism: the wrapper's score arguments).
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: Tensor ``[batch, features]``, the step's input.
        states: List, the wrapped cell's states followed by the fed-back vector (the
            previous attention vector with ``position="after"``, the cell's previous output
            with ``"before"``); with ``monotonic_mode``, then the previous alignments minus
            the initial one-hot, so that zero states (as Keras, resets and ``reset_state``
            make them) start at the memory's first vector (one such state per monotonic
            mechanism).
        memory: Tensor ``[batch, length, memory_dim]``, the vectors attended over; with
            ``mechanisms``, a list of one per mechanism (or one tensor for all).
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding. A row with
            no true entry attends to nothing: its context is zero. With ``mechanisms``, a
            list of one per mechanism (or one for all; `None` entries: no padding). Default:
            `None`.
        training: Python boolean, passed to the wrapped cell; with ``sigmoid_noise``, the
            monotonic scores get their noise when true. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new sequence
            at this step: their states are zeroed first. Default: `None`.
        keys: Optional, the memory's keys (the ``memory_keys`` of its attention mechanism,
            of the memory with its padding zeroed; with ``mechanisms``, one per mechanism),
            for a loop of your own that computes them once per sequence rather than at every
            step. Default: `None` (computed here).

    Returns:
        ``(output, new_states)``: the step's output (``[batch, attention_size]``, or the
        cell's output; followed by the weights over the memory with ``return_attention_scores``)
        and the new states.

    Raises:
        ValueError: If ``memory``, ``memory_mask`` or a state has another batch size than
            ``inputs`` (on TensorFlow, where a batch size is unknown until the step runs, an
            assertion checks it then).

    Example:

    A decoder step by step, as a hand-written loop runs it:

    >>> import numpy as np, keras
    >>> from tf_memlayers import AttentionWrapper
    >>> cell = AttentionWrapper(keras.layers.LSTMCell(16), score="general")
    >>> memory = np.random.default_rng(0).normal(size=(2, 7, 12)).astype("float32")
    >>> states = [np.zeros((2, size), "float32") for size in cell.state_size]
    >>> output, states = cell(np.ones((2, 5), "float32"), states, memory=memory)
    >>> tuple(output.shape), [s.shape[-1] for s in states]
    ((2, 16), [16, 16, 16])

    Two mechanisms, each over a memory of its own, their attention vectors joined:

    >>> from tf_memlayers import AttentionMechanism
    >>> mechanisms = [AttentionMechanism(), AttentionMechanism(score="general")]
    >>> cell = AttentionWrapper(
    ...     keras.layers.GRUCell(8), mechanisms=mechanisms, attention_size=[8, 4])
    >>> memories = [memory, np.ones((2, 3, 5), "float32")]
    >>> states = [np.zeros((2, size), "float32") for size in cell.state_size]
    >>> output, states = cell(np.ones((2, 5), "float32"), states, memory=memories)
    >>> tuple(output.shape)
    (2, 12)
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
        monotonic_mode=None,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        seed=None,
        probability_fn="softmax",
        attention_layer="luong",
        mechanisms=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = type(self).__name__
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(
                f"{owner}: `cell` must be a Keras RNN cell with a `state_size`, got {cell!r}."
            )
        self.cell = cell
        self.position = check.check_choice("position", position, POSITIONS, owner)
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
        self.mechanisms = self._checked_mechanisms(mechanisms, owner)
        count = len(self.mechanisms) if self.mechanisms else None
        if self.mechanisms:
            given = [
                f"{name}={value!r}"
                for name, value, default in (
                    ("score", score, "additive"),
                    ("attention_units", attention_units, None),
                    ("normalize", normalize, False),
                    ("scale", scale, False),
                    ("monotonic_mode", monotonic_mode, None),
                    ("sigmoid_noise", sigmoid_noise, 0),
                    ("score_bias_init", score_bias_init, 0),
                    ("seed", seed, None),
                    ("probability_fn", probability_fn, "softmax"),
                )
                if value is not default and value != default
            ]
            if given:
                raise ValueError(
                    f"{owner}: with `mechanisms`, each `AttentionMechanism` has its own scores; "
                    f"got {', '.join(given)} for the wrapper (give them to the mechanisms)."
                )
        self.attention_layer = self._checked_attention_layer(attention_layer, count, owner)
        self._attention_layer_widths = None
        self.cell_state_sizes = flat_state_sizes(cell.state_size)
        self.cell_output_size = cell_output_size(cell)
        self.init_scores(
            score,
            attention_units,
            normalize,
            scale,
            kernel_initializer,
            monotonic_mode,
            sigmoid_noise,
            score_bias_init,
            seed,
            probability_fn,
        )
        self.attention_units = self.attention_units or self.cell_output_size
        if count and isinstance(attention_size, (list, tuple)):
            if len(attention_size) != count:
                raise ValueError(
                    f"{owner}: `attention_size` must be one width per mechanism ({count}); got "
                    f"attention_size={attention_size!r}."
                )
            sizes = [check.check_int("attention_size", s, 1, owner) for s in attention_size]
        else:
            if isinstance(attention_size, (list, tuple)):
                raise TypeError(
                    f"{owner}: `attention_size` must be an integer; a list of one width per "
                    "mechanism needs `mechanisms` (one AttentionMechanism per memory); got "
                    f"attention_size={attention_size!r}."
                )
            size = check.check_optional_int("attention_size", attention_size, 1, owner)
            sizes = [size or self.cell_output_size] * (count or 1)
        self.attention_sizes = sizes
        self.attention_size = sum(sizes)
        if attention_size is not None and not (
            isinstance(attention_layer, str) and attention_layer == "luong"
        ):
            raise ValueError(
                f"{owner}: `attention_size` is the width of Luong's attention layer; got "
                f"attention_size={attention_size!r} with attention_layer={attention_layer!r}, "
                "whose width is the memory's ('context') or the layer's output's."
            )
        if attention_size is not None and not self.uses_attention_kernel:
            where = " and position='before'" if self.position == "before" else ""
            raise ValueError(
                f"{owner}: `attention_size` is the width of the attention vector, which the "
                f"step never computes with output_attention=False{where}; got "
                f"attention_size={attention_size!r}."
            )
        if not isinstance(attention_layer, str) and not (
            self.output_attention or self.position == "after"
        ):
            raise ValueError(
                f"{owner}: `attention_layer` computes the attention vector, which the step "
                "never computes with output_attention=False and position='before' (the "
                "step outputs the cell's h_t); got "
                f"attention_layer={attention_layer!r}."
            )
        self.memory_dim = None
        self.memory_length = None
        self._memory_dims = None
        self._memory_lengths = None
        self._bound = None

    @staticmethod
    def _checked_mechanisms(mechanisms, owner):
        if mechanisms is None:
            return None
        if not isinstance(mechanisms, (list, tuple)) or not mechanisms:
            raise TypeError(
                f"{owner}: `mechanisms` must be a non-empty list of AttentionMechanism layers, "
                f"got {mechanisms!r}."
            )
        for index, mechanism in enumerate(mechanisms):
            if not isinstance(mechanism, AttentionMechanism):
                raise TypeError(
                    f"{owner}: `mechanisms[{index}]` must be an AttentionMechanism, got "
                    f"{mechanism!r}."
                )
        if len({id(mechanism) for mechanism in mechanisms}) != len(mechanisms):
            raise ValueError(
                f"{owner}: `mechanisms` holds one AttentionMechanism more than once; give each "
                "its own (a shared one would share its weights and monotonic state)."
            )
        return list(mechanisms)

    @staticmethod
    def _checked_attention_layer(attention_layer, count, owner):
        if isinstance(attention_layer, str):
            return check.check_choice("attention_layer", attention_layer, ATTENTION_LAYERS, owner)
        if count and isinstance(attention_layer, (list, tuple)):
            if len(attention_layer) != count or not all(
                isinstance(layer, keras.layers.Layer) for layer in attention_layer
            ):
                raise TypeError(
                    f"{owner}: with {count} mechanisms, `attention_layer` must be 'luong', "
                    f"'context' or a list of {count} Keras layers (one per mechanism), got "
                    f"{attention_layer!r}."
                )
            return list(attention_layer)
        if count or not isinstance(attention_layer, keras.layers.Layer):
            layers = f"a list of {count} Keras layers" if count else "a Keras layer"
            raise TypeError(
                f"{owner}: `attention_layer` must be 'luong', 'context' or {layers}, got "
                f"{attention_layer!r}."
            )
        return attention_layer

    def scorers(self):
        """The list of what scores the memories: the `mechanisms`, or the wrapper itself (its
        own score arguments) where none are given. (A method: Keras's saving walks a layer's
        attributes, and the wrapper is not its own sublayer.)"""
        return self.mechanisms or [self]

    @property
    def memory_dims(self):
        """The memories' widths, one per mechanism (once built)."""
        if not self.mechanisms:
            return [self.memory_dim]
        return self._memory_dims or [None] * len(self.mechanisms)

    @property
    def memory_lengths(self):
        """The memories' lengths, one per mechanism, where known when built (`None` where not
        needed: without alignments in the outputs or the states)."""
        if not self.mechanisms:
            return [self.memory_length]
        return self._memory_lengths or [None] * len(self.mechanisms)

    @property
    def state_descriptions(self):
        """A ``(name, what gives its width)`` pair per state, for the messages of a bad state
        (a call's, or an `AttentionRNN`'s ``initial_state``)."""
        size = "the cell's state size"
        described = [(f"cell state {i}", size) for i in range(len(self.cell_state_sizes))]
        fed = "the attention's width" if self.position == "after" else "the cell's output size"
        described.append(("fed-back attention", fed))
        offset = ("alignments minus the initial one-hot", "the memory's length")
        return described + [offset] * len(self.monotonic_lengths)

    @property
    def monotonic_lengths(self):
        """The widths of the alignment states: each monotonic mechanism's memory length."""
        pairs = zip(self.scorers(), self.memory_lengths)
        return [length for scorer, length in pairs if scorer.monotonic_mode]

    def noise_widths(self, training):
        """The columns of noise each mechanism reads, drawn before a loop (`AttentionRNN`): its
        memory's length where its monotonic scores get noise in ``training``, else 0."""
        return [
            length if training and scorer.monotonic_mode and scorer.sigmoid_noise > 0 else 0
            for scorer, length in zip(self.scorers(), self.memory_lengths)
        ]

    def check_memories(self, memories, masks, inputs, inputs_name, owner):
        """Checks a call's memories and masks (one of each per mechanism, `per_mechanism`):
        each memory ``[batch, length, width]`` of the width it was built with (and its length,
        where the layer fixed it when built), each mask `None` or ``[batch, length]`` of its
        memory, both of the batch of ``inputs`` (a batch size that is not known when traced:
        TensorFlow checks it as the step runs); a `ValueError` names the first that is not."""
        widths, lengths = self.memory_dims, self.memory_lengths
        for index, (memory, mask, width, length) in enumerate(
            zip(memories, masks, widths, lengths)
        ):
            suffix = f"[{index}]" if self.mechanisms else ""
            shape = check.shape_of(memory)
            if len(shape) != 3 or shape[-1] != width:
                raise ValueError(
                    f"{owner}: `memory{suffix}` must be [batch, length, {width}] (the width it "
                    f"was built with); got shape {shape}."
                )
            if length is not None and shape[1] not in (None, length):
                raise ValueError(
                    f"{owner}: `memory{suffix}` must be [batch, {length}, {width}] (the length "
                    "the cell was built with: its alignments over the memory are outputs or "
                    f"states); got shape {shape}."
                )
            check.check_batch(f"memory{suffix}", memory, inputs_name, inputs, owner)
            if mask is None:
                continue
            check.check_batch(f"memory_mask{suffix}", mask, inputs_name, inputs, owner)
            mask_shape = check.shape_of(mask)
            if mask_shape != shape[:2] and None not in mask_shape:
                raise ValueError(
                    f"{owner}: `memory_mask{suffix}` must be [batch, length] = {shape[:2]}, its "
                    f"memory's; got shape {mask_shape}."
                )

    def per_mechanism(self, value, name, owner):
        """``value`` (a memory, a mask) as a list of one per mechanism: a list or tuple as
        given, one tensor (or `None`) for every mechanism; ``[value]`` without `mechanisms`."""
        if not self.mechanisms:
            if isinstance(value, (list, tuple)):
                raise ValueError(
                    f"{owner}: `{name}` must be one tensor; a list of one per memory needs "
                    f"`mechanisms` (one AttentionMechanism per memory); got a list of {len(value)}."
                )
            return [value]
        count = len(self.mechanisms)
        if isinstance(value, (list, tuple)):
            if len(value) != count:
                raise ValueError(
                    f"{owner}: `{name}` must be one per mechanism ({count}) or one for all; got "
                    f"a list of {len(value)}."
                )
            return list(value)
        return [value] * count

    def _one_or_list(self, values):
        """``values`` (one per mechanism) as the wrapper's calls take them: the list with
        `mechanisms`, else its one entry."""
        return list(values) if self.mechanisms else values[0]

    @property
    def attention_width(self):
        """The width of the attention vector: ``attention_size`` (Luong's layer), the memory's
        (the context) or the output's of your layer (once built); with `mechanisms`, the sum
        of each mechanism's."""
        if isinstance(self.attention_layer, (list, keras.layers.Layer)):
            return (
                None if self._attention_layer_widths is None else sum(self._attention_layer_widths)
            )
        if self.attention_layer == "luong":
            return self.attention_size
        return None if self.memory_dims[0] is None else sum(self.memory_dims)

    @property
    def feedback_size(self):
        """The width of the fed-back state (the cell's state after its own)."""
        return self.attention_width if self.position == "after" else self.cell_output_size

    @property
    def query_size(self):
        """The width of the query the scores read (the cell's output)."""
        return self.cell_output_size

    def fed_input_size(self):
        """The width joined to the step's input before the cell (once the memory's width is
        known): the previous attention vector (``"after"``, input feeding) or the context
        (``"before"``)."""
        if self.position == "before":
            return sum(self.memory_dims)
        return self.feedback_size if self.input_feeding else 0

    @property
    def uses_attention_kernel(self):
        """Whether the step computes the attention vector with Luong's layer
        (``attention_kernel``)."""
        luong = isinstance(self.attention_layer, str) and self.attention_layer == "luong"
        return luong and (self.output_attention or self.position == "after")

    @property
    def feeds_back(self):
        """Whether a step's attention reaches the next step: the context joins the cell's
        input (``position="before"``), the previous attention vector does (input feeding),
        or the monotonic attention starts from the previous alignments. Where none does,
        `AttentionRNN` runs the wrapped cell's loop alone and attends for all steps at once
        after it (`attend_steps`; see `attends_after_the_loop`)."""
        monotonic = any(scorer.monotonic_mode for scorer in self.scorers())
        return self.position == "before" or self.input_feeding or monotonic

    @property
    def state_size(self):
        """The widths of the states, flat: the wrapped cell's, the fed-back vector's, then
        each monotonic mechanism's previous alignments' (as long as its memory). A width that
        the memory sets (the fed-back vector's with ``attention_layer="context"``, the
        alignments') is `None` until the wrapper is built."""
        return [*self.cell_state_sizes, self.feedback_size, *self.monotonic_lengths]

    def get_initial_state(self, batch_size=None):
        """The state a sequence starts from, laid out as `state_size`: the wrapped cell's own
        (from its ``get_initial_state`` where it has one, else zeros), a zero fed-back vector,
        and zeros for monotonic attention's previous alignments (its state holds them minus
        the one-hot at the first memory vector).

        Args:
            batch_size: Integer, the number of rows.

        Returns:
            A list of ``[batch_size, width]`` tensors of the compute dtype, one per state.

        Raises:
            ValueError: If a width that the memory sets is not known yet: the wrapper is not
                built (build it with the memory's shape, or call it once).
        """
        sizes = self.state_size
        if None in sizes:
            raise ValueError(
                f"{check.owner_of(type(self).__name__)}: the state's widths {sizes} are known "
                "once the wrapper is built, as the memory sets some of them: build it first "
                "(`cell.build(inputs_shape, memory_shape)`, or call it once with a memory)."
            )
        count = len(self.cell_state_sizes)
        zeros = [ops.zeros((batch_size, size), self.compute_dtype) for size in sizes]
        own = getattr(self.cell, "get_initial_state", None)
        if own is None:
            return zeros
        return [*keras.tree.flatten(own(batch_size=batch_size)), *zeros[count:]]

    @property
    def output_size(self):
        size = self._attended_width()
        if not self.return_attention_scores:
            return size
        # With the alignments, each step's output is [output, weights over the memories].
        lengths = self.memory_lengths
        if size is None or None in lengths:
            owner = check.owner_of(type(self).__name__)
            raise ValueError(
                f"{owner}: `output_size` with return_attention_scores=True is known once the "
                "wrapper is built: it adds each memory's length to the output's width."
            )
        return size + sum(lengths)

    def _attended_width(self):
        """The width of each step's output before the alignments."""
        return self.attention_width if self.output_attention else self.cell_output_size

    def build(self, inputs_shape, memory_shape=None):
        owner = check.owner_of(type(self).__name__)
        listed = isinstance(memory_shape, (list, tuple)) and all(
            isinstance(shape, (list, tuple)) for shape in memory_shape
        )
        shapes = self.per_mechanism(list(memory_shape) if listed else None, "memory", owner)
        shapes = shapes if listed else [memory_shape] * len(shapes)
        dims, lengths = [], []
        for index, (scorer, shape) in enumerate(zip(self.scorers(), shapes)):
            name = f"memory[{index}]" if self.mechanisms else "memory"
            if shape is None:
                raise ValueError(
                    f"{owner}: no `{name}` shape to build with: the wrapper is built from the "
                    "memory it attends over, which `keras.layers.RNN` does not pass. Run it "
                    "with `AttentionRNN` (`AttentionRNN(cell)(inputs, memory=...)`), or in a "
                    "loop of your own with `memory=` at every call."
                )
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(
                    f"{owner}: `{name}` must be a 3D tensor [batch, length, memory_dim] with a "
                    f"known memory_dim; got shape {shape}."
                )
            dims.append(int(shape[-1]))
            lengths.append(None)
            if self.return_attention_scores or scorer.monotonic_mode:
                if shape[1] is None:
                    why = (
                        "monotonic_mode: the previous alignments over it are a state"
                        if scorer.monotonic_mode
                        else "return_attention_scores=True: each step outputs its weights over it"
                    )
                    raise ValueError(
                        f"{owner}: the length of `{name}` must be known when the layer is built "
                        f"({why}); got shape {tuple(shape)}. Pad the memory to a fixed length."
                    )
                lengths[-1] = int(shape[1])
        query = self.query_size
        if self.mechanisms:
            self._memory_dims, self._memory_lengths = dims, lengths
            for mechanism, dim in zip(self.mechanisms, dims):
                if not mechanism.built:
                    mechanism.build((None, query), (None, None, dim))
        else:
            self.memory_dim, self.memory_length = dims[0], lengths[0]
            if self.score == "dot" and query != self.memory_dim:
                raise ValueError(
                    f"{owner}: score='dot' needs the query (the cell's output, {query} wide) as "
                    f"wide as the memory ({self.memory_dim}); use score='general' or 'additive'."
                )
            self.build_scores(query, self.memory_dim)
        if not isinstance(self.attention_layer, str):
            layers = self.attention_layer
            layers = layers if isinstance(layers, list) else [layers]
            widths = []
            for layer, dim in zip(layers, dims):
                joined = (None, dim + self.cell_output_size)
                if not layer.built:
                    layer.build(joined)
                widths.append(int(layer.compute_output_shape(joined)[-1]))
            self._attention_layer_widths = widths
        self.input_dim = int(inputs_shape[-1])  # a call's inputs are checked against it
        # The wrapped cell's inputs (and its dropout masks') join what the attention feeds.
        self.cell_input_dim = self.input_dim + self.fed_input_size()
        if not self.cell.built:
            self.cell.build((inputs_shape[0], self.cell_input_dim))
        if self.uses_attention_kernel:
            for name, dim, size in zip(self._attention_kernel_names(), dims, self.attention_sizes):
                kernel = self.add_weight(
                    name=name,
                    shape=(dim + self.cell_output_size, size),
                    initializer=for_one_weight(self.kernel_initializer),
                )
                setattr(self, name, kernel)
        self.built = True

    def _attention_kernel_names(self):
        """Luong's kernel, ``attention_kernel``; with `mechanisms`, one per mechanism."""
        if not self.mechanisms:
            return ["attention_kernel"]
        return [f"attention_kernel_{index}" for index in range(len(self.mechanisms))]

    def _attention_kernels(self):
        return [getattr(self, name) for name in self._attention_kernel_names()]

    def _attention_layers(self):
        layers = self.attention_layer
        return layers if isinstance(layers, list) else [layers] * len(self.scorers())

    def attention_vector(self, context, output):
        r"""The attention vector of the ``context`` and the cell's ``output``: Luong's
        :math:`\tanh(W_c [c_t; h_t])`, the context, or your layer of :math:`[c_t; h_t]`; with
        `mechanisms` (``context`` a list, one per mechanism), each mechanism's, joined."""
        contexts = context if self.mechanisms else [context]
        vectors = []
        for index, (each, layer) in enumerate(zip(contexts, self._attention_layers())):
            if isinstance(layer, keras.layers.Layer):
                vectors.append(layer(ops.concatenate([each, output], -1)))
            elif layer == "context":
                vectors.append(each)
            else:
                kernel = self._attention_kernels()[index]
                vectors.append(ops.tanh(ops.matmul(ops.concatenate([each, output], -1), kernel)))
        return vectors[0] if len(vectors) == 1 else ops.concatenate(vectors, -1)

    def attend_all(self, query, memory, keys, memory_mask, training, previous=None, noise=None):
        """Each mechanism's ``(context, weights)`` for ``query``: the attention (``attend``) of
        the wrapper's own scores, or, with `mechanisms` (the memories, keys, masks, previous
        alignments and noise lists of one per mechanism), two lists."""
        if not self.mechanisms:
            return self.attend(query, memory, keys, memory_mask, previous, training, noise)
        count = len(self.mechanisms)
        previous = previous if previous is not None else [None] * count
        noise = noise if noise is not None else [None] * count
        results = [
            mechanism.attend(
                query, each_memory, each_keys, each_mask, before, training=training, noise=drawn
            )
            for mechanism, each_memory, each_keys, each_mask, before, drawn in zip(
                self.mechanisms, memory, keys, memory_mask, previous, noise
            )
        ]
        return [context for context, _ in results], [weights for _, weights in results]

    def attends_after_the_loop(self):
        """Whether `attend_steps` gives every step's attention after the loop: none of it feeds
        back (`feeds_back` is false), and a step attends as this class and
        `AttentionMechanism` do (a subclass that overrides ``attend``, ``attention_vector``,
        ``attend_all``, ``step`` or ``call``, which `attend_steps` does not call, steps in the
        loop)."""
        methods = ("call", "step", "attend_all", "attention_vector")
        own = all(getattr(type(self), n) is getattr(AttentionWrapper, n) for n in methods)
        scorers = all(type(s).attend is ScoredAttention.attend for s in self.scorers())
        return not self.feeds_back and own and scorers

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
            memory: Tensor ``[batch, length, memory_dim]``, padding zeroed (with
                `mechanisms`, a list of one per mechanism; so are ``keys`` and
                ``memory_mask``).
            keys: The memory's keys (``memory`` times the score's memory kernel; for
                ``"dot"``, the memory itself).
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

        memories, all_keys = (
            self.per_mechanism(memory, "memory", ""),
            self.per_mechanism(keys, "keys", ""),
        )
        masks = self.per_mechanism(memory_mask, "memory_mask", "")
        attentions, all_weights = [], []
        for index, (scorer, memory, keys, memory_mask) in enumerate(
            zip(self.scorers(), memories, all_keys, masks)
        ):
            if scorer.score == "additive":
                query = ops.matmul(outputs, weight(scorer.query_kernel))  # [b, t, units]
                hidden = ops.expand_dims(keys, 1) + ops.expand_dims(query, 2)  # [b, t, L, units]
                vector = weight(scorer.score_vector)
                if scorer.normalize:
                    hidden = hidden + weight(scorer.score_bias)
                    norm = ops.sqrt(ops.sum(ops.square(vector)))
                    vector = weight(scorer.score_norm) * vector / norm
                scores = dot_last_axis(ops.tanh(hidden), vector)
            else:
                scores = ops.matmul(outputs, ops.transpose(keys, (0, 2, 1)))  # [b, t, L]
                if scorer.scale:
                    scores = weight(scorer.score_scale) * scores
            mask = None if memory_mask is None else ops.expand_dims(memory_mask, 1)
            weights = masked_probabilities(scores, mask, scorer.probability_fn)
            context = ops.matmul(ops.cast(weights, memory.dtype), memory)  # [b, t, memory_dim]
            layer = self._attention_layers()[index]
            if self.uses_attention_kernel:
                kernel = weight(self._attention_kernels()[index])
                attention = ops.tanh(ops.matmul(ops.concatenate([context, outputs], -1), kernel))
            elif isinstance(layer, keras.layers.Layer):  # your layer casts its own weights
                attention = layer(ops.concatenate([context, outputs], -1))
            else:
                attention = context
            attentions.append(attention)
            all_weights.append(ops.cast(weights, dtype))
        attention = attentions[0] if len(attentions) == 1 else ops.concatenate(attentions, -1)
        step_outputs = attention if self.output_attention else outputs
        if self.return_attention_scores:
            step_outputs = ops.concatenate([step_outputs, *all_weights], -1)
        return step_outputs, attention

    def call(
        self, inputs, states, memory=None, memory_mask=None, training=None, reset=None, keys=None
    ):
        owner = type(self).__name__
        noise = None
        if memory is None and self._bound is not None:
            # Inside `AttentionRNN`'s loop: the memory of the running call, keys precomputed.
            memories, masks, all_keys, widths = self._bound
            if any(widths):  # the step's noise, drawn by `AttentionRNN` before its loop
                starts = [sum(widths[:index]) for index in range(len(widths))]
                columns = inputs[:, inputs.shape[-1] - sum(widths) :]
                noise = [
                    columns[:, start : start + width] if width else None
                    for start, width in zip(starts, widths)
                ]
                inputs = inputs[:, : inputs.shape[-1] - sum(widths)]
        else:
            if memory is None:
                raise ValueError(
                    f"{owner}: no `memory` given: pass the vectors to attend over, [batch, "
                    "length, memory_dim], at every call (`keras.layers.RNN` passes none: run "
                    "the wrapper with `AttentionRNN`)."
                )
            memories = self.per_mechanism(memory, "memory", owner)
            masks = self.per_mechanism(memory_mask, "memory_mask", owner)
            all_keys = self.per_mechanism(keys, "keys", owner)
        # Flat, as the states are checked: `[[h, c], attention]` (the cell's states nested, as
        # tensorflow-addons' `clone(cell_state=...)` held them) is `[h, c, attention]`.
        states = keras.tree.flatten(states)
        if self._bound is None:
            # (Inside `AttentionRNN`'s loop the layer has checked its call once.)
            check.check_step(
                inputs, states, self.state_size, self.input_dim, owner, self.state_descriptions
            )
            self.check_memories(memories, masks, inputs, "inputs", owner)
        # Keras casts a call's first input to the compute dtype, not its keyword arguments.
        memories = [ops.cast(memory, self.compute_dtype) for memory in memories]
        if reset is not None:
            reset = check_reset(reset, tuple(inputs.shape)[:1], owner)
            states = zero_where(reset, states)
        for index, (scorer, memory, memory_mask) in enumerate(zip(self.scorers(), memories, masks)):
            if all_keys[index] is None:
                if memory_mask is not None:
                    mask = ops.expand_dims(ops.cast(memory_mask, "bool"), -1)
                    memories[index] = ops.where(mask, memory, ops.zeros_like(memory))
                all_keys[index] = scorer.memory_keys(memories[index])
        count = len(self.cell_state_sizes)
        offsets = iter(states[count + 1 :])  # the alignment states, minus the initial one-hot
        previous = []
        for scorer in self.scorers():
            offset = next(offsets) if scorer.monotonic_mode else None
            previous.append(None if offset is None else offset + self.initial_alignments(offset))
        monotonic = {}
        if any(p is not None for p in previous):
            monotonic["previous"] = self._one_or_list(previous)
        if noise is not None:
            monotonic["noise"] = self._one_or_list(noise)
        step_output, weights, new_cell_states, feedback = self.step(
            inputs,
            states[:count],
            states[count],
            self._one_or_list(memories),
            self._one_or_list(all_keys),
            self._one_or_list(masks),
            training,
            **monotonic,
        )
        new_states = [*new_cell_states, feedback]
        all_weights = weights if self.mechanisms else [weights]
        for before, each in zip(previous, all_weights):
            if before is not None:
                alignments = ops.cast(each, before.dtype)
                new_states.append(alignments - self.initial_alignments(alignments))
        if self.return_attention_scores:
            joined = [ops.cast(each, step_output.dtype) for each in all_weights]
            step_output = ops.concatenate([step_output, *joined], -1)
        return step_output, new_states

    def step(self, inputs, cell_states, fed, memory, keys, memory_mask, training, **monotonic):
        """One step after the resets: ``(output, weights over the memory, the cell's new
        states, the new fed-back vector)``; ``monotonic``: the ``previous`` alignments of
        monotonic attention, and its ``noise`` where drawn already. With `mechanisms`, the
        memories, keys, masks, previous alignments, noise and weights are lists of one per
        mechanism."""
        memories = (memory, keys, memory_mask)
        if self.position == "after":
            cell_inputs = ops.concatenate([inputs, fed], -1) if self.input_feeding else inputs
            output, new_cell_states = call_cell(self.cell, cell_inputs, cell_states, training)
            context, weights = self.attend_all(output, *memories, training, **monotonic)
            attention = self.attention_vector(context, output)
            feedback = attention
        else:
            context, weights = self.attend_all(fed, *memories, training, **monotonic)
            contexts = context if self.mechanisms else [context]
            output, new_cell_states = call_cell(
                self.cell, ops.concatenate([inputs, *contexts], -1), cell_states, training
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
                "position": self.position,
                "attention_size": self.attention_size if self.uses_attention_kernel else None,
                "output_attention": self.output_attention,
                "return_attention_scores": self.return_attention_scores,
                "input_feeding": self.input_feeding,
            }
        )
        if self.mechanisms:
            serialize = keras.saving.serialize_keras_object
            config["mechanisms"] = [serialize(mechanism) for mechanism in self.mechanisms]
            config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
            if self.uses_attention_kernel:
                config["attention_size"] = list(self.attention_sizes)
        else:
            config.update(self.scores_config())
        if isinstance(self.attention_layer, list):
            config["attention_layer"] = [
                keras.saving.serialize_keras_object(layer) for layer in self.attention_layer
            ]
        elif isinstance(self.attention_layer, keras.layers.Layer):
            config["attention_layer"] = keras.saving.serialize_keras_object(self.attention_layer)
        elif self.attention_layer != "luong":
            config["attention_layer"] = self.attention_layer
        return config

    @classmethod
    def from_config(cls, config):
        config = with_deserialized_cell(config)
        unused = config.get("position") == "before" and config.get("output_attention") is False
        if unused and not isinstance(config.get("attention_layer", ""), str):
            # A layer of the attention vector, which that step never computes, is left out.
            del config["attention_layer"]
        for name in ("probability_fn", "attention_layer", "mechanisms"):
            value = config.get(name)
            if isinstance(value, dict):
                config[name] = keras.saving.deserialize_keras_object(value)
            elif isinstance(value, list):
                config[name] = [keras.saving.deserialize_keras_object(each) for each in value]
        return cls(**config)
