"""Resetting the carried states of a stateful language model, all rows or some: the layers
that carry state (nested models included) and their state variables."""

import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import errors_named
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer


def stateful_layers(model):
    """The layers of ``model`` (nested models included) that carry state between batches.

    Args:
        model: A `keras.Model`.

    Returns:
        List of the layers whose ``stateful`` attribute is true.
    """
    found = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            found.extend(stateful_layers(layer))
        elif getattr(layer, "stateful", False):
            found.append(layer)
    return found


def state_variables(layer):
    """The variables holding a stateful layer's carried state (each ``[batch, ...]``).

    Args:
        layer: A stateful layer: a `keras.layers.RNN` (its ``states``), a
            `keras.layers.Bidirectional` over two of them, or a memory layer of this package
            (its non-trainable variables, which hold only the carried memory).

    Returns:
        List of variables.

    Raises:
        ValueError: If ``layer`` is another stateful layer, whose state variables are not
            known (its non-trainable variables may hold other things, such as seeds).
    """
    if isinstance(layer, keras.layers.RNN):
        return list(layer.states or [])
    if isinstance(layer, keras.layers.Bidirectional):
        return state_variables(layer.forward_layer) + state_variables(layer.backward_layer)
    if isinstance(layer, MemorySequenceLayer):
        # The memory layers keep nothing but their carried memory in non-trainable variables.
        return list(layer.non_trainable_variables)
    raise ValueError(
        f"`layer` {layer.name!r} is a stateful {type(layer).__name__}, whose carried state "
        "is not known here: resets handle a keras.layers.RNN, a keras.layers.Bidirectional "
        "over RNNs and this package's memory layers."
    )


@errors_named("reset_language_model_states")
def reset_language_model_states(model, rows=None):
    """Clears the carried LSTM states and memories of ``model``.

    Args:
        model: A stateful `keras.Model` (e.g. from `build_language_model(stateful=True)`).
        rows: Optional boolean vector ``[batch]`` selecting the rows (streams) to clear,
            e.g. those starting a new document; the others keep their state. Default:
            `None` (clear every row).

    Raises:
        TypeError: If ``rows`` is not a boolean vector.
        ValueError: If ``rows`` does not have one entry per row of a carried state, or a
            stateful layer of ``model`` is not a `keras.layers.RNN`, a
            `keras.layers.Bidirectional` over RNNs or a memory layer of this package.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers.models import build_language_model
    >>> from tf_memlayers.callbacks import reset_language_model_states
    >>> model = build_language_model(20, units=8, embedding_dim=8, batch_size=2, sequence_length=4)
    >>> _ = model(np.ones((2, 4), "int32"))
    >>> reset_language_model_states(model, rows=np.array([True, False]))
    >>> [float(np.abs(v.numpy()[0]).sum()) for v in model.get_layer("lstm_0").states]
    [0.0, 0.0]
    >>> _ = model(np.ones((2, 4), "int32"))
    >>> reset_language_model_states(model)  # every row
    >>> [float(np.abs(v.numpy()).sum()) for v in model.get_layer("lstm_0").states]
    [0.0, 0.0]
    """
    layers = stateful_layers(model)
    if rows is None:
        for layer in layers:
            for variable in state_variables(layer):
                variable.assign(ops.zeros(variable.shape, variable.dtype))
        return
    rows = np.asarray(rows)
    if rows.dtype != bool or rows.ndim != 1:
        raise TypeError(
            "`rows` must be a boolean vector, one entry per row (a mask; rows by index: "
            f"np.isin(np.arange(batch), indices)), got {rows.dtype} of shape {rows.shape}."
        )
    carried = [(layer, variable) for layer in layers for variable in state_variables(layer)]
    for layer, variable in carried:
        if variable.shape[0] != rows.shape[0]:
            raise ValueError(
                f"`rows` has {rows.shape[0]} entries but layer {layer.name!r} carries "
                f"state for a batch of {variable.shape[0]}."
            )
    if rows.any():
        for _, variable in carried:
            keep = np.reshape(~rows, (-1,) + (1,) * (len(variable.shape) - 1))
            variable.assign(variable * ops.cast(keep, variable.dtype))
