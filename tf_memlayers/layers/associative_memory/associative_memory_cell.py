"""The generic AM-RNN of Weissenborn (2016, §3.2): any Keras cell whose state lives in a
holographic associative memory."""

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES, zero_reset_rows
from tf_memlayers.layers.memory_cell_wrapper import (
    RecomputedWithItsLayer,
    call_cell,
    cell_output_size,
    flat_state_sizes,
    step_output_spec,
    with_deserialized_cell,
)
from tf_memlayers.ops import holographic
from tf_memlayers.ops.holographic import PERMUTATION_SEED


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AssociativeMemoryCell(RecomputedWithItsLayer, keras.layers.Layer):
    r"""Wraps an RNN cell so that one of its states is kept in a redundant associative memory.

    The generic AM-RNN of Weissenborn (2016, §3.2). At each step, with ``h_{t-1}`` the
    previous output (fed back as input) and ``m`` the memory of ``C`` permuted copies (paper
    eqs. 8-12):

    .. math::

        \begin{aligned}
        r_t &= \operatorname{bound}(W_r [x_t ; h_{t-1}])
            && \text{eqs. 8-10, no bias} \\
        s_{t-1} &= \frac{1}{C} \sum_{c=1}^{C} \overline{P_c r_t} \circledast m_c
            && \text{eq. 8 with copies (eq. 5)} \\
        s_t, h_t &= \operatorname{cell}([x_t ; h_{t-1}], s_{t-1})
            && \text{eq. 11} \\
        m_c &\leftarrow m_c + (P_c r_t) \circledast (s_t - s_{t-1})
            && \text{eq. 12}
        \end{aligned}

    The state kept in memory is the cell's state ``memory_state_index``: by default the carry
    ``c`` of a `keras.layers.LSTMCell` (index 1, ``h`` is then carried as a plain state) and
    state 0 of any other cell (e.g. `keras.layers.GRUCell`, user cells). Its size must be even.
    The cell's other states are carried unchanged through the step as usual. A cell with
    ``dropout`` or ``recurrent_dropout`` trains in `ResettableRNN`, which draws its masks (as
    wide as :math:`[x_t; h_{t-1}]`) before the loop; `keras.layers.RNN` draws none for a cell
    inside a wrapper, and training the cell there is a ``ValueError``.

    Args:
        cell: A Keras RNN cell (``call(inputs, states)``, ``state_size`` an int or a list,
            nested as in `keras.layers.StackedRNNCells` or flat; ``output_size`` optional).
        num_copies: Positive integer, the number ``C`` of redundant permuted memory copies.
            Default: `8`.
        seed: Integer, the seed of the random permutations of the copies. Default: `123`.
        memory_state_index: Optional non-negative integer, which of the cell's states lives
            in memory, counted in the flattened list of its states. Default: `None` (1 for a
            `keras.layers.LSTMCell`, 0 for any other cell; see above).
        return_retrievals: Boolean, (default `False`), whether the output is
            ``[h_t, s_t - s_{t-1}, s_{t-1}]``: the cell output, what was written to memory
            and what was read from it.
        key_initializer: Initializer for the ``key_kernel`` weights matrix ``W_r``.
            Default: `"glorot_uniform"`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 2D tensor, with shape ``[batch, input_dim]``.
        states: List of tensors ``[memory [batch, M * C], previous output [batch,
            output_size], *the cell's other states]``, with ``M`` the size of the memory
            state.
        training: Python boolean, passed to the wrapped cell. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new document
            at this step: every state of those rows (the memory, the previous output and the
            wrapped cell's other states) is set to zero before the step, so the wrapped cell
            starts from the zero state that `keras.layers.RNN` gives a new sequence. Run the
            cell with `ResettableRNN` to reset rows inside a sequence.
            Default: `None` (no row).

    Returns:
        Tuple ``(output, new_states)``: the wrapped cell's output ``h_t`` ``[batch,
        output_size]`` (with ``return_retrievals=True``, ``[h_t, s_t - s_{t-1}, s_{t-1}]``,
        ``[batch, output_size + 2 * M]``) and the list of new states ``[memory [batch,
        M * C], h_t [batch, output_size], *the cell's other new states]``.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import AssociativeMemoryCell
    >>> cell = AssociativeMemoryCell(keras.layers.LSTMCell(6), num_copies=4)
    >>> outputs = keras.layers.RNN(cell)(np.ones((2, 5, 3), "float32"))
    >>> tuple(outputs.shape)
    (2, 6)
    """

    def __init__(
        self,
        cell,
        num_copies=NUM_COPIES,
        seed=PERMUTATION_SEED,
        memory_state_index=None,
        return_retrievals=False,
        key_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = type(self).__name__
        if not (hasattr(cell, "call") and hasattr(cell, "state_size")):
            raise TypeError(f"{owner}: `cell` must be a Keras RNN cell, got {cell!r}.")
        self.cell = cell
        self.num_copies = check.check_int("num_copies", num_copies, 1, owner)
        self.seed = check.check_int("seed", seed, None, owner)
        sizes = flat_state_sizes(cell.state_size)
        if memory_state_index is None:
            memory_state_index = 1 if isinstance(cell, keras.layers.LSTMCell) else 0
        self.memory_state_index = check.check_int(
            "memory_state_index", memory_state_index, 0, owner
        )
        if self.memory_state_index >= len(sizes):
            raise ValueError(
                f"{owner}: `memory_state_index` must be < {len(sizes)} (the cell's number of "
                f"states), got {self.memory_state_index}."
            )
        self.memory_units = check.check_even(
            f"cell.state_size[{self.memory_state_index}]",
            sizes[self.memory_state_index],
            "the memory stores complex halves",
            owner,
        )
        self.return_retrievals = check.check_bool("return_retrievals", return_retrievals, owner)
        self.key_initializer = check.check_keras_object("key_initializer", key_initializer, owner)
        self._cell_output_size = cell_output_size(cell)
        self._other_sizes = [s for i, s in enumerate(sizes) if i != self.memory_state_index]
        self.state_size = [self.memory_units * self.num_copies, self._cell_output_size]
        self.state_size += self._other_sizes
        self.output_size = self._cell_output_size + (
            2 * self.memory_units if self.return_retrievals else 0
        )
        drawn = holographic.make_permutations(self.memory_units // 2, self.num_copies, self.seed)
        self._permutations = tuple(map(tuple, drawn))
        self._permutation_matrix = holographic.permutation_constant(self._permutations)

    @property
    def permutations(self):
        """The copies' permutations: ``num_copies`` tuples of half the memory's width in
        indices, copy 0 the identity, drawn from ``seed`` (another ``seed`` gives others).
        Read-only: every path of the cell permutes by them."""
        return self._permutations

    def build(self, input_shape):
        input_dim = check.check_last_dim("inputs", input_shape, type(self).__name__)
        self.input_dim = input_dim  # a call's inputs are checked against it
        controller_dim = input_dim + self._cell_output_size
        self.cell_input_dim = controller_dim  # the wrapped cell's (its dropout masks')
        if not self.cell.built:
            self.cell.build((input_shape[0], controller_dim))
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(controller_dim, self.memory_units),
            initializer=self.key_initializer,
        )

    def _key_copies(self, controller):
        key = ops.matmul(controller, self.key_kernel)
        return holographic.bounded_copies(key, self._permutation_matrix, self.num_copies)

    def call(self, inputs, states, training=None, reset=None):
        owner = type(self).__name__
        check.check_step(inputs, states, self.state_size, self.input_dim, owner)
        states = zero_reset_rows(owner, inputs, states, reset)
        memory, previous_output, others = states[0], states[1], list(states[2:])
        controller = ops.concatenate([inputs, previous_output], axis=1)
        copies_re, copies_im = self._key_copies(controller)
        memory_re, memory_im = holographic.split_memory(memory, self.num_copies)
        retrieved = holographic.uncomplexify(
            *holographic.read_memory_parts(copies_re, copies_im, memory_re, memory_im)
        )
        cell_states = others[: self.memory_state_index] + [retrieved]
        cell_states += others[self.memory_state_index :]
        output, new_cell_states = call_cell(self.cell, controller, cell_states, training)
        written = new_cell_states[self.memory_state_index] - retrieved
        new_memory = holographic.write_memory(copies_re, copies_im, memory_re, memory_im, written)
        new_others = [s for i, s in enumerate(new_cell_states) if i != self.memory_state_index]
        new_states = [new_memory, output, *new_others]
        if self.return_retrievals:
            output = ops.concatenate([output, written, retrieved], axis=1)
        return output, new_states

    def compute_output_spec(self, inputs, states, training=None, reset=None):
        zero_reset_rows(type(self).__name__, inputs, [], reset)  # checks ``reset``
        return step_output_spec(self, inputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "num_copies": self.num_copies,
                "seed": self.seed,
                "memory_state_index": self.memory_state_index,
                "return_retrievals": self.return_retrievals,
                "key_initializer": keras.initializers.serialize(self.key_initializer),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_deserialized_cell(config))
