"""What holds across the layers beyond their test classes' suites (tests/layer_test_case.py):
the package uses no private Keras API, and bad call inputs of the recurrent, pooling, split and
cache layers (a wrong mask or state shape, no time steps) raise an error naming the argument
and the shapes.
"""

import keras
import numpy as np
import pytest

from tests.layer_test_case import INPUT_DIM, X, called_twice, zeros
from tf_memlayers.layers import (
    AssociativeGRU,
    AttentionPooling,
    AttentionRNN,
    AttentionWrapper,
    DualAssociativeGRU,
    HeapCacheAttention,
    KeyValuePredictSplit,
    ResettableRNN,
)


def _private_keras_names():
    """Underscore (non-dunder) attribute names of the Keras classes layers deal with."""
    classes = [
        keras.layers.Layer,
        keras.layers.RNN,
        keras.layers.InputSpec,
        keras.Model,
        keras.Variable,
        keras.KerasTensor,
        keras.initializers.Initializer,
        keras.regularizers.Regularizer,
    ]
    # Instances too: Keras sets most of its private attributes in `__init__`.
    instances = [keras.layers.GRUCell(2), keras.layers.RNN(keras.layers.GRUCell(2))]
    return {
        name
        for thing in [*classes, *instances]
        for name in dir(thing)
        if name.startswith("_") and not name.endswith("__")
    }


def test_the_package_uses_no_private_keras_api():
    # `keras.src` and Keras's underscore attributes may change in any release.
    import ast
    import pathlib

    import tf_memlayers

    root = pathlib.Path(tf_memlayers.__file__).parent
    private = _private_keras_names()
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                modules = []
            found += [f"{where} imports {m}" for m in modules if m.startswith("keras.src")]
            if isinstance(node, ast.Attribute) and node.attr in private:
                found.append(f"{where} uses .{node.attr}")
            if isinstance(node, ast.Constant) and node.value in private:
                found.append(f"{where} names {node.value!r}")
    assert not found, found


# -- bad call inputs ------------------------------------------------------------------------


def _am_gru(**kwargs):
    return AssociativeGRU(4, num_copies=2, **kwargs)


def _dual(**kwargs):
    return DualAssociativeGRU(4, num_copies=2, **kwargs)


_MASK = ["`mask`", "(2, 6)", "(2, 5, 4)"]
_NO_STEPS = ["`sequences` must have at least one time step", "(2, 0, 4)"]
_WIDTH = ["`inputs`", "width 4", "(2, 5, 6)"]
_SYMBOLIC = [keras.Input((5, INPUT_DIM)), keras.Input((8,)), keras.Input((3,))]
# (id, the bad call, fragments its ValueError names). The AM-GRU layers check their arguments
# before choosing a loop (Keras's or the fused one). The carried memories' checks are each
# layer's suite's (`run_carried_memory_tests`).
BAD_CALLS = [
    ("am_gru_mask_too_long", lambda: _am_gru()(X, mask=np.ones((2, 6), bool)), _MASK),
    (
        "am_gru_mask_of_another_batch",
        lambda: _am_gru()(X, mask=np.ones((3, 5), bool)),
        ["`mask`", "(3, 5)", "(2, 5, 4)"],
    ),
    ("am_gru_no_time_steps", lambda: _am_gru()(X[:, :0]), ["`sequences`", *_NO_STEPS[1:]]),
    (
        "am_gru_initial_memory_width",
        lambda: _am_gru()(X, initial_state=[zeros(2, 7), zeros(2, 4)]),
        ["`initial_state[0]`", "8", "(2, 7)"],
    ),
    (
        "am_gru_initial_output_width",
        lambda: _am_gru()(X, initial_state=[zeros(2, 8), zeros(2, 3)]),
        ["`initial_state[1]`", "4", "(2, 3)"],
    ),
    (
        "am_gru_initial_state_batch",
        lambda: _am_gru()(X, initial_state=[zeros(3, 8), zeros(3, 4)]),
        ["`initial_state[0]`", "(3, 8)", "(2, 5, 4)"],
    ),
    (
        "am_gru_one_initial_state",
        lambda: _am_gru()(X, initial_state=[zeros(2, 8)]),
        ["`initial_state`", "2 tensors", "got 1"],
    ),
    (
        "am_gru_symbolic_initial_state_width",
        lambda: _am_gru()(_SYMBOLIC[0], initial_state=_SYMBOLIC[1:]),
        ["`initial_state[1]`", "(None, 3)"],
    ),
    ("dual_am_gru_mask_too_long", lambda: _dual()(X, mask=np.ones((2, 6), bool)), _MASK),
    (
        "dual_am_gru_source_memory_width",
        lambda: _dual()(X, initial_state=[zeros(2, 8), zeros(2, 4), zeros(2, 12)]),
        ["`initial_state[2]`", "8", "(2, 12)"],
    ),
    (
        "dual_am_gru_two_initial_states",
        lambda: _dual()(X, initial_state=[zeros(2, 8), zeros(2, 4)]),
        ["`initial_state`", "3 tensors", "source memory", "got 2"],
    ),
    (
        "dual_am_gru_source_memory_batch",
        lambda: _dual()(X, initial_state=[zeros(2, 8), zeros(2, 4), zeros(3, 8)]),
        ["`initial_state[2]`", "(3, 8)", "(2, 5, 4)"],
    ),
    (
        "ResettableRNN_no_time_steps",
        lambda: ResettableRNN(keras.layers.GRUCell(3))(X[:, :0]),
        ["ResettableRNN: " + _NO_STEPS[0], _NO_STEPS[1]],
    ),
    (
        "AttentionRNN_no_time_steps",
        lambda: AttentionRNN(AttentionWrapper(keras.layers.GRUCell(3)))(
            X[:, :0], memory=zeros(2, 3, 5)
        ),
        ["AttentionRNN: " + _NO_STEPS[0], _NO_STEPS[1]],
    ),
    ("pooling_mask_too_long", lambda: AttentionPooling(3)(X, mask=np.ones((2, 6), bool)), _MASK),
    (
        "pooling_inputs_of_another_width",
        lambda: called_twice(AttentionPooling(3), X, zeros(2, 5, 6)),
        _WIDTH,
    ),
    (
        "split_inputs_of_another_width",
        lambda: called_twice(KeyValuePredictSplit("key_value"), X, zeros(2, 5, 6)),
        _WIDTH,
    ),
    (
        "cache_inputs_of_another_width",
        lambda: called_twice(HeapCacheAttention(3, 2), X[:, 0], zeros(2, 6)),
        ["`inputs`", "width 4", "(2, 6)"],
    ),
]


@pytest.mark.parametrize(
    "bad_call, fragments", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_call_inputs_are_named_errors(bad_call, fragments):
    with pytest.raises(ValueError) as info:
        bad_call()
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
