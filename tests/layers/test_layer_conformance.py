"""Keras conformance of every public layer and cell.

* `run_layer_test` (Keras's own layer checks: serialization, build, symbolic and eager calls,
  a compiled training step, output specs under ``mixed_float16``) for every public layer, and
  for every cell inside `keras.layers.RNN`;
* a cell's new states keep their static shapes when the batch size is unknown (the loop of
  `keras.layers.RNN` refuses states whose shape changes);
* exact `compute_output_shape` / `compute_output_spec`, dtypes included;
* bad call inputs (wrong mask, memory or state shapes, empty sequences) raise a clear error
  naming the argument and the shapes; NaN at padded steps never reaches the outputs.
"""

import keras
import numpy as np
import pytest
from support import BACKEND, FUSED_LOOP, TF_FUNCTION, gradients, tensorflow_only
from keras import ops
from keras.src import testing  # Keras's layer test harness (tests only)
from layer_registry import INPUT_DIM, declared_makers, suite_cases

from tf_memlayers.layers import (
    AssociativeGRU,
    AttentionPooling,
    DualAssociativeGRU,
    HeapCacheAttention,
    KeyValuePredictSplit,
    SlidingWindowAttention,
)
from tf_memlayers.layers.window_attention.sequence_layer import MemorySequenceLayer



def _cases(names, fused=lambda name: "fused" in name):
    """``names`` as pytest params; the ones with the fused AM-GRU loop are TensorFlow only."""
    return [
        pytest.param(name, marks=tensorflow_only(FUSED_LOOP)) if fused(name) else name
        for name in names
    ]


# Every cell (and the options that change its states or output), as a factory taking
# `dtype`, so that the mixed precision check makes the cell under the same policy.
CELLS = suite_cases("cells")


@tensorflow_only(f"{TF_FUNCTION}: an unknown batch size exists only in TensorFlow graphs")
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_states_keep_their_static_shapes_with_an_unknown_batch(name):
    # keras.layers.RNN runs the cell in a while loop whose states must keep their shapes;
    # with a partial batch (unknown batch size) the window memory came back as (None, None).
    import tensorflow as tf

    cell = CELLS[name]()
    cell.build((None, INPUT_DIM))
    sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
    shapes = {}

    @tf.function(
        input_signature=[tf.TensorSpec((None, INPUT_DIM))]
        + [tf.TensorSpec((None, size)) for size in sizes]
    )
    def step(inputs, *states):
        output, new_states = cell(inputs, list(states))
        shapes["output"] = tuple(output.shape)
        shapes["states"] = [tuple(s.shape) for s in keras.tree.flatten(new_states)]
        return output

    step.get_concrete_function()
    assert shapes["output"] == (None, cell.output_size)
    assert shapes["states"] == [(None, size) for size in sizes]


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


# Every declared sequence layer with a carried memory (tests/layer_registry.py).
MEMORY_SEQUENCE_LAYERS = declared_makers(base=MemorySequenceLayer)

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
        lambda: DualAssociativeGRU(4, num_copies=2)(
            X, initial_state=[_zeros(2, 8), _zeros(2, 4)]
        ),
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
    *[
        row
        for name, make in MEMORY_SEQUENCE_LAYERS.items()
        for row in (
            (
                f"{name}_mask_too_long",
                lambda make=make: make()(X, mask=ONES((2, 6), bool)),
                ValueError,
                ["`mask`", "(2, 6)", "(2, 5, 4)"],
            ),
            (
                f"{name}_mask_of_another_batch",
                lambda make=make: make()(X, mask=ONES((3, 5), bool)),
                ValueError,
                ["`mask`", "(3, 5)", "(2, 5, 4)"],
            ),
            (
                f"{name}_mask_of_rank_3",
                lambda make=make: make()(X, mask=ONES((2, 5, 1), bool)),
                ValueError,
                ["`mask`", "(2, 5, 1)", "(2, 5, 4)"],
            ),
            (
                f"{name}_symbolic_mask_too_long",
                lambda make=make: make()(
                    keras.Input((5, INPUT_DIM)), mask=keras.Input((6,), dtype="bool")
                ),
                ValueError,
                ["`mask`", "(None, 6)", "(None, 5, 4)"],
            ),
            (
                f"{name}_initial_memory_of_another_batch",
                lambda make=make: make()(X, initial_memory=_zeros(3, make().memory_size_for(4))),
                ValueError,
                ["`initial_memory`", "(3, ", "(2, 5, 4)"],
            ),
            (
                f"{name}_stateful_batch_of_another_size",
                lambda make=make: _called_twice(make(stateful=True), X, X[:1]),
                ValueError,
                ["`inputs`", "(1, 5, 4)", "memory of shape (2, "],
            ),
            (
                f"{name}_stateful_with_initial_memory_of_another_batch",
                lambda make=make: _called_twice(
                    make(stateful=True),
                    X,
                    X[:1],
                    initial_memory=_zeros(1, make().memory_size_for(4)),
                ),
                ValueError,
                ["`inputs`", "(1, 5, 4)", "memory of shape (2, "],
            ),
            (
                f"{name}_inputs_of_another_width",
                lambda make=make: _called_twice(make(), X, _zeros(2, 5, 6)),
                ValueError,
                ["`inputs`", "width 4", "(2, 5, 6)"],
            ),
        )
    ],
    (
        "window_initial_memory_width",
        lambda: SlidingWindowAttention(3)(X, initial_memory=_zeros(2, 14)),
        ValueError,
        ["`initial_memory`", "width 15", "(2, 14)"],
    ),
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


# -- non-finite values at padded steps ------------------------------------------------------

# Layers whose documentation promises zero outputs at masked steps (sequence outputs), or
# that never read masked steps (pooled outputs).
NAN_PADDING = suite_cases("nan_padding")


@pytest.mark.parametrize("name", _cases(sorted(NAN_PADDING)))
def test_nan_at_padded_steps_never_reaches_outputs_or_gradients(name):
    layer = NAN_PADDING[name]()
    mask = np.ones((3, 5), bool)
    mask[1, 3:] = False  # right padding
    mask[2, :2] = False  # left padding
    inputs = np.random.default_rng(1).normal(size=(3, 5, INPUT_DIM)).astype("float32")
    inputs[~mask] = np.nan
    outputs = np.asarray(ops.convert_to_numpy(layer(inputs, mask=mask)))
    _, weight_gradients, _ = gradients(
        lambda: ops.sum(ops.square(layer(inputs, mask=mask))), layer.trainable_weights
    )
    assert np.isfinite(outputs).all()
    if outputs.ndim == 3:
        np.testing.assert_array_equal(outputs[~mask], 0.0)
    for weight, gradient in zip(layer.trainable_weights, weight_gradients):
        assert np.isfinite(gradient).all(), weight.path


# -- output shapes and specs ----------------------------------------------------------------

# (layer factory taking `dtype`, input shape, call keyword arguments)
SPEC_CASES = suite_cases("output_spec")


def _shape_list(shapes):
    """A `compute_output_shape` result (one shape, or a tuple of shapes) as a list of tuples."""
    if isinstance(shapes[0], (int, type(None))):
        return [tuple(shapes)]
    return [tuple(shape) for shape in shapes]


def _shapes_and_dtypes(outputs):
    return [
        (tuple(t.shape), keras.backend.standardize_dtype(t.dtype))
        for t in keras.tree.flatten(outputs)
    ]


def _per_input(shape, make):
    """``make(shape)``, or for a layer over several inputs (``shape`` a list of shapes) the
    list of ``make`` of each."""
    return [make(one) for one in shape] if isinstance(shape, list) else make(shape)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize("name", _cases(sorted(SPEC_CASES)))
def test_output_shape_and_spec_are_exact(name, policy):
    make, shape, call_kwargs = SPEC_CASES[name]
    rng = np.random.default_rng(2)
    inputs = _per_input(shape, lambda one: rng.normal(size=one).astype("float32"))
    eager = _shapes_and_dtypes(make(policy)(inputs, **call_kwargs))

    # The spec of a layer that is not built yet (what Keras asks for first) ...
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    spec = make(policy).compute_output_spec(
        _per_input(shape, lambda one: keras.KerasTensor(one, compute_dtype)), **call_kwargs
    )
    assert _shapes_and_dtypes(spec) == eager
    # ... the symbolic call in a functional model ...
    symbolic = make(policy)(
        _per_input(shape, lambda one: keras.Input(batch_shape=one)), **call_kwargs
    )
    assert _shapes_and_dtypes(symbolic) == eager
    # ... and compute_output_shape, which needs no dtype.
    if not call_kwargs:
        computed = make(policy).compute_output_shape(shape)
        assert _shape_list(computed) == [s for s, _ in eager]


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_step_spec_is_exact(name, policy):
    # A cell called on symbolic tensors (one step, e.g. in a hand-written decoder).
    dtype = keras.DTypePolicy(policy).compute_dtype
    cell = CELLS[name](policy)
    sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
    eager = _shapes_and_dtypes(
        cell(np.ones((2, INPUT_DIM), dtype), [np.zeros((2, size), dtype) for size in sizes])
    )
    inputs = keras.Input(batch_shape=(2, INPUT_DIM), dtype=dtype)
    states = [keras.Input(batch_shape=(2, size), dtype=dtype) for size in sizes]
    # Asked directly (as Keras's layer checks do; the spec inferred by tracing `call` outside
    # the layer's autocast scope said float32 under mixed precision) ...
    assert _shapes_and_dtypes(cell.compute_output_spec(inputs, states)) == eager
    # ... and through a symbolic call of a new cell.
    assert _shapes_and_dtypes(CELLS[name](policy)(inputs, states)) == eager


# -- empty sequences and batches ------------------------------------------------------------

EMPTY_CASES = suite_cases("empty")


@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "mask"])
@pytest.mark.parametrize("shape", [(2, 0, 4), (0, 5, 4)], ids=["no_steps", "no_sequences"])
@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_empty_sequences_and_batches_give_empty_outputs(name, shape, with_mask):
    layer = EMPTY_CASES[name]()
    mask = np.ones(shape[:2], bool) if with_mask else None
    outputs = keras.tree.flatten(layer(np.zeros(shape, "float32"), mask=mask))
    assert [tuple(t.shape) for t in outputs] == _shape_list(layer.compute_output_shape(shape))
    if name != "pooling" and shape[1] == 0:
        # Nothing happened: the memory is still the (zero) initial memory.
        np.testing.assert_array_equal(np.asarray(outputs[-1]), 0.0)


# -- Keras's own layer checks ---------------------------------------------------------------

KERAS_CHECKS = testing.TestCase()


# (layer_cls, init_kwargs, run_layer_test arguments); the inputs are [2, 3, features].
LAYER_TESTS = suite_cases("keras_checks")


@pytest.mark.parametrize("name", _cases(sorted(LAYER_TESTS)))
def test_keras_layer_checks(name):
    layer_cls, init_kwargs, arguments = LAYER_TESTS[name]
    arguments.setdefault("expected_num_non_trainable_weights", 0)
    arguments.setdefault("expected_num_seed_generators", 0)
    KERAS_CHECKS.run_layer_test(layer_cls, init_kwargs, **arguments)
