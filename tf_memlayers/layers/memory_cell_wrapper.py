"""Base class of the cells that wrap a Keras RNN cell and keep one extra 2-D memory state."""

import inspect
import weakref

import keras

from tf_memlayers._validation import check_step
from tf_memlayers.layers.resets import check_reset, zero_where


def flat_state_sizes(state_size):
    """A cell's `state_size` as a flat list of ints.

    Args:
        state_size: Integer, list of integers, or nested lists of integers (as in
            `keras.layers.StackedRNNCells`): a cell's ``state_size``.

    Returns:
        List of integers, the sizes in flattened order.

    Example:

    >>> flat_state_sizes([[4, 4], 3])
    [4, 4, 3]
    """
    return [int(s) for s in keras.tree.flatten(state_size)]


def cell_output_size(cell):
    """The cell's `output_size`, else its first state size (as `keras.layers.RNN` does).

    Args:
        cell: A Keras RNN cell (an object with a ``state_size`` and, optionally, an
            ``output_size``).

    Returns:
        Integer, the width of the cell's output.
    """
    output_size = getattr(cell, "output_size", None)
    return int(output_size if output_size else flat_state_sizes(cell.state_size)[0])


def step_output_spec(cell, inputs):
    """The output spec of one step of a cell of this package.

    Args:
        cell: A cell of this package (a `keras.layers.Layer` with ``output_size``,
            ``state_size`` and ``compute_dtype``).
        inputs: The step's input (a tensor or `keras.KerasTensor` ``[batch, features]``);
            only its batch size is used.

    Returns:
        Tuple ``(output, states)`` of `keras.KerasTensor`: ``output [batch, output_size]``
        and a list with one ``[batch, size]`` spec per flattened state, all in the cell's
        compute dtype (what the cell returns under any dtype policy, e.g. float16 under
        ``mixed_float16``).
    """
    batch = inputs.shape[0]
    dtype = cell.compute_dtype
    output = keras.KerasTensor((batch, int(cell.output_size)), dtype)
    states = [keras.KerasTensor((batch, size), dtype) for size in flat_state_sizes(cell.state_size)]
    return output, states


def takes_training(cell):
    """Whether ``cell`` is a Keras layer whose `call` has a ``training`` argument.

    This is how `keras.layers.RNN` decides whether to pass ``training`` to a cell.

    Args:
        cell: Any object, typically a Keras RNN cell.

    Returns:
        Boolean, `True` if ``cell`` is a `keras.layers.Layer` whose ``call`` accepts
        ``training``.
    """
    if not isinstance(cell, keras.layers.Layer):
        return False
    try:
        return "training" in inspect.signature(cell.call).parameters
    except (TypeError, ValueError):
        return False


def step_runner(cell, inputs):
    """What runs ``cell`` on one step's ``inputs``: on torch, the cell's own ``call`` where the
    Keras layer call around it does nothing the step needs (a built layer, the inputs already
    of its compute dtype, no mixed precision to cast its weights for); else ``cell``. Torch runs
    a recurrent loop step by step in Python, and there that call costs a quarter to a third of
    a memory cell's step; TensorFlow and JAX trace the step once.

    Args:
        cell: A Keras RNN cell, called as ``cell(inputs, states)``.
        inputs: The step's inputs, a tensor ``[batch, features]``.

    Returns:
        A callable taking ``(inputs, states, **kwargs)``: ``cell.call`` or ``cell``.
    """
    if (
        keras.backend.backend() == "torch"
        and isinstance(cell, keras.layers.Layer)
        and cell.built
        and cell.compute_dtype == cell.variable_dtype
        and keras.backend.standardize_dtype(inputs.dtype) == cell.compute_dtype
    ):
        return cell.call
    return cell


# The Keras cells inside the package's wrappers whose dropout masks are drawn for the sequence
# under way (by `ResettableRNN`'s call or a `dropout_masks` block), each with the number of such
# calls or blocks under way: one inside another on the same cell, or the replicas of a
# `tf.distribute` strategy tracing one call at once.
_DRAWN_DROPOUT_MASKS = weakref.WeakKeyDictionary()


def mark_dropout_masks(cells, drawn):
    """Records that a loop drew (``drawn=True``) or is done with (``drawn=False``) the dropout
    masks of ``cells``; returns those no loop uses any longer (their masks may be forgotten: a
    loop inside another on the same cell keeps the outer loop's masks)."""
    unused = []
    for cell in cells:
        count = _DRAWN_DROPOUT_MASKS.get(cell, 0) + (1 if drawn else -1)
        if count > 0:
            _DRAWN_DROPOUT_MASKS[cell] = count
        else:
            _DRAWN_DROPOUT_MASKS.pop(cell, None)
            unused.append(cell)
    return unused


def check_dropout_masks(cell, training):
    """Refuses to train ``cell`` (a Keras cell inside a wrapper of the package, or a
    `keras.layers.StackedRNNCells` of them) with dropout whose masks no loop drew.

    `keras.layers.RNN` draws the masks of a dropout cell it runs before its loop, but not of
    one inside a wrapper: that cell would draw them inside the loop and keep them, where they
    escape the traced loop (an error from TensorFlow or JAX, then or at a later call) or, on
    torch, serve every later call. `ResettableRNN` and `AttentionRNN` draw them before their
    loops, and `dropout_masks` for a loop of your own.

    Raises:
        ValueError: ``training`` and ``cell``'s ``dropout`` or ``recurrent_dropout`` is
            positive, and no loop of the package drew its masks.
    """
    if isinstance(cell, keras.layers.StackedRNNCells):
        for inner in cell.cells:
            check_dropout_masks(inner, training)
        return
    if not hasattr(cell, "get_dropout_mask") or cell in _DRAWN_DROPOUT_MASKS:
        return
    rates = {name: getattr(cell, name, 0.0) for name in ("dropout", "recurrent_dropout")}
    rates = ", ".join(f"{name}={rate}" for name, rate in rates.items() if rate)
    # ``training`` read last: a cell without dropout never reads it (it may be a tensor).
    if rates and training:
        raise ValueError(
            f"{type(cell).__name__} {cell.name!r} inside a wrapper of tf_memlayers trains with "
            f"{rates}, but no loop drew its masks (keras.layers.RNN draws none for a cell "
            "inside a wrapper). Run the wrapper in tf_memlayers.ResettableRNN, which takes "
            "keras.layers.RNN's arguments (AttentionRNN for AttentionWrapper and "
            "WordByWordAttention); in a loop of your own, step through each sequence inside "
            "`with tf_memlayers.dropout_masks(wrapper, step_inputs):`; or set the rates to 0."
        )


def call_cell(cell, inputs, flat_states, training=None):
    """Calls ``cell`` on flat states; returns ``(output, new flat states)``.

    The states are handed over in the structure `keras.layers.RNN` gives a cell: a list for an
    int or flat `state_size`, nested lists for a nested one.

    Args:
        cell: A Keras RNN cell, called as ``cell(inputs, states)``.
        inputs: A 2D tensor ``[batch, features]``, the input of the step.
        flat_states: List of tensors, the cell's states in flattened order (see
            `flat_state_sizes`).
        training: Optional Python boolean, passed to the cell when its ``call`` takes a
            ``training`` argument. Default: `None`.

    Returns:
        Tuple ``(output, new_states)``: the cell's output and its new states as a flat list,
        in the dtypes of ``inputs`` and ``flat_states`` (a cell of another dtype policy than
        its wrapper's computes in its own).
    """
    structure = cell.state_size
    if isinstance(structure, (list, tuple)):
        states = keras.tree.pack_sequence_as(list(structure), list(flat_states))
    else:
        states = list(flat_states)
    check_dropout_masks(cell, training)
    kwargs = {}
    if takes_training(cell):
        kwargs["training"] = training
    output, new_states = step_runner(cell, inputs)(inputs, states, **kwargs)
    new_states = keras.tree.flatten(new_states)
    new_states = [keras.ops.cast(new, old.dtype) for new, old in zip(new_states, flat_states)]
    return keras.ops.cast(output, inputs.dtype), new_states


class RematerializedByPosition:
    """Mixin of the package's layers: under ``keras.RematScope`` the call's tensors reach the
    rematerialized function by position.

    On TensorFlow, Keras recomputes a layer's call with ``tf.recompute_grad``, which
    differentiates the function's positional arguments and the variables it reads only (a
    tensor given by keyword, such as an ``initial_state`` or a ``memory``, would get no
    gradient) and, compiled, takes no keyword argument at all. Here the recomputed function
    takes the call's floating-point tensors by position and every other argument
    (``training``, masks, ``reset``) as the call gave it. Other backends rematerialize the
    call as it is.
    """

    def rematerialized_call(self, layer_call, *args, **kwargs):
        parent = super().rematerialized_call
        if keras.backend.backend() != "tensorflow":
            return parent(layer_call, *args, **kwargs)
        structure = (args, kwargs)
        leaves = keras.tree.flatten(structure)
        at = [
            i
            for i, leaf in enumerate(leaves)
            if keras.ops.is_tensor(leaf) and keras.backend.is_float_dtype(leaf.dtype)
        ]

        def by_position(*tensors):
            filled = list(leaves)
            for i, tensor in zip(at, tensors):
                filled[i] = tensor
            call_args, call_kwargs = keras.tree.pack_sequence_as(structure, filled)
            return layer_call(*call_args, **call_kwargs)

        rematerialized = parent(by_position, *args, **kwargs)
        if rematerialized is by_position:  # not rematerialized
            return layer_call

        def call(*call_args, **call_kwargs):
            flat = keras.tree.flatten((call_args, call_kwargs))
            return rematerialized(*[flat[i] for i in at])

        return call


class RecomputedWithItsLayer:
    """Mixin of the package's cells: under ``keras.RematScope`` a cell is not recomputed step
    by step but with the layer that loops over it (when that layer is built in the scope).

    On TensorFlow, ``tf.recompute_grad`` inside the loop fails compiled (it captures the
    loop's weights), and a step recomputed in the backward pass, after its layer's call,
    would miss what the layer bound for it (`AssociativeGRU`'s input projections,
    `AttentionRNN`'s memory); on JAX, ``jax.checkpoint`` of a step fails on a Keras cell
    inside it.
    """

    def rematerialized_call(self, layer_call, *args, **kwargs):
        return layer_call


def with_deserialized_cell(config):
    """A copy of a wrapper's config with its ``cell`` entry deserialized (for `from_config`)."""
    config = dict(config)
    config["cell"] = keras.saving.deserialize_keras_object(config["cell"])
    return config


class MemoryCellWrapper(RecomputedWithItsLayer, keras.layers.Layer):
    """Base class of the RNN cells that wrap a Keras RNN cell and add one memory state.

    The state is the wrapped cell's states followed by one 2-D memory ``[batch,
    memory_size]``. Subclasses define `memory_size`, `output_size` and `call` (using
    `run_cell`).

    A subclass may also define a loop cache (`loop_cache`): values derived from the states
    that spare every step some work, such as the window's keys already multiplied by a
    weight matrix. A loop that supports it (`ResettableRNN`, `scan_loop`) derives the cache
    from its initial states at every call, carries it beside the states, and passes it to
    ``call`` as ``cache``; ``call`` then returns the next cache too. The states, outputs and
    gradients are those of the plain step, which derives the cache from its states itself.
    The cache is never a state: it is derived afresh at every call, so a stateful loop whose
    weights changed between calls does not read a stale one.

    A wrapped cell with ``dropout`` or ``recurrent_dropout`` trains in `ResettableRNN`, which
    draws its masks once per call before the loop, as `keras.layers.RNN` does for the Keras
    cells it sees; `keras.layers.RNN` draws none for a cell inside a wrapper, and training
    the wrapper there is a ``ValueError`` (``check_dropout_masks``): in a loop of your own,
    step through each sequence inside `dropout_masks`. The masks are
    as wide as the cell's inputs: ``cell_input_dim``, set by ``build`` (a subclass that feeds its
    cell more than the step's inputs sets it to that width).

    Args:
        cell: A Keras RNN cell (any object with `state_size` that is called as
            ``cell(inputs, states) -> (output, new_states)``; nested state sizes, as in
            `keras.layers.StackedRNNCells`, are flattened into the wrapper's state list).
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.
    """

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(
                f"{type(self).__name__}: `cell` must be a Keras RNN cell with a "
                f"`state_size`, got {cell!r}."
            )
        self.cell = cell
        self.cell_state_sizes = flat_state_sizes(cell.state_size)
        self.cell_output_size = cell_output_size(cell)

    @property
    def state_size(self):
        return [*self.cell_state_sizes, self.memory_size]

    def build(self, input_shape):
        self.input_dim = input_shape[-1]  # a call's inputs are checked against it
        self.cell_input_dim = input_shape[-1]  # the wrapped cell's (its dropout masks')
        if not self.cell.built:
            self.cell.build(input_shape)

    def compute_output_spec(self, inputs, states, training=None, reset=None, cache=None):
        return step_output_spec(self, inputs)

    def loop_cache(self, states):
        """The loop cache derived from ``states`` (see the class docstring).

        Args:
            states: List of tensors, the wrapped cell's flat states followed by the memory.

        Returns:
            List of tensors ``[batch, ...]``, empty here (no cache). A subclass's cache must
            be zero where the states are zero, as after a reset.
        """
        return []

    def run_cell(self, inputs, states, training=None, reset=None, cache=None):
        """Runs the wrapped cell on its states, after checking the step (``inputs`` of the
        width the cell was built with, ``states`` as ``state_size`` says, both of one batch: a
        `ValueError` naming the cell) and zeroing the states (the wrapped cell's and the
        memory) and the loop cache of the rows that ``reset`` marks.

        Args:
            inputs: A 2D tensor ``[batch, features]``, the input of the step.
            states: List of tensors, the wrapped cell's flat states followed by the memory.
            training: Optional Python boolean, passed to the wrapped cell. Default: `None`.
            reset: Optional bool tensor ``[batch]``, true in the rows that start a new
                document at this step. Default: `None`.
            cache: List of tensors, the step's loop cache (`loop_cache`). Default: `None`,
                derived from ``states``.

        Returns:
            Tuple ``(h, new_cell_states, memory, cache)``: the wrapped cell's output, its new
            flat states, the memory (the last of ``states``) and the cache as a list, both
            zero in the reset rows.
        """
        owner = type(self).__name__
        # (A subclass's own `build` may not have recorded the inputs' width: not checked then.)
        width = getattr(self, "input_dim", None)
        states = check_step(inputs, states, self.state_size, width, owner)
        cache = self.loop_cache(states) if cache is None else list(cache)
        if reset is not None:
            reset = check_reset(reset, tuple(inputs.shape)[:1], owner)
            states, cache = zero_where(reset, (states, cache))
        h, new_states = call_cell(self.cell, inputs, states[:-1], training)
        return h, new_states, states[-1], cache

    def get_config(self):
        config = super().get_config()
        config["cell"] = keras.saving.serialize_keras_object(self.cell)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_deserialized_cell(config))
