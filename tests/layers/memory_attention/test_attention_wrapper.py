"""`AttentionWrapper` against a NumPy reference written from the equations (Bahdanau et al.
2015; Luong et al. 2015), cell and sequence forms, masks, resets, state."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import (
    LayerTestCase,
    ResetCellTests,
)
from tests.memory_attention_reference import (
    attention_wrapper_reference as reference,
)
from tests.memory_attention_reference import (
    check_cell_loop_matches_layer,
    check_mixed_precision_matches_float32,
    check_nan_in_padding_never_reaches_outputs_or_gradients,
    check_output_spec_is_exact,
    check_reset_starts_a_row_again,
    check_trains_saves_loads_and_clones,
    data,
    declared_memory,
)
from tests.memory_attention_reference import (
    randomize as _randomize,
)
from tests.memory_attention_reference import (
    wrapper_weights as _weights,
)
from tests.support import all_pairs
from tf_memlayers.layers import (
    AssociativeGRUCell,
    AttentionRNN,
    AttentionWrapper,
)

BATCH, STEPS, LENGTH, MEMORY_DIM, UNITS, INPUT_DIM = 3, 5, 6, 8, 8, 4
SHAPES = (BATCH, STEPS, LENGTH, MEMORY_DIM, INPUT_DIM)


def _data(rng, dtype="float64"):
    return data(rng, SHAPES, dtype)


def _attend_from_hypothesis(premise, hypothesis, **wrapper_kwargs):
    """A ``"pair"`` journey: a GRU reads the hypothesis attending over the premise."""
    cell = AttentionWrapper(keras.layers.GRUCell(6), **wrapper_kwargs)
    return AttentionRNN(cell)(hypothesis, memory=premise)


def _keras_case(make_cell, own_weights):
    """A `keras_checks` case: `AttentionRNN` (``return_sequences=True``) over
    ``make_cell(dtype)``, a GRU cell of 4 units wrapped with ``own_weights`` weights of its
    own, over a memory of width 8. The memory comes in by name, as its own input; Keras's
    training check calls a layer on one input: the journeys fit a model with a memory
    input."""
    return (
        lambda **kw: AttentionRNN(make_cell(kw.get("dtype")), return_sequences=True, **kw),
        {},
        dict(
            input_shape={"sequences_shape": (2, 3, 4), "memory_shape": (2, 6, 8)},
            expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=3 + own_weights,
            expected_num_seed_generators=1,  # the GRU cell's dropout
            supports_masking=True,
            run_training_check=False,
        ),
    )


NAN_PADDING = (
    "takes a memory: test_nan_in_padding_of_either_sequence_never_reaches_outputs_or_gradients"
)
WRAPPER_FLAGS = ("normalize", "output_attention", "return_attention_scores", "input_feeding")


class AttentionWrapperTest(ResetCellTests, LayerTestCase):
    """The shared suites of `AttentionWrapper` (tests/layer_test_case.py)."""

    layer_cls = AttentionWrapper
    make = staticmethod(lambda **kw: AttentionWrapper(keras.layers.GRUCell(4), **kw))
    flags = WRAPPER_FLAGS
    not_in = {
        "cells": "a cell taking its memory at every call, which the cell suites do not pass: "
        "its steps are checked in AttentionRNN and by this module's step tests",
        "keras_checks": "a cell taking its memory at every call, which keras.layers.RNN "
        "does not pass: AttentionRNN's case runs Keras's checks over it",
        "output_spec": "a cell taking a memory: test_output_spec_is_exact",
        "nan_padding": NAN_PADDING,
    }
    journeys = {
        "AttentionWrapper_additive_normalized": (
            "pair",
            lambda p, h: _attend_from_hypothesis(p, h, normalize=True),
        ),
    }
    call_kwargs = staticmethod(declared_memory)


def _layer(score="additive", position="after", output_attention=True, cell=None, **kwargs):
    wrapper = AttentionWrapper(
        cell or keras.layers.SimpleRNNCell(UNITS),
        score=score,
        position=position,
        output_attention=output_attention,
        **kwargs,
    )
    return AttentionRNN(wrapper, return_sequences=True)


# The score functions with their options, each paired with each position and each
# output_attention by `all_pairs` (12 cases; the product is 24); then input_feeding=False,
# which needs position="after", and with output_attention=True lets the attention reach the
# outputs.
SCORE_OPTIONS = {
    "additive": ("additive", {}),
    "additive_normalized": ("additive", {"normalize": True}),
    "dot": ("dot", {}),
    "dot_scaled": ("dot", {"scale": True}),
    "general": ("general", {}),
    "general_scaled": ("general", {"scale": True}),
}
NO_INPUT_FEEDING = {
    "dot_no_input_feeding": ("dot", {"input_feeding": False}),
    "additive_normalized_no_input_feeding": (
        "additive",
        {"normalize": True, "input_feeding": False},
    ),
}


@pytest.mark.parametrize(
    "score_options, position, output_attention",
    all_pairs(sorted(SCORE_OPTIONS), ("after", "before"), (True, False), split_by_backend=True)
    + [pytest.param(name, "after", True, id=f"{name}-after-True") for name in NO_INPUT_FEEDING],
)
def test_matches_the_reference_in_float64(
    float64_policy, score_options, position, output_attention
):
    score, extra = {**SCORE_OPTIONS, **NO_INPUT_FEEDING}[score_options]
    rng = np.random.default_rng(0)
    x, memory, mask = _data(rng)
    # An attention vector of its own width, where the step computes one.
    size = {"attention_size": 7} if position == "after" or output_attention else {}
    layer = _layer(score, position, output_attention, **size, **extra)
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask))
    want, _ = reference(
        x, memory, mask, *_weights(layer), score, position, output_attention, **extra
    )
    np.testing.assert_allclose(got, want, atol=1e-10, rtol=0)
    # Not vacuous: without the memory's padding mask the outputs differ.
    unmasked, _ = reference(
        x, memory, np.ones_like(mask), *_weights(layer), score, position, output_attention, **extra
    )
    assert np.abs(unmasked - want)[1].max() > 1e-3


@pytest.mark.parametrize("position", ["after", "before"])
def test_matches_the_reference_in_float32(position):
    rng = np.random.default_rng(1)
    x, memory, mask = _data(rng, "float32")
    layer = _layer("additive", position)
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask))
    want, _ = reference(
        x.astype(np.float64),
        memory.astype(np.float64),
        mask,
        *_weights(layer),
        "additive",
        position,
        True,
    )
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_masked_steps_of_the_sequence_keep_the_state(float64_policy):
    rng = np.random.default_rng(2)
    x, memory, mask = _data(rng)
    sequence_mask = np.ones((BATCH, STEPS), bool)
    sequence_mask[0, 3:] = False
    sequence_mask[2, 1] = False
    layer = _layer()
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask, mask=sequence_mask))
    want, _ = reference(
        x, memory, mask, *_weights(layer), "additive", "after", True, sequence_mask=sequence_mask
    )
    np.testing.assert_allclose(got, want, atol=1e-10, rtol=0)


def test_a_fully_masked_memory_row_gives_a_zero_context(float64_policy):
    # Attending to nothing: the weights are all zero and so is the context, never NaN.
    rng = np.random.default_rng(3)
    x, memory, mask = _data(rng)
    mask[2] = False
    wrapper = AttentionWrapper(keras.layers.SimpleRNNCell(UNITS), return_attention_scores=True)
    layer = AttentionRNN(wrapper, return_sequences=True)
    outputs, alignments = layer(x, memory=memory, memory_mask=mask)
    alignments = keras.ops.convert_to_numpy(alignments)
    assert np.isfinite(keras.ops.convert_to_numpy(outputs)).all()
    np.testing.assert_array_equal(alignments[2], 0.0)
    # The other rows' weights sum to one over their unmasked memory, zero at its padding.
    np.testing.assert_allclose(alignments[[0, 1]].sum(-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(alignments[1, :, 4:], 0.0)
    _, want = reference(x, memory, mask, *_weights(layer), "additive", "after", True)
    np.testing.assert_allclose(alignments, want, atol=1e-10, rtol=0)


def test_the_cell_in_a_loop_of_ones_own_gives_the_sequence_forms_outputs_and_gradients():
    rng = np.random.default_rng(4)
    x, memory, mask = _data(rng, "float32")
    layer = _layer("general", "before", scale=True)
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    check_cell_loop_matches_layer(layer, x, memory, mask)


def test_a_reset_starts_a_row_again():
    rng = np.random.default_rng(5)
    x, memory, mask = _data(rng, "float32")
    layer = _layer()
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    check_reset_starts_a_row_again(layer, x, memory, mask)


WRAPPED_CELLS = {
    "lstm": lambda: keras.layers.LSTMCell(UNITS),
    "gru": lambda: keras.layers.GRUCell(UNITS),
    "am_gru": lambda: AssociativeGRUCell(UNITS, num_copies=2),
}


# Each cell attending step by step and after the loop, the backend one more factor
# (`all_pairs`): each pass trains every cell and both ways.
@pytest.mark.parametrize(
    "cell, attend",
    all_pairs(list(WRAPPED_CELLS), ["step_by_step", "after_the_loop"], split_by_backend=True),
)
def test_wraps_any_cell_trains_saves_and_loads(cell, attend, tmp_path):
    x, memory, mask = _data(np.random.default_rng(7), "float32")
    wrapper = AttentionWrapper(
        WRAPPED_CELLS[cell](), attention_size=6, input_feeding=attend == "step_by_step"
    )
    check_trains_saves_loads_and_clones(wrapper, x, memory, mask, tmp_path / "model.keras")


@pytest.mark.parametrize("input_feeding", [True, False], ids=["step_by_step", "after_the_loop"])
@pytest.mark.parametrize("policy, atol", [("mixed_float16", 2e-2), ("mixed_bfloat16", 6e-2)])
def test_mixed_precision_matches_float32(policy, atol, input_feeding):
    x, memory, mask = _data(np.random.default_rng(8), "float32")
    check_mixed_precision_matches_float32(
        lambda: _layer(input_feeding=input_feeding), x, memory, mask, policy, atol
    )


@pytest.mark.parametrize(
    "call, error, fragment",
    [
        (lambda layer, x, m, k: layer(x), ValueError, "no `memory` given"),
        (lambda layer, x, m, k: layer(x, memory=m[:, :, :4]), ValueError, "[batch, length, 8]"),
        (lambda layer, x, m, k: layer(x, memory=m[0]), ValueError, "`memory` must be"),
        (
            lambda layer, x, m, k: layer(x, memory=m, memory_mask=k[:, :3]),
            ValueError,
            "`memory_mask` must be [batch, length] = (3, 6)",
        ),
    ],
    ids=["no memory", "wrong width", "wrong rank", "mask shape"],
)
def test_bad_calls_are_named(call, error, fragment):
    x, memory, mask = _data(np.random.default_rng(9), "float32")
    layer = _layer()
    layer(x, memory=memory, memory_mask=mask)
    with pytest.raises(error) as raised:
        call(layer, x, memory, mask)
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"score": "concat"}, ValueError, "`score` must be one of 'additive', 'dot', 'general'"),
        ({"position": "inside"}, ValueError, "`position` must be one of"),
        ({"score": "dot", "normalize": True}, ValueError, "`normalize=True`"),
        ({"scale": True}, ValueError, "`scale=True`"),
        ({"attention_size": 0}, ValueError, "`attention_size` must be >= 1"),
        ({"return_attention_scores": "yes"}, TypeError, "`return_attention_scores` must be a bool"),
        ({"position": "before", "input_feeding": False}, ValueError, "`input_feeding=False`"),
        ({"input_feeding": 1}, TypeError, "`input_feeding` must be a bool"),
        (
            {"score": "dot", "attention_units": 32},
            ValueError,
            "got attention_units=32 with score='dot'",
        ),
        (
            {"score": "general", "attention_units": 32},
            ValueError,
            "got attention_units=32 with score='general'",
        ),
        (
            {"position": "before", "output_attention": False, "attention_size": 32},
            ValueError,
            "never computes with output_attention=False and position='before'; got "
            "attention_size=32",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, error, fragment):
    with pytest.raises(error) as raised:
        AttentionWrapper(keras.layers.GRUCell(4), **kwargs)
    assert fragment in str(raised.value)


def test_dot_needs_a_query_as_wide_as_the_memory():
    x, memory, mask = _data(np.random.default_rng(10), "float32")
    layer = AttentionRNN(AttentionWrapper(keras.layers.GRUCell(5), score="dot"))
    with pytest.raises(ValueError, match="score='dot' needs the query"):
        layer(x, memory=memory)


def test_nan_in_padding_of_either_sequence_never_reaches_outputs_or_gradients():
    x, memory, mask = _data(np.random.default_rng(11), "float32")
    layer = AttentionRNN(
        AttentionWrapper(keras.layers.GRUCell(UNITS)),
        return_sequences=True,
        zero_output_for_mask=True,
    )
    check_nan_in_padding_never_reaches_outputs_or_gradients(layer, x, memory, mask)


@pytest.mark.parametrize("return_state", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_output_spec_is_exact(policy, return_sequences, return_state):
    x, memory, mask = _data(np.random.default_rng(12), "float32")
    cell = AttentionWrapper(
        keras.layers.LSTMCell(UNITS, dtype=policy),
        return_attention_scores=True,
        attention_size=7,
        dtype=policy,
    )
    layer = AttentionRNN(
        cell, return_sequences=return_sequences, return_state=return_state, dtype=policy
    )
    head = (BATCH, STEPS) if return_sequences else (BATCH,)
    widths = [7, LENGTH] + ([UNITS, UNITS, 7] if return_state else [])
    shapes = [head + (widths[0],), head + (widths[1],)] + [(BATCH, w) for w in widths[2:]]
    check_output_spec_is_exact(layer, x, memory, mask, shapes, policy)


@pytest.mark.parametrize(
    "initializer",
    [
        "glorot_uniform",
        keras.initializers.RandomUniform(-0.1, 0.1, seed=keras.random.SeedGenerator(3)),
    ],
    ids=["unseeded", "seed_generator"],
)
def test_kernels_drawn_from_one_initializer_start_independent(initializer):
    # The query and memory kernels have one shape here: a stateless initializer used for both
    # would start them equal.
    cell = AttentionWrapper(keras.layers.GRUCell(UNITS), kernel_initializer=initializer)
    cell.build((None, INPUT_DIM), (None, LENGTH, UNITS))
    query, memory = (keras.ops.convert_to_numpy(k) for k in (cell.query_kernel, cell.memory_kernel))
    assert query.shape == memory.shape and not np.allclose(query, memory)
