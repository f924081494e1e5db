"""Per-row resets inside the graph: a row starts again where a new document starts.

The ``reset`` call argument is a bool tensor, ``[batch, time]`` for a layer over sequences
(``[batch]`` for a one-step call of a cell), true where a new document starts at that step.
Before such a step, the row's recurrent states and memory are set to zero, so from there on
the row computes exactly what the same layer computes on that document alone, started
without ``initial_state`` and not stateful. The other rows are untouched, and so are all
rows at steps without a reset; no gradient flows through a reset into the earlier steps.

A reset at a masked step is ignored, like everything else at a masked step (the states are
carried over it unchanged): mark the first real step of a document.

The package's memory cells take ``reset`` themselves (their wrapped cell included);
`tf_memlayers.layers.resettable_rnn` gives it to any Keras cell (`ResettableCell`) and to
`keras.layers.RNN` (`ResettableRNN`). This module holds the check of the argument and the
zeroing that they share.
"""

import inspect

import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import shape_of


def _dtype(x):
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    return keras.backend.standardize_dtype(dtype)


def check_reset(reset, expected, owner, inputs_name="inputs"):
    """Checks a ``reset`` argument's dtype and shape, and returns it as a bool tensor.

    Args:
        reset: Bool tensor (or array): ``[batch, time]`` for a sequence, ``[batch]`` for one
            step.
        expected: Tuple, the shape ``reset`` must have (``(batch, time)`` or ``(batch,)``),
            with `None` for dimensions not known yet; unknown dimensions are not compared.
        owner: String, the class name that error messages start with.
        inputs_name: String, the argument ``expected`` comes from, for the message.
            Default: `"inputs"`.

    Returns:
        ``reset`` as a bool tensor (a symbolic input stays as it is).

    Raises:
        ValueError: If ``reset`` is not bool, or its shape is not ``expected``.
    """
    dtype = _dtype(reset)
    if dtype != "bool":
        raise ValueError(
            f"{owner}: `reset` must be a bool tensor (true where a new document starts), got "
            f"dtype {dtype}; convert 0/1 flags with `flags > 0`."
        )
    shape = shape_of(reset)
    expected = tuple(expected)
    agree = len(shape) == len(expected) and all(
        a is None or b is None or a == b for a, b in zip(shape, expected)
    )
    if not agree:
        what = "(batch, time)" if len(expected) == 2 else "(batch,)"
        raise ValueError(
            f"{owner}: `reset` must have shape {what} = {expected}, from `{inputs_name}`; got "
            f"shape {shape}."
        )
    if isinstance(reset, keras.KerasTensor):
        return reset
    return ops.convert_to_tensor(reset, "bool")


def zero_where(reset, states):
    """``states`` (any nesting of ``[batch, ...]`` tensors) set to zero in the rows where
    ``reset`` (bool ``[batch]``) is true; `None` leaves them as they are.

    Selected, not multiplied: a non-finite state in a reset row does not leak through.
    """
    if reset is None:
        return states

    def zero(state):
        keep = ops.logical_not(reset)
        keep = ops.reshape(keep, (-1,) + (1,) * (len(state.shape) - 1))
        return ops.where(keep, state, ops.zeros_like(state))

    return keras.tree.map_structure(zero, states)


def takes_reset(cell):
    """Whether ``cell``'s ``call`` has a ``reset`` argument."""
    try:
        return "reset" in inspect.signature(cell.call).parameters
    except (AttributeError, TypeError, ValueError):
        return False
