"""`copy_trainable_weights`: copying trained weights between the forms of one model.

The cell form (``keras.layers.RNN`` over a memory cell) and the parallel form (an LSTM layer
followed by the sequence layer) of a language model hold the same weights under different
paths; `weight_role` names each weight by what it does, and `copy_trainable_weights` copies
by that name, e.g. from a stateful training model into a stateless probe.
"""

from tf_memlayers._validation import errors_named

# The layers `build_language_model` names, besides the LSTMs (``lstm_<i>``) and the memory.
_NAMED_LAYERS = ("embedding", "softmax")


def weight_role(path):
    """A form-independent name of a language-model weight, from its variable path.

    ``lstm_0/lstm_cell/kernel`` (parallel form) and
    ``memory_rnn/sliding_window_attention_cell/lstm_0/kernel`` (cell form) are both
    ``lstm_0/kernel``; the memory's weights (those of the layer over the top LSTM, or of the
    memory cell around it) are ``memory/<name>`` in both forms; the embedding's and the
    softmax's keep their paths.

    Args:
        path: String, a variable's ``path`` in a model from `build_language_model`.

    Returns:
        String, the weight's role.

    Example:

    >>> weight_role("memory_rnn/sliding_window_attention_cell/lstm_0/kernel")
    'lstm_0/kernel'
    >>> weight_role("sliding_window_attention/memory_kernel")
    'memory/memory_kernel'
    """
    parts = path.split("/")
    for part in parts:
        if part.startswith("lstm_") and part[5:].isdigit():
            return f"{part}/{parts[-1]}"
    if parts[0] in _NAMED_LAYERS:
        return "/".join(parts)
    return f"memory/{parts[-1]}"


@errors_named("copy_trainable_weights")
def copy_trainable_weights(source, target):
    """Copies the trainable weights of one language model into another of the same design.

    The models may differ in form (`"parallel"` / `"cell"`), batch size, sequence length,
    statefulness and outputs (e.g. a probe model returning attention scores); weights are
    matched by `weight_role`. Carried states are not copied.

    Args:
        source: A `keras.Model` from `build_language_model`, the model to copy from.
        target: A `keras.Model` from `build_language_model` of the same design, the model
            to copy into.

    Raises:
        ValueError: If the models' trainable weights differ in roles or shapes, or two weights
            of one model have the same role (nothing is copied then).
    """
    source_weights = _weights_by_role(source, "source")
    target_weights = _weights_by_role(target, "target")
    if sorted(source_weights) != sorted(target_weights):
        raise ValueError(
            "`source` and `target` have different trainable weights: "
            f"{sorted(source_weights)} vs {sorted(target_weights)}."
        )
    # Every shape is checked before the first weight is written, so that a refused copy
    # leaves `target` as it was.
    for role, weight in target_weights.items():
        if tuple(weight.shape) != tuple(source_weights[role].shape):
            raise ValueError(
                f"weight {role!r} has shape {tuple(source_weights[role].shape)} in `source` "
                f"but {tuple(weight.shape)} in `target`."
            )
    for role, weight in target_weights.items():
        weight.assign(source_weights[role])


def _weights_by_role(model, argument):
    """``{role: weight}`` of ``model``'s trainable weights; refuses two weights of one role."""
    weights = {}
    for weight in model.trainable_weights:
        role = weight_role(weight.path)
        if role in weights:
            raise ValueError(
                f"`{argument}` has two trainable weights of the role {role!r} "
                f"({weights[role].path} and {weight.path}): `copy_trainable_weights` matches "
                "weights by role, so it cannot tell them apart."
            )
        weights[role] = weight
    return weights
