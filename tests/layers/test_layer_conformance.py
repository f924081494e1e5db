"""What holds across the layers beyond their test classes' shared suites
(tests/layer_test_case.py): the package uses no private Keras API, and bad call inputs of the
recurrent, pooling, split and cache layers (a wrong mask, memory or state shape, no time
steps) raise an error naming the argument and the shapes.
"""

import keras
import numpy as np
import pytest

from tests.layer_test_case import INPUT_DIM
from tests.support import BACKEND, FUSED_LOOP, tensorflow_only
from tf_memlayers.layers import (
    AssociativeGRU,
    AttentionPooling,
    AttentionRNN,
    AttentionWrapper,
    DualAssociativeGRU,
    HeapCacheAttention,
    KeyValuePredictSplit,
    ResettableRNN,
    SlidingWindowAttention,
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

X = np.random.default_rng(0).normal(size=(2, 5, INPUT_DIM)).astype("float32")
ONES = np.ones
# The fused AM-GRU loop where the backend has it (TensorFlow), else Keras's loop: for the
# checks that both loops share.
FUSED_IF_AVAILABLE = BACKEND == "tensorflow"


def _zeros(*shape):
    return np.zeros(shape, "float32")


def _called_twice(layer, first, second, **kwargs):
    """Builds ``layer`` on ``first``, then calls it on ``second``."""
    layer(first)
    return layer(second, **kwargs)


def _am_gru(**kwargs):
    return AssociativeGRU(4, num_copies=2, **kwargs)


# (id, the bad call, exception type, fragments the message must contain)
BAD_CALLS = [
    *[
        (
            f"am_gru_{loop}_mask_too_long",
            lambda fused=fused: _am_gru(fused_loop=fused)(X, mask=ONES((2, 6), bool)),
            ValueError,
            ["`mask`", "(2, 6)", "(2, 5, 4)"],
        )
        for loop, fused in (("keras_loop", False), ("fused_loop", True))
    ],
    *[
        (
            f"am_gru_{loop}_mask_of_another_batch",
            lambda fused=fused: _am_gru(fused_loop=fused)(X, mask=ONES((3, 5), bool)),
            ValueError,
            ["`mask`", "(3, 5)", "(2, 5, 4)"],
        )
        for loop, fused in (("keras_loop", False), ("fused_loop", True))
    ],
    *[
        (
            f"am_gru_{loop}_no_time_steps",
            lambda fused=fused: _am_gru(fused_loop=fused)(X[:, :0]),
            ValueError,
            ["`sequences`", "time step", "(2, 0, 4)"],
        )
        for loop, fused in (("keras_loop", False), ("fused_loop", True))
    ],
    *[
        (
            f"am_gru_{loop}_initial_memory_width",
            lambda fused=fused: _am_gru(fused_loop=fused)(
                X, initial_state=[_zeros(2, 7), _zeros(2, 4)]
            ),
            ValueError,
            ["`initial_state[0]`", "8", "(2, 7)"],
        )
        for loop, fused in (("keras_loop", False), ("fused_loop", True))
    ],
    (
        "am_gru_initial_output_width",
        lambda: _am_gru()(X, initial_state=[_zeros(2, 8), _zeros(2, 3)]),
        ValueError,
        ["`initial_state[1]`", "4", "(2, 3)"],
    ),
    (
        "am_gru_initial_state_batch",
        lambda: _am_gru(fused_loop=FUSED_IF_AVAILABLE)(
            X, initial_state=[_zeros(3, 8), _zeros(3, 4)]
        ),
        ValueError,
        ["`initial_state[0]`", "(3, 8)", "(2, 5, 4)"],
    ),
    (
        "am_gru_one_initial_state",
        lambda: _am_gru()(X, initial_state=[_zeros(2, 8)]),
        ValueError,
        ["`initial_state`", "2 tensors", "got 1"],
    ),
    (
        "am_gru_symbolic_initial_state_width",
        lambda: _am_gru()(
            keras.Input((5, INPUT_DIM)), initial_state=[keras.Input((8,)), keras.Input((3,))]
        ),
        ValueError,
        ["`initial_state[1]`", "(None, 3)"],
    ),
    *[
        (
            f"dual_am_gru_{loop}_mask_too_long",
            lambda fused=fused: DualAssociativeGRU(4, num_copies=2, fused_loop=fused)(
                X, mask=ONES((2, 6), bool)
            ),
            ValueError,
            ["`mask`", "(2, 6)", "(2, 5, 4)"],
        )
        for loop, fused in (("keras_loop", False), ("fused_loop", True))
    ],
    *[
        (
            f"dual_am_gru_{loop}_source_memory_width",
            lambda fused=fused: DualAssociativeGRU(4, num_copies=2, fused_loop=fused)(
                X, initial_state=[_zeros(2, 8), _zeros(2, 4), _zeros(2, 12)]
            ),
            ValueError,
            ["`initial_state[2]`", "8", "(2, 12)"],
        )
        for loop, fused in (("keras_loop", False), ("fused_loop", True))
    ],
    (
        "dual_am_gru_two_initial_states",
        lambda: DualAssociativeGRU(4, num_copies=2)(X, initial_state=[_zeros(2, 8), _zeros(2, 4)]),
        ValueError,
        ["`initial_state`", "3 tensors", "source memory", "got 2"],
    ),
    (
        "dual_am_gru_source_memory_batch",
        lambda: DualAssociativeGRU(4, num_copies=2, fused_loop=FUSED_IF_AVAILABLE)(
            X, initial_state=[_zeros(2, 8), _zeros(2, 4), _zeros(3, 8)]
        ),
        ValueError,
        ["`initial_state[2]`", "(3, 8)", "(2, 5, 4)"],
    ),
    (
        "window_initial_memory_width",
        lambda: SlidingWindowAttention(3)(X, initial_memory=_zeros(2, 14)),
        ValueError,
        ["`initial_memory`", "width 15", "(2, 14)"],
    ),
    *[
        (
            f"{name}_no_time_steps",
            lambda call=call: call(X[:, :0]),
            ValueError,
            [f"{name}: `sequences` must have at least one time step", "(2, 0, 4)"],
        )
        for name, call in (
            ("ResettableRNN", lambda x: ResettableRNN(keras.layers.GRUCell(3))(x)),
            (
                "AttentionRNN",
                lambda x: AttentionRNN(AttentionWrapper(keras.layers.GRUCell(3)))(
                    x, memory=_zeros(2, 3, 5)
                ),
            ),
        )
    ],
    (
        "pooling_mask_too_long",
        lambda: AttentionPooling(3)(X, mask=ONES((2, 6), bool)),
        ValueError,
        ["`mask`", "(2, 6)", "(2, 5, 4)"],
    ),
    (
        "pooling_inputs_of_another_width",
        lambda: _called_twice(AttentionPooling(3), X, _zeros(2, 5, 6)),
        ValueError,
        ["`inputs`", "width 4", "(2, 5, 6)"],
    ),
    (
        "split_inputs_of_another_width",
        lambda: _called_twice(KeyValuePredictSplit("key_value"), X, _zeros(2, 5, 6)),
        ValueError,
        ["`inputs`", "width 4", "(2, 5, 6)"],
    ),
    (
        "cache_inputs_of_another_width",
        lambda: _called_twice(HeapCacheAttention(3, 2), X[:, 0], _zeros(2, 6)),
        ValueError,
        ["`inputs`", "width 4", "(2, 6)"],
    ),
]


@pytest.mark.parametrize(
    "bad_call, error, fragments",
    [
        pytest.param(*case[1:], id=case[0], marks=tensorflow_only(FUSED_LOOP))
        if "fused" in case[0]
        else pytest.param(*case[1:], id=case[0])
        for case in BAD_CALLS
    ],
)
def test_bad_call_inputs_are_named_errors(bad_call, error, fragments):
    with pytest.raises(error) as info:
        bad_call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
