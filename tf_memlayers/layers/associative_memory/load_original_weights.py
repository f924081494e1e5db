"""The mapping of the original code's associative-memory variables onto the Keras weights of
`AssociativeGRUCell` and `DualAssociativeGRUCell`, and the loader that uses it (public as
`tf_memlayers.compat`, whose docstring has the table)."""

import numpy as np

from tf_memlayers._validation import errors_named
from tf_memlayers.layers.associative_memory.associative_gru_cell import AssociativeGRUCell
from tf_memlayers.layers.associative_memory.dual_associative_gru import DualAssociativeGRUCell

SCOPE = "AssociativeGRUCell"
_PREMISE = {
    "Keys/fully_connected/weights": "key_kernel",
    "Gates/fully_connected/weights": "gate_kernel",
    "Gates/fully_connected/biases": "gate_bias",
    "Candidate/fully_connected/weights": "candidate_kernel",
    "Candidate/fully_connected/biases": "candidate_bias",
}
_DUAL = {
    "Keys/Dual/fully_connected/weights": "dual_key_kernel",
    "DualGates/fully_connected/weights": "dual_gate_kernel",
    "DualCandidate/fully_connected/weights": "dual_candidate_kernel",
}
_TF08_SPELLING = {
    "fully_connected/weights": "Linear/Matrix",
    "fully_connected/biases": "Linear/Bias",
}


def _mapping(cell):
    """``[(original name, owning layer, attribute)]`` for ``cell``'s weights."""
    if isinstance(cell, DualAssociativeGRUCell):
        pairs = [(SCOPE + "/" + k, cell.premise_cell, v) for k, v in _PREMISE.items()]
        for name, attribute in _DUAL.items():
            if attribute != "dual_key_kernel" or cell.dual_key == "released":
                pairs.append((SCOPE + "/" + name, cell, attribute))
        return pairs
    if isinstance(cell, AssociativeGRUCell):
        return [(SCOPE + "/" + k, cell, v) for k, v in _PREMISE.items()]
    raise TypeError(
        "`cell` must be an AssociativeGRUCell or DualAssociativeGRUCell, got "
        f"{type(cell).__name__}."
    )


def _matches(key, name):
    spellings = [name] + [name.replace(a, b) for a, b in _TF08_SPELLING.items() if a in name]
    key = key.split(":")[0]
    return any(key == s or key.endswith("/" + s) for s in spellings)


def _find(arrays, name):
    """The one entry of ``arrays`` whose name ends with ``name`` (`None` if there is none)."""
    found = [key for key in arrays if _matches(key, name)]
    if len(found) > 1:
        raise ValueError(
            f"Several entries of `arrays` match the original variable {name!r}: {found}. "
            "Pass `prefix=` (the outer scope of the cell to load) to choose one."
        )
    return arrays[found[0]] if found else None


@errors_named("original_variable_names")
def original_variable_names(cell):
    """Returns ``{original variable name: Keras variable}`` for a built cell.

    Args:
        cell: A built `AssociativeGRUCell` or `DualAssociativeGRUCell`.

    Returns:
        A dict from each of the cell's weights' names in the original code (its variable
        scope, e.g. ``"AssociativeGRUCell/Gates/fully_connected/weights"``) to the Keras
        variable that holds it.

    Raises:
        ValueError: If ``cell`` is not built.
        TypeError: If ``cell`` is neither of the two cells.

    Example:

    >>> from tf_memlayers import AssociativeGRUCell
    >>> from tf_memlayers.compat import original_variable_names
    >>> cell = AssociativeGRUCell(4, num_copies=2)
    >>> cell.build((None, 3))
    >>> sorted(original_variable_names(cell))[:2]
    ['AssociativeGRUCell/Candidate/fully_connected/biases',
     'AssociativeGRUCell/Candidate/fully_connected/weights']
    """
    mapping = _mapping(cell)  # first: another object is a TypeError, built or not
    if not cell.built:
        raise ValueError("`cell` must be built (call it or `cell.build(input_shape)`) first.")
    return {name: getattr(owner, attribute) for name, owner, attribute in mapping}


@errors_named("load_original_weights")
def load_original_weights(cell, arrays, prefix=None):
    """Sets ``cell``'s weights from arrays named as in the original code.

    Args:
        cell: a built `AssociativeGRUCell` or `DualAssociativeGRUCell`.
        arrays: dict ``{original variable name: array}`` in the original shapes (e.g. read with
            ``tf.train.load_checkpoint(path).get_tensor(name)``); extra entries are ignored.
        prefix: only entries whose names start with it are considered (e.g. the outer scope
            ``"encoder/"`` of one of two cells in a checkpoint).

    Returns:
        The list of original names that were loaded.

    Raises:
        ValueError: a required variable is missing, matches several entries, or has the wrong
            shape; or the arrays hold the released code's Dual key for a cell with
            ``dual_key="paper"`` (which would compute something else than that code).

    Example:

    Arrays as a checkpoint of the original code names them (under an outer scope):

    >>> import numpy as np
    >>> from tf_memlayers import AssociativeGRUCell
    >>> from tf_memlayers.compat import load_original_weights, original_variable_names
    >>> cell = AssociativeGRUCell(4, num_copies=2)
    >>> cell.build((None, 3))
    >>> arrays = {"encoder/" + name: np.full(tuple(variable.shape), 0.5, "float32")
    ...           for name, variable in original_variable_names(cell).items()}
    >>> len(load_original_weights(cell, arrays, prefix="encoder/"))
    5
    >>> float(cell.key_kernel[0, 0])
    0.5
    """
    if prefix is not None:
        if not isinstance(prefix, str):
            raise TypeError(f"`prefix` must be a string (an outer scope), got {prefix!r}.")
        arrays = {k: v for k, v in arrays.items() if k.startswith(prefix)}
    if isinstance(cell, DualAssociativeGRUCell) and cell.dual_key == "paper":
        released_key = SCOPE + "/" + next(iter(_DUAL))
        if _find(arrays, released_key) is not None:
            raise ValueError(
                f"`arrays` holds {released_key!r}, the Dual key of the released code; build the "
                "cell with dual_key='released' to compute what that code computes."
            )
    loaded = []
    for name, owner, attribute in _mapping(cell):
        if not owner.built:
            raise ValueError("`cell` must be built (call it or `cell.build(input_shape)`) first.")
        variable = getattr(owner, attribute)
        value = _find(arrays, name)
        if value is None:
            raise ValueError(f"`arrays` has no entry for the original variable {name!r}.")
        value = np.asarray(value)
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"The original variable {name!r} has shape {tuple(value.shape)}; the cell's "
                f"`{attribute}` needs {tuple(variable.shape)}."
            )
        variable.assign(value.astype(variable.dtype))
        loaded.append(name)
    return loaded
