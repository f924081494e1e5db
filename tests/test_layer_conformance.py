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
import tensorflow as tf

from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    AssociativeMemoryCell,
    DualAssociativeGRUCell,
    NGramConcatCell,
    SlidingWindowAttentionCell,
)

INPUT_DIM = 4

# Every cell (and the options that change its states or output), as a factory taking
# `dtype`, so that the mixed precision check makes the cell under the same policy.
CELLS = {
    "window_attention": lambda dtype=None: SlidingWindowAttentionCell(
        keras.layers.LSTMCell(6, dtype=dtype), window=3, dtype=dtype
    ),
    "window_key_value": lambda dtype=None: SlidingWindowAttentionCell(
        keras.layers.GRUCell(6, dtype=dtype), window=2, mode="key_value", dtype=dtype
    ),
    "window_key_value_predict": lambda dtype=None: SlidingWindowAttentionCell(
        keras.layers.LSTMCell(6, dtype=dtype),
        window=3,
        mode="key_value_predict",
        units=5,
        use_bias=True,
        dtype=dtype,
    ),
    "ngram_2": lambda dtype=None: NGramConcatCell(
        keras.layers.GRUCell(6, dtype=dtype), n=2, units=5, dtype=dtype
    ),
    "ngram_4": lambda dtype=None: NGramConcatCell(
        keras.layers.LSTMCell(6, dtype=dtype), n=4, units=5, use_bias=True, dtype=dtype
    ),
    "associative_memory_lstm": lambda dtype=None: AssociativeMemoryCell(
        keras.layers.LSTMCell(6, dtype=dtype), num_copies=2, dtype=dtype
    ),
    "associative_memory_gru": lambda dtype=None: AssociativeMemoryCell(
        keras.layers.GRUCell(6, dtype=dtype), num_copies=3, return_retrievals=True, dtype=dtype
    ),
    "am_gru": lambda dtype=None: AssociativeGRUCell(6, num_copies=2, dtype=dtype),
    "am_gru_retrievals": lambda dtype=None: AssociativeGRUCell(
        6, num_copies=1, return_retrievals=True, dtype=dtype
    ),
    "dual_am_gru_paper": lambda dtype=None: DualAssociativeGRUCell(6, num_copies=2, dtype=dtype),
    "dual_am_gru_released": lambda dtype=None: DualAssociativeGRUCell(
        6, num_copies=2, dual_key="released", return_retrievals=True, dtype=dtype
    ),
}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_states_keep_their_static_shapes_with_an_unknown_batch(name):
    # keras.layers.RNN runs the cell in a while loop whose states must keep their shapes;
    # with a partial batch (unknown batch size) the window memory came back as (None, None).
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


def test_layers_and_ops_use_no_private_keras_api():
    # `keras.src` and Keras's underscore attributes may change in any release.
    import ast
    import pathlib

    import tf_memlayers

    root = pathlib.Path(tf_memlayers.__file__).parent
    private = _private_keras_names()
    found = []
    for path in sorted([*root.glob("layers/*.py"), *root.glob("ops/*.py")]):
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


def _zeros(*shape):
    return np.zeros(shape, "float32")


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
        lambda: _am_gru(fused_loop=True)(X, initial_state=[_zeros(3, 8), _zeros(3, 4)]),
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
]


@pytest.mark.parametrize(
    "bad_call, error, fragments",
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
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
NAN_PADDING = {
    "am_gru_keras_loop": lambda: AssociativeGRU(
        4, num_copies=2, return_sequences=True, zero_output_for_mask=True
    ),
    "am_gru_fused_loop": lambda: AssociativeGRU(
        4, num_copies=2, return_sequences=True, zero_output_for_mask=True, fused_loop=True
    ),
}


@pytest.mark.parametrize("name", sorted(NAN_PADDING))
def test_nan_at_padded_steps_never_reaches_outputs_or_gradients(name):
    layer = NAN_PADDING[name]()
    mask = np.ones((3, 5), bool)
    mask[1, 3:] = False  # right padding
    mask[2, :2] = False  # left padding
    inputs = np.random.default_rng(1).normal(size=(3, 5, INPUT_DIM)).astype("float32")
    inputs[~mask] = np.nan
    with tf.GradientTape() as tape:
        outputs = layer(inputs, mask=mask)
        loss = tf.reduce_sum(tf.square(outputs))
    gradients = tape.gradient(loss, layer.trainable_weights)
    outputs = outputs.numpy()
    assert np.isfinite(outputs).all()
    if outputs.ndim == 3:
        np.testing.assert_array_equal(outputs[~mask], 0.0)
    for weight, gradient in zip(layer.trainable_weights, gradients):
        assert np.isfinite(np.asarray(gradient)).all(), weight.path
