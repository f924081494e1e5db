"""`ResettableCell` and `ResettableRNN`: in-graph per-row resets for any Keras RNN cell.

See `tf_memlayers.layers.resets` for what a reset means. `ResettableRNN` runs Keras's own
loop with each step's reset flag riding along as an extra input column; `scan_loop` is the
same loop written with `keras.ops.scan`, for layers that keep TensorFlow's masking on the
other backends.
"""

import contextlib

import keras
from keras import ops

from tf_memlayers._validation import (
    called_as,
    check_bool,
    check_mask_shape,
    check_rank,
    check_same_batch,
    check_states,
    check_step,
    check_time_steps,
    owner_of,
    shape_of,
)
from tf_memlayers.layers.memory_cell_wrapper import (
    RecomputedWithItsLayer,
    RematerializedByPosition,
    cell_output_size,
    check_dropout_masks,
    flat_state_sizes,
    mark_dropout_masks,
    step_runner,
    takes_training,
    with_deserialized_cell,
)
from tf_memlayers.layers.resets import check_reset, takes_reset, zero_where

# The boolean arguments of `keras.layers.RNN`.
RNN_FLAGS = (
    "return_sequences",
    "return_state",
    "go_backwards",
    "stateful",
    "unroll",
    "zero_output_for_mask",
)


def _one_tensor(shape):
    """Whether ``shape`` is one tensor's, not a structure's (a cell with nested inputs)."""
    return not shape or not keras.tree.is_nested(shape[0])


@keras.saving.register_keras_serializable(package="tf_memlayers")
class ResettableCell(RecomputedWithItsLayer, keras.layers.Layer):
    """Any Keras RNN cell, with a ``reset`` call argument that zeroes a row's states.

    Where ``reset`` is true the cell's states are set to zero before the step, so the row
    continues exactly as a new sequence (the zero initial state of `keras.layers.RNN`) would.
    No weights of its own; the wrapped cell's weights, states and output are the wrapper's.
    Run it with `ResettableRNN` to reset rows inside a sequence; `keras.layers.RNN` runs it
    as the plain cell, but for the dropout of a cell with ``dropout`` or
    ``recurrent_dropout``, whose masks `keras.layers.RNN` draws before its loop only for the
    Keras cells it sees, not for one inside this wrapper: train such a cell in `ResettableRNN`,
    which draws them (`keras.layers.RNN` training it is a ``ValueError``).

    Keras's own tests of `keras.layers.SimpleRNN`, `keras.layers.GRU` and `keras.layers.LSTM`
    (``simple_rnn_test.py``, ``gru_test.py`` and ``lstm_test.py`` of ``keras/src/layers/rnn/``)
    pass with each layer built as `keras.layers.RNN` over this wrapper of its cell, as the
    package's tests check on each backend, except those that train with dropout (see above)
    and the one of `keras.layers.GRU`'s own legacy config.

    Args:
        cell: A Keras RNN cell (e.g. `keras.layers.LSTMCell`, or
            `keras.layers.StackedRNNCells`), whose states are zero at the start of a
            sequence.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 2D tensor ``[batch, features]``, the input of the step.
        states: The wrapped cell's states.
        training: Python boolean, passed to the wrapped cell. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows whose states start again
            at this step. Default: `None` (no row).

    Returns:
        What the wrapped cell returns for the step, ``(output, new_states)``, computed from
        states zeroed in the ``reset`` rows.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import ResettableCell
    >>> cell = ResettableCell(keras.layers.GRUCell(3))
    >>> x = np.ones((2, 4), "float32")
    >>> _, states = cell(x, [np.ones((2, 3), "float32")], reset=np.array([True, False]))
    >>> fresh, _ = cell(x, [np.zeros((2, 3), "float32")])
    >>> bool(keras.ops.all(keras.ops.isclose(states[0][0], fresh[0])))
    True
    """

    def __init__(self, cell, **kwargs):
        if kwargs.get("dtype") is None and isinstance(cell, keras.layers.Layer):
            # The states are the wrapped cell's, so is their dtype.
            kwargs["dtype"] = cell.dtype_policy
        super().__init__(**kwargs)
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(
                f"{owner_of('ResettableCell')}: `cell` must be a Keras RNN cell with a "
                f"`state_size`, got {cell!r}."
            )
        self.cell = cell

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self):
        return getattr(self.cell, "output_size", None)

    def build(self, input_shape):
        # A call's inputs are checked against it (one tensor's width: not a nested input's).
        self.input_dim = input_shape[-1] if _one_tensor(input_shape) else None
        if not self.cell.built:
            self.cell.build(input_shape)

    def get_initial_state(self, batch_size=None):
        initial = getattr(self.cell, "get_initial_state", None)
        if initial is not None:
            return initial(batch_size=batch_size)
        sizes = self.cell.state_size
        sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
        return [ops.zeros((batch_size, size), self.compute_dtype) for size in sizes]

    def call(self, inputs, states, training=None, reset=None):
        if getattr(self, "input_dim", None) is not None:
            sizes, owner = flat_state_sizes(self.cell.state_size), "ResettableCell"
            check_step(inputs, states, sizes, self.input_dim, owner)
        if reset is not None:
            reset = check_reset(reset, shape_of(inputs)[:1], "ResettableCell")
            states = zero_where(reset, states)
        check_dropout_masks(self.cell, training)
        kwargs = {"training": training} if takes_training(self.cell) else {}
        return step_runner(self.cell, inputs)(inputs, states, **kwargs)

    def get_config(self):
        config = super().get_config()
        config["cell"] = keras.saving.serialize_keras_object(self.cell)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_deserialized_cell(config))


def _wraps_a_cell(cell):
    """Whether ``cell`` is one of the package's wrappers (`ResettableCell`, the memory cells)
    around a Keras cell, whose dropout masks `keras.layers.RNN` does not prepare."""
    return not hasattr(cell, "get_dropout_mask") and hasattr(cell, "cell")


@contextlib.contextmanager
def dropout_masks(cell, step_inputs):
    """Draws the dropout masks of the Keras cells inside ``cell`` for one sequence of a loop of
    your own, and forgets them when the ``with`` block ends.

    A Keras cell with ``dropout`` or ``recurrent_dropout`` keeps one set of masks for every
    step of a sequence. `keras.layers.RNN` draws them before its loop for the cells it sees,
    and `ResettableRNN` and `AttentionRNN` for the cells inside the package's wrappers (the
    memory cells, `ResettableCell`, `AttentionWrapper`, `WordByWordAttention`); a wrapper
    called in training outside them refuses to run such a cell (a ``ValueError``), since its
    masks would be drawn inside the loop and outlive it. Step through a sequence in training
    inside this block: the masks are those the layers draw (as wide as the inputs each cell
    reads, in the same order from its seed generator), and the next block draws new ones. A
    block (or a layer's call) inside another on the same cell keeps the outer one's masks.
    Enter the block where the steps run: inside the `tf.function` or `jax.jit` that runs
    them, not around a compiled step function, which would keep the masks of the block it
    was traced in.

    Args:
        cell: A built RNN cell: one of the package's wrappers (its cells inside it, at any
            depth), a `keras.layers.StackedRNNCells`, or a Keras dropout cell.
        step_inputs: A 2D tensor or array ``[batch, features]``, one step's inputs to
            ``cell`` (only its shape is read: the masks take the cell's compute dtype).

    Raises:
        TypeError: ``cell`` is not an RNN cell.
        ValueError: ``cell`` is not built, or ``step_inputs`` is not 2D (one step, not a
            sequence).

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import SlidingWindowAttentionCell
    >>> import keras
    >>> from tf_memlayers import dropout_masks
    >>> cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(4, dropout=0.5), window=3)
    >>> x = np.ones((2, 5, 3), "float32")
    >>> states = [np.zeros((2, size), "float32") for size in cell.state_size]
    >>> cell.build(x[:, 0].shape)
    >>> with dropout_masks(cell, x[:, 0]):
    ...     for t in range(5):
    ...         output, states = cell(x[:, t], states, training=True)
    >>> tuple(output.shape)
    (2, 4)
    """
    if not hasattr(cell, "state_size") or not callable(cell):
        raise TypeError(f"dropout_masks: `cell` must be a Keras RNN cell, got {cell!r}.")
    check_rank("step_inputs", shape_of(step_inputs), 2, "dropout_masks")
    if not getattr(cell, "built", True):
        raise ValueError(
            f"dropout_masks: `cell` {cell.name!r} must be built (called once with "
            "training=False, or its `build` with the shapes its call reads: an "
            "AttentionWrapper's inputs and memory), so that its masks are as wide as the "
            "inputs of the cells inside it."
        )
    # The masks in the dtype the cell computes in, whatever the dtype of ``step_inputs``.
    step_inputs = ops.convert_to_tensor(step_inputs, getattr(cell, "compute_dtype", None))
    drawn = _draw_dropout_masks(cell, step_inputs)
    try:
        yield
    finally:
        _reset_dropout_masks(drawn)


def _draw_dropout_masks(cell, step_inputs):
    """Draws the dropout masks of ``cell`` (a dropout cell, a `keras.layers.StackedRNNCells`
    of them, or either inside the package's wrappers) for a call whose first step's inputs
    are ``step_inputs`` ``[batch, features]``, as `keras.layers.RNN` draws those of the cell
    it runs: once per call, before its loop, so every step of the call uses the same masks
    and the loop itself draws nothing (JAX traces it).

    Returns:
        List of the cells whose masks were drawn, for `_reset_dropout_masks`.
    """
    while _wraps_a_cell(cell):
        # The wrapped cell's inputs: as wide as the wrapper feeds it (``cell_input_dim``, set
        # when built: the memory cells join their own inputs to the step's).
        width = getattr(cell, "cell_input_dim", None)
        if width is not None:
            step_inputs = ops.zeros((ops.shape(step_inputs)[0], width), step_inputs.dtype)
        cell = cell.cell
    if hasattr(cell, "get_dropout_mask"):
        cell.get_dropout_mask(step_inputs)
        first_state = keras.tree.flatten(cell.state_size)[0]
        cell.get_recurrent_dropout_mask(
            ops.zeros((ops.shape(step_inputs)[0], first_state), cell.compute_dtype)
        )
        mark_dropout_masks([cell], drawn=True)
        return [cell]
    if not isinstance(cell, keras.layers.StackedRNNCells):
        return []
    drawn = []
    for inner in cell.cells:
        drawn += _draw_dropout_masks(inner, step_inputs)
        # The next cell's input is this one's output: only its shape and dtype matter here.
        step_inputs = ops.zeros(
            (ops.shape(step_inputs)[0], cell_output_size(inner)),
            getattr(inner, "compute_dtype", None),
        )
    return drawn


def _reset_dropout_masks(cells):
    """Forgets the masks that `_draw_dropout_masks` drew for ``cells``, unless an outer loop
    still uses them."""
    for cell in mark_dropout_masks(cells, drawn=False):
        cell.reset_dropout_mask()
        cell.reset_recurrent_dropout_mask()


def loop_cache(cell, states):
    """The loop cache of ``cell`` derived from ``states``: its `loop_cache` (see
    `MemoryCellWrapper`), or an empty list for a cell without one."""
    make = getattr(cell, "loop_cache", None)
    return [] if make is None else list(make(list(states)))


def scan_loop(layer, sequences, initial_state, mask=None, reset=None, training=None):
    """The loop of `keras.layers.RNN` over ``layer.cell``, with masks and resets, written
    with `keras.ops.scan` (a Python loop with ``layer.unroll``).

    A masked step keeps the states and emits the previous output (zeros with
    ``layer.zero_output_for_mask``), as Keras's TensorFlow loop does; a step with a reset
    passes its column of ``reset`` to the cell as ``reset``. A cell's loop cache
    (`loop_cache`) is carried beside the states and passed to the cell as ``cache``.

    Args:
        layer: A `keras.layers.RNN` (its ``cell``, ``go_backwards``, ``unroll`` and
            ``zero_output_for_mask`` are used).
        sequences: Tensor ``[batch, time, features]``.
        initial_state: List of the cell's states.
        mask: Optional bool tensor ``[batch, time]``. Default: `None`.
        reset: Optional bool tensor ``[batch, time]``. Default: `None`.
        training: Passed to the cell when its ``call`` takes it. Default: `None`.

    Returns:
        ``(last output, outputs [batch, time, units] in the order of processing, final
        states)``, as Keras's loops return them.
    """
    cell = layer.cell
    batch = ops.shape(sequences)[0]
    steps = ops.transpose(sequences, (1, 0, 2))
    if mask is None:
        mask = ops.ones(ops.shape(sequences)[:2], "bool")
    keep = ops.expand_dims(ops.transpose(ops.cast(mask, "bool")), -1)  # [time, batch, 1]
    if reset is None:
        reset = ops.zeros(ops.shape(sequences)[:2], "bool")
    resets = ops.transpose(ops.cast(reset, "bool"))  # [time, batch]
    if layer.go_backwards:
        steps, keep, resets = (ops.flip(x, axis=0) for x in (steps, keep, resets))
    kwargs = {"training": training} if takes_training(cell) else {}
    # A cell without an `output_size` outputs its first state, as `keras.layers.RNN` assumes.
    no_output = ops.zeros((batch, cell_output_size(cell)), cell.compute_dtype)
    count = len(initial_state)
    cache = loop_cache(cell, initial_state)

    def step(carry, step_inputs):
        states, previous = carry
        inputs, kept, flags = step_inputs
        if cache:
            output, new_states, new_cache = cell(
                inputs, states[:count], reset=flags, cache=states[count:], **kwargs
            )
            new_states = [*new_states, *new_cache]
        else:
            output, new_states = cell(inputs, states, reset=flags, **kwargs)
        if not keras.tree.is_nested(new_states):
            new_states = [new_states]
        new_states = keras.tree.map_structure(
            lambda new, old: ops.where(kept, new, old), list(new_states), list(states)
        )
        output = ops.where(kept, output, no_output if layer.zero_output_for_mask else previous)
        # The step's outputs have the structure of the carry: TensorFlow's `ops.scan` needs
        # that. Only the output is used.
        return (new_states, output), (new_states, output)

    carry = ([*initial_state, *cache], no_output)
    if layer.unroll:
        outputs = []
        for t in range(sequences.shape[1]):
            carry, (_, output) = step(carry, (steps[t], keep[t], resets[t]))
            outputs.append(output)
        outputs = ops.stack(outputs, axis=0)
    else:
        carry, (_, outputs) = ops.scan(step, carry, (steps, keep, resets))
    states, last = carry
    return last, ops.transpose(outputs, (1, 0, 2)), states[:count]


class _LoopStep:
    """Stands in for a cell inside `keras.layers.RNN.inner_loop`: with ``reset``, splits
    each step's reset flag off its inputs (their last column) and passes it to the cell;
    with ``cached`` states at the end of the loop's states, passes them to the cell as its
    loop cache and appends the new cache to the new states. Not a layer, so the loop passes
    no ``training``; this passes the call's own.

    It runs the cell as `step_runner` says (on torch its ``call`` itself, without the Keras
    layer call around it, where that does nothing the loop needs)."""

    def __init__(self, cell, training, reset, cached):
        self.cell = cell
        self.run = None  # decided at the first step, when the cell is built
        self.reset = reset
        self.cached = cached
        self.kwargs = {"training": training} if takes_training(cell) else {}

    def __call__(self, inputs, states):
        kwargs = dict(self.kwargs)
        if self.reset:
            kwargs["reset"] = inputs[..., -1] > 0.5
            inputs = inputs[..., :-1]
        if self.run is None:
            self.run = step_runner(self.cell, inputs)
        if not self.cached:
            return self.run(inputs, states, **kwargs)
        count = len(states) - self.cached
        output, new_states, new_cache = self.run(
            inputs, states[:count], cache=states[count:], **kwargs
        )
        return output, [*keras.tree.flatten(new_states), *new_cache]


@keras.saving.register_keras_serializable(package="tf_memlayers")
class ResettableRNN(RematerializedByPosition, keras.layers.RNN):
    """`keras.layers.RNN` with a ``reset`` call argument: rows start again mid-sequence.

    Where ``reset`` is true, the row's states are zeroed before that step, so each document
    packed into a row is computed as if it were its own sequence: for training on documents
    packed back to back, and for streams that cross document boundaries inside one call, in
    `fit`, under XLA and in exported models. Without ``reset`` it is `keras.layers.RNN` (the
    same loop, weights and outputs).

    It takes a cell or a list of cells, as `keras.layers.RNN` does: a list is stacked into a
    `keras.layers.StackedRNNCells`, and a reset zeroes the states of every cell of the stack.
    The cell must take a ``reset`` call argument (the package's memory cells do); any other
    Keras cell (a stack included) is wrapped in `ResettableCell`. On backends other than
    TensorFlow a call with a mask runs a loop of its own that masks as Keras's TensorFlow loop
    does (a masked step keeps the states and emits the previous output, or zeros with
    ``zero_output_for_mask``).

    Keras's own tests of `keras.layers.RNN` pass with it in its place, as the package's tests
    check on each backend: ``rnn_test.py``, ``stacked_rnn_cells_test.py``,
    ``dropout_rnn_cell_test.py`` and ``bidirectional_test.py`` of ``keras/src/layers/rnn/`` (in
    the last, ``SimpleRNN``, ``GRU`` and ``LSTM`` built as this layer over their cells; its
    tests of the cuDNN kernels of `keras.layers.LSTM` and `keras.layers.GRU`, which this layer
    has not, left out). Its config holds the user's cell as `keras.layers.RNN`'s does (not the
    `ResettableCell` around it), so a cell class is loaded, or refused when neither registered
    nor in ``custom_objects``, exactly as there.

    A cell with a loop cache (a ``loop_cache`` method, e.g. the window keys that
    `SlidingWindowAttentionCell` has already projected) gets it: derived from the initial
    states at every call and carried beside the states, it spares each step work without
    changing the outputs, states or gradients.

    Args:
        cell: A Keras RNN cell, or a list of them (stacked into a
            `keras.layers.StackedRNNCells`, as `keras.layers.RNN` stacks them). Cells without a
            ``reset`` argument are wrapped in `ResettableCell`.
        **kwargs: The arguments of `keras.layers.RNN` (``return_sequences``,
            ``return_state``, ``stateful``, ``unroll``, ``zero_output_for_mask``, ...).
            ``go_backwards=True`` cannot be combined with ``reset`` (a document's start is
            then the end of its steps).

    Call arguments:
        sequences: A 3D tensor ``[batch, time, features]``.
        initial_state: Optional list of the cell's initial states. Default: `None`.
        mask: Optional bool tensor ``[batch, time]``. Default: `None`.
        sequences_mask: Where the call has other tensors (``initial_state``, ``reset``), Keras
            passes the mask of ``sequences`` (from ``Embedding(mask_zero=True)``, say) here
            rather than as ``mask``; used where ``mask`` is `None`. Default: `None`.
        training: Python boolean, passed to the cell. Default: `False`.
        reset: Optional bool tensor ``[batch, time]``, true where a new document starts.
            Default: `None`.

    Returns:
        As `keras.layers.RNN`: the last output ``[batch, units]``, or every step's output
        ``[batch, time, units]`` with ``return_sequences=True``; with ``return_state=True``,
        the output followed by the final states.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import ResettableRNN
    >>> rnn = ResettableRNN(keras.layers.LSTMCell(4), return_sequences=True)
    >>> x = np.random.default_rng(0).normal(size=(1, 5, 3)).astype("float32")
    >>> reset = np.array([[False, False, True, False, False]])
    >>> packed = rnn(x, reset=reset)
    >>> alone = rnn(x[:, 2:])
    >>> bool(keras.ops.all(keras.ops.isclose(packed[:, 2:], alone, atol=1e-6)))
    True
    """

    def __init__(self, cell, **kwargs):
        for name in RNN_FLAGS:
            if name in kwargs:
                kwargs[name] = check_bool(name, kwargs[name], type(self).__name__)
        if isinstance(cell, (list, tuple)):
            # Stacked as `keras.layers.RNN` stacks a list, then wrapped as one cell: a reset
            # zeroes the states of every cell of the stack.
            cell = keras.layers.StackedRNNCells(cell)
        wraps = not takes_reset(cell)
        if wraps:
            with called_as(type(self).__name__):  # its check of `cell` names this layer
                cell = ResettableCell(cell)
        super().__init__(cell, **kwargs)
        # Whether `cell` is this layer's own wrapper of the user's cell (see `get_config`).
        self._wraps_cell = wraps
        self._call_reset = None

    def get_config(self):
        config = super().get_config()
        if self._wraps_cell:
            # The user's cell, saved as `keras.layers.RNN` saves it, so it loads (or is refused:
            # an unregistered class, not in `custom_objects`) exactly as there; `__init__`
            # wraps it again.
            config["cell"] = keras.saving.serialize_keras_object(self.cell.cell)
        return config

    def build(self, sequences_shape, initial_state_shape=None):
        if _one_tensor(sequences_shape):
            check_rank("sequences", sequences_shape, 3, type(self).__name__)
            if sequences_shape[-1] is not None:  # later calls' width (Keras's check names us)
                self.input_spec = keras.layers.InputSpec(axes={-1: sequences_shape[-1]})
        super().build(sequences_shape, initial_state_shape)

    def check_sequences(self, sequences, mask=None, initial_state=None):
        """Checks ``sequences`` (rank 3, one step at least: Keras's loop reads the first before
        it starts, and fails deep in the backend without one), ``mask`` (``[batch, time]``)
        and ``initial_state`` (each of the cell's states ``[batch, size]``), naming them."""
        owner, shape = type(self).__name__, shape_of(sequences)
        if _one_tensor(shape):
            check_rank("sequences", shape, 3, owner)
        check_time_steps("sequences", shape, owner)
        if mask is not None:
            check_mask_shape(shape_of(mask), shape, owner, inputs_name="sequences")
        if initial_state is not None:
            sizes = flat_state_sizes(self.cell.state_size)
            described = getattr(self.cell, "state_descriptions", None)  # the package's cells'
            check_states(
                "initial_state", initial_state, sizes, "sequences", shape, owner, described
            )

    def call(
        self,
        sequences,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
        sequences_mask=None,
    ):
        mask = sequences_mask if mask is None else mask
        self.check_sequences(sequences, mask, initial_state)
        if reset is not None:
            reset = self.checked_reset(reset, sequences)
        self._call_reset = reset
        # `keras.layers.RNN` draws the dropout masks of the cell it runs (a dropout cell, or
        # the cells of a `StackedRNNCells`) once per call, before its loop, but only of a cell
        # it sees; draw those of the cells inside the wrapper.
        masks = contextlib.nullcontext()
        if _wraps_a_cell(self.cell):
            masks = dropout_masks(self.cell, sequences[:, 0])
        try:
            with masks:
                return super().call(
                    sequences, initial_state=initial_state, mask=mask, training=training
                )
        finally:
            self._call_reset = None

    def checked_reset(self, reset, sequences):
        """``reset`` checked against ``sequences``: a bool ``[batch, time]`` tensor of their
        batch and length; a `ValueError` with ``go_backwards``."""
        owner = type(self).__name__
        if self.go_backwards:
            raise ValueError(
                f"{owner}: `reset` cannot be combined with go_backwards=True: a document's "
                "first step would be read last. Reverse the documents instead."
            )
        shape = shape_of(sequences)
        reset = check_reset(reset, shape[:2], owner, "sequences")
        check_same_batch("reset", shape_of(reset), "sequences", shape, owner)
        return reset

    def compute_output_spec(
        self,
        sequences,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
        sequences_mask=None,
    ):
        mask = sequences_mask if mask is None else mask
        self.check_sequences(sequences, mask, initial_state)
        if reset is not None:
            self.checked_reset(reset, sequences)
        return super().compute_output_spec(
            sequences, initial_state=initial_state, mask=mask, training=training
        )

    def _torch_unrolled(self, mask):
        """Whether Keras's unrolled loop runs the steps: on torch, where it is the same Python
        loop as the other without its tensor step counter, which runs the first step twice
        (for the outputs' shapes) and breaks the graph of ``torch.compile``. (Keras's
        unrolled torch loop fails to reverse a mask: not with ``go_backwards``.)"""
        backwards_mask = self.go_backwards and mask is not None
        return keras.backend.backend() == "torch" and not backwards_mask

    def inner_loop(self, sequences, initial_state, mask, training=False):
        reset = self._call_reset
        if not keras.tree.is_nested(initial_state):
            initial_state = [initial_state]
        initial_state = list(initial_state)
        if mask is not None and keras.backend.backend() == "jax":
            # Keras's loop on JAX emits a masked step's output from the cell's first state,
            # which for a memory cell is not its output; `scan_loop` keeps the masking of
            # Keras's loops on TensorFlow and PyTorch (the previous step's output).
            return scan_loop(self, sequences, initial_state, mask, reset, training)
        cache = loop_cache(self.cell, initial_state)
        # On torch the steps go through `_LoopStep` too, for its `step_runner`.
        if reset is None and not cache and keras.backend.backend() != "torch":
            return super().inner_loop(sequences, initial_state, mask, training=training)
        # Keras's own loop (XLA-ready on TensorFlow, with its masking on every backend). The
        # reset flags ride along as one more input column and the loop cache beside the
        # states; `_LoopStep` hands both to the cell (on torch, to its ``call``).
        if reset is not None:
            sequences = ops.concatenate(
                [sequences, ops.expand_dims(ops.cast(reset, sequences.dtype), -1)], axis=-1
            )
        cell, unroll = self.cell, self.unroll
        step = _LoopStep(cell, training, reset is not None, len(cache))
        object.__setattr__(self, "cell", step)
        object.__setattr__(self, "unroll", unroll or self._torch_unrolled(mask))
        try:
            last, outputs, states = super().inner_loop(
                sequences, initial_state + cache, mask, training=training
            )
        finally:
            object.__setattr__(self, "cell", cell)
            object.__setattr__(self, "unroll", unroll)
        return last, outputs, list(states)[: len(initial_state)]
