"""`AttentionWrapper` and `AttentionRNN` against a NumPy reference written from the equations
(Bahdanau et al. 2015; Luong et al. 2015), cell and sequence forms, masks, resets, state."""

import itertools

import keras
import numpy as np
import pytest

from layer_registry import RNN_LAYER_FLAGS, Declaration
from support import gradients
from tf_memlayers.layers import (
    AssociativeGRUCell,
    AttentionRNN,
    AttentionWrapper,
    WordByWordAttention,
)

BATCH, STEPS, LENGTH, MEMORY_DIM, UNITS, INPUT_DIM = 3, 5, 6, 8, 8, 4


def _declared_memory(batch):
    """The memory the suites over every layer pass: ``[batch, 4, 6]``."""
    return {"memory": np.random.default_rng(batch).normal(size=(batch, 4, 6)).astype("float32")}


def _attend_from_hypothesis(premise, hypothesis, **wrapper_kwargs):
    """A ``"pair"`` journey: a GRU reads the hypothesis attending over the premise."""
    cell = AttentionWrapper(keras.layers.GRUCell(6), **wrapper_kwargs)
    return AttentionRNN(cell)(hypothesis, memory=premise)


NAN_PADDING = "takes a memory: test_nan_in_padding_of_either_sequence_never_reaches_outputs_or_gradients"
WRAPPER_FLAGS = ("normalize", "output_attention", "return_alignments", "input_feeding")

DECLARATIONS = (
    Declaration(
        AttentionRNN,
        lambda **kw: AttentionRNN(AttentionWrapper(keras.layers.GRUCell(4)), **kw),
        flags=tuple(flag for flag in RNN_LAYER_FLAGS if flag != "return_retrievals"),
        call_kwargs=_declared_memory,
        not_in={
            "nan_padding": NAN_PADDING,
            "output_spec": "takes a memory: test_output_spec_is_exact",
        },
        keras_checks={
            "attention_rnn": (
                lambda **kw: AttentionRNN(
                    AttentionWrapper(keras.layers.GRUCell(4, dtype=kw.get("dtype")),
                                     dtype=kw.get("dtype")),
                    return_sequences=True, **kw,
                ),
                {},
                # The memory comes in by name, as its own input; Keras's training check
                # calls a layer on one input: the journeys fit a model with a memory input.
                dict(
                    input_shape={"sequences_shape": (2, 3, 4), "memory_shape": (2, 6, 8)},
                    expected_output_shape=(2, 3, 4),
                    expected_num_trainable_weights=3 + 4,
                    expected_num_seed_generators=1,  # the GRU cell's dropout
                    supports_masking=True,
                    run_training_check=False,
                ),
            ),
            "attention_rnn_word_by_word": (
                lambda **kw: AttentionRNN(
                    WordByWordAttention(keras.layers.GRUCell(4, dtype=kw.get("dtype")),
                                        memory_dim=8, dtype=kw.get("dtype")),
                    return_sequences=True, **kw,
                ),
                {},
                dict(
                    input_shape={"sequences_shape": (2, 3, 4), "memory_shape": (2, 6, 8)},
                    expected_output_shape=(2, 3, 4),
                    expected_num_trainable_weights=3 + 5,
                    expected_num_seed_generators=1,  # the GRU cell's dropout
                    supports_masking=True,
                    run_training_check=False,
                ),
            ),
        },
        journeys={
            "AttentionRNN": ("pair", _attend_from_hypothesis),
            "AttentionRNN_before_dot": (
                "pair", lambda p, h: _attend_from_hypothesis(p, h, score="general",
                                                             position="before")
            ),
        },
    ),
    Declaration(
        AttentionWrapper,
        lambda **kw: AttentionWrapper(keras.layers.GRUCell(4), **kw),
        flags=WRAPPER_FLAGS,
        call_kwargs=_declared_memory,
        not_in={
            "keras_checks": "a cell taking its memory at every call, which keras.layers.RNN "
            "does not pass: AttentionRNN's case runs Keras's checks over it",
            "output_spec": "a cell taking a memory: test_output_spec_is_exact",
            "nan_padding": NAN_PADDING,
        },
        journeys={
            "AttentionWrapper_additive_normalized": (
                "pair", lambda p, h: _attend_from_hypothesis(p, h, normalize=True)
            ),
        },
    ),
)


def _softmax(scores, mask):
    scores = np.where(mask, scores, -np.inf)
    top = np.max(np.where(mask, scores, -1e300), axis=-1, keepdims=True)
    weights = np.where(mask, np.exp(np.where(mask, scores - top, 0.0)), 0.0)
    total = weights.sum(-1, keepdims=True)
    return np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)


def reference(x, memory, mask, cell_weights, w, score, position, output_attention,
              normalize=False, scale=False, sequence_mask=None, input_feeding=True):  # fmt: skip
    """The wrapper around a SimpleRNN cell (h = tanh(x W + h U + b)), step by step, in float64.

    Returns the outputs ``[batch, time, ...]`` and the weights ``[batch, time, length]``."""
    kernel, recurrent, bias = cell_weights
    batch, steps = x.shape[:2]
    h = np.zeros((batch, recurrent.shape[0]))
    fed = np.zeros((batch, w["attention_kernel"].shape[1] if position == "after" else h.shape[1]))
    if sequence_mask is None:
        sequence_mask = np.ones((batch, steps), bool)

    def attend(query):
        if score == "additive":
            hidden = (memory @ w["memory_kernel"]) + (query @ w["query_kernel"])[:, None]
            vector = w["score_vector"]
            if normalize:
                hidden = hidden + w["score_bias"]
                vector = w["score_norm"] * vector / np.linalg.norm(vector)
            e = np.tanh(hidden) @ vector
        elif score == "dot":
            e = np.einsum("bld,bd->bl", memory, query)
        else:
            e = np.einsum("bld,bd->bl", memory @ w["memory_kernel"], query)
        if scale:
            e = w["score_scale"] * e
        alpha = _softmax(e, mask)
        return np.einsum("bl,bld->bd", alpha, memory), alpha

    outputs, alignments, previous = [], [], None
    for t in range(steps):
        if position == "after":
            cell_input = np.concatenate([x[:, t], fed], -1) if input_feeding else x[:, t]
            new_h = np.tanh(cell_input @ kernel + h @ recurrent + bias)
            context, alpha = attend(new_h)
            attention = np.tanh(np.concatenate([context, new_h], -1) @ w["attention_kernel"])
            new_fed = attention
        else:
            context, alpha = attend(fed)
            new_h = np.tanh(np.concatenate([x[:, t], context], -1) @ kernel + h @ recurrent + bias)
            attention = None
            if output_attention:
                attention = np.tanh(np.concatenate([context, new_h], -1) @ w["attention_kernel"])
            new_fed = new_h
        out = attention if output_attention else new_h
        keep = sequence_mask[:, t][:, None]
        h, fed = np.where(keep, new_h, h), np.where(keep, new_fed, fed)
        previous = out if previous is None else np.where(keep, out, previous)
        outputs.append(np.where(keep, out, previous))
        alignments.append(alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


def _data(rng, dtype="float64"):
    x = rng.normal(size=(BATCH, STEPS, INPUT_DIM)).astype(dtype)
    memory = rng.normal(size=(BATCH, LENGTH, MEMORY_DIM)).astype(dtype)
    mask = np.ones((BATCH, LENGTH), bool)
    mask[1, 4:] = False  # padding
    return x, memory, mask


def _layer(score="additive", position="after", output_attention=True, cell=None, **kwargs):
    wrapper = AttentionWrapper(
        cell or keras.layers.SimpleRNNCell(UNITS), score=score, position=position,
        output_attention=output_attention, **kwargs,
    )  # fmt: skip
    return AttentionRNN(wrapper, return_sequences=True)


def _randomize(layer, rng, scale=0.7):
    layer.set_weights([rng.uniform(-scale, scale, np.shape(v)) for v in layer.get_weights()])


def _weights(layer):
    wrapper = layer.cell
    cell = wrapper.cell
    cell_weights = tuple(
        np.asarray(keras.ops.convert_to_numpy(v), np.float64)
        for v in (cell.kernel, cell.recurrent_kernel, cell.bias)
    )
    own = {
        v.path.split("/")[-1]: np.asarray(keras.ops.convert_to_numpy(v), np.float64)
        for v in wrapper.weights
        if all(v is not c for c in cell.weights)
    }
    return cell_weights, own


CONFIGURATIONS = [
    (score, position, output_attention, extra)
    for score, position, output_attention in itertools.product(
        ("additive", "dot", "general"), ("after", "before"), (True, False)
    )
    for extra in ({}, {"normalize": True} if score == "additive" else {"scale": True})
] + [("dot", "after", True, {"input_feeding": False}),
     ("additive", "after", True, {"input_feeding": False, "normalize": True})]


@pytest.mark.parametrize("score, position, output_attention, extra", CONFIGURATIONS)
def test_matches_the_reference_in_float64(float64_policy, score, position, output_attention, extra):
    rng = np.random.default_rng(0)
    x, memory, mask = _data(rng)
    layer = _layer(score, position, output_attention, attention_size=7, **extra)
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask))
    want, _ = reference(x, memory, mask, *_weights(layer), score, position, output_attention,
                        **extra)  # fmt: skip
    np.testing.assert_allclose(got, want, atol=1e-10, rtol=0)
    # Not vacuous: without the memory's padding mask the outputs differ.
    unmasked, _ = reference(x, memory, np.ones_like(mask), *_weights(layer), score, position,
                            output_attention, **extra)  # fmt: skip
    assert np.abs(unmasked - want)[1].max() > 1e-3


@pytest.mark.parametrize("position", ["after", "before"])
def test_matches_the_reference_in_float32(position):
    rng = np.random.default_rng(1)
    x, memory, mask = _data(rng, "float32")
    layer = _layer("additive", position)
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask))
    want, _ = reference(x.astype(np.float64), memory.astype(np.float64), mask,
                        *_weights(layer), "additive", position, True)  # fmt: skip
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
    got = keras.ops.convert_to_numpy(
        layer(x, memory=memory, memory_mask=mask, mask=sequence_mask)
    )
    want, _ = reference(x, memory, mask, *_weights(layer), "additive", "after", True,
                        sequence_mask=sequence_mask)  # fmt: skip
    np.testing.assert_allclose(got, want, atol=1e-10, rtol=0)


def test_a_fully_masked_memory_row_gives_a_zero_context(float64_policy):
    # Attending to nothing: the weights are all zero and so is the context, never NaN.
    rng = np.random.default_rng(3)
    x, memory, mask = _data(rng)
    mask[2] = False
    wrapper = AttentionWrapper(keras.layers.SimpleRNNCell(UNITS), return_alignments=True)
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
    wrapper = layer.cell

    def by_cell(x, memory):
        states = [keras.ops.zeros((BATCH, s)) for s in wrapper.state_size]
        outputs = []
        for t in range(STEPS):
            out, states = wrapper(x[:, t], states, memory=memory, memory_mask=mask)
            outputs.append(out)
        return keras.ops.sum(keras.ops.stack(outputs, 1) ** 2)

    def by_layer(x, memory):
        return keras.ops.sum(layer(x, memory=memory, memory_mask=mask) ** 2)

    loss_cell, grads_cell, input_grads_cell = gradients(by_cell, layer.weights, [x, memory])
    loss_layer, grads_layer, input_grads_layer = gradients(by_layer, layer.weights, [x, memory])
    np.testing.assert_allclose(loss_cell, loss_layer, rtol=1e-5)
    for a, b in zip(grads_cell + input_grads_cell, grads_layer + input_grads_layer):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)
    assert np.abs(input_grads_layer[1]).max() > 1e-3  # the memory gets a gradient


def test_a_reset_starts_a_row_again():
    rng = np.random.default_rng(5)
    x, memory, mask = _data(rng, "float32")
    layer = _layer()
    layer(x, memory=memory, memory_mask=mask)
    _randomize(layer, rng)
    reset = np.zeros((BATCH, STEPS), bool)
    reset[:, 2] = True
    packed = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask, reset=reset))
    alone = keras.ops.convert_to_numpy(layer(x[:, 2:], memory=memory, memory_mask=mask))
    np.testing.assert_allclose(packed[:, 2:], alone, atol=1e-6)
    whole = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask))
    assert np.abs(whole[:, 2:] - alone).max() > 1e-3


def test_state_carries_over_from_one_call_to_the_next():
    rng = np.random.default_rng(6)
    x, memory, mask = _data(rng, "float32")
    wrapper = AttentionWrapper(keras.layers.GRUCell(UNITS), score="dot", position="before")
    layer = AttentionRNN(wrapper, return_sequences=True, return_state=True)
    whole, *_ = layer(x, memory=memory, memory_mask=mask)
    first, *states = layer(x[:, :2], memory=memory, memory_mask=mask)
    second, *_ = layer(x[:, 2:], memory=memory, memory_mask=mask, initial_state=states)
    np.testing.assert_allclose(
        np.concatenate([first, second], 1), keras.ops.convert_to_numpy(whole), atol=1e-6
    )


@pytest.mark.parametrize(
    "cell",
    [
        lambda: keras.layers.LSTMCell(UNITS),
        lambda: keras.layers.GRUCell(UNITS),
        lambda: AssociativeGRUCell(UNITS, num_copies=2),
    ],
    ids=["lstm", "gru", "am_gru"],
)
def test_wraps_any_cell_trains_saves_and_loads(cell, tmp_path):
    rng = np.random.default_rng(7)
    x, memory, mask = _data(rng, "float32")
    inputs = keras.Input((None, INPUT_DIM))
    memory_input = keras.Input((None, MEMORY_DIM))
    mask_input = keras.Input((None,), dtype="bool")
    wrapper = AttentionWrapper(cell(), attention_size=6)
    h = AttentionRNN(wrapper)(inputs, memory=memory_input, memory_mask=mask_input)
    model = keras.Model([inputs, memory_input, mask_input], keras.layers.Dense(3)(h))
    model.compile("adam", "mse")
    before = [np.array(w) for w in model.get_weights()]
    model.fit([x, memory, mask], np.zeros((BATCH, 3)), epochs=1, verbose=0)
    assert all(not np.allclose(a, b) for a, b in zip(before, model.get_weights()) if a.size > 1)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(
        loaded.predict([x, memory, mask], verbose=0), model.predict([x, memory, mask], verbose=0),
        atol=1e-6,
    )  # fmt: skip
    cloned = keras.models.clone_model(model)
    cloned.set_weights(model.get_weights())
    np.testing.assert_allclose(
        cloned.predict([x, memory, mask], verbose=0), model.predict([x, memory, mask], verbose=0),
        atol=1e-6,
    )  # fmt: skip


@pytest.mark.parametrize("policy, atol", [("mixed_float16", 2e-2), ("mixed_bfloat16", 6e-2)])
def test_mixed_precision_matches_float32(policy, atol):
    rng = np.random.default_rng(8)
    x, memory, mask = _data(rng, "float32")
    expected = _layer()
    want = keras.ops.convert_to_numpy(expected(x, memory=memory, memory_mask=mask))
    keras.config.set_dtype_policy(policy)
    try:
        layer = _layer()
        layer(x, memory=memory, memory_mask=mask)
    finally:
        keras.config.set_dtype_policy("float32")
    layer.set_weights(expected.get_weights())
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=mask))
    assert keras.backend.standardize_dtype(got.dtype) == policy.split("_")[1]
    np.testing.assert_allclose(np.asarray(got, np.float32), want, atol=atol)
    assert np.abs(want).max() > 10 * atol  # the outputs are far larger than the tolerance


@pytest.mark.parametrize(
    "call, error, fragment",
    [
        (lambda layer, x, m, k: layer(x), ValueError, "no `memory` given"),
        (lambda layer, x, m, k: layer(x, memory=m[:, :, :4]), ValueError, "[batch, length, 8]"),
        (lambda layer, x, m, k: layer(x, memory=m[0]), ValueError, "`memory` must be"),
        (lambda layer, x, m, k: layer(x, memory=m, memory_mask=k[:, :3]), ValueError,
         "`memory_mask` must be [batch, length] = (3, 6)"),
    ],
    ids=["no memory", "wrong width", "wrong rank", "mask shape"],
)  # fmt: skip
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
        ({"return_alignments": "yes"}, TypeError, "`return_alignments` must be a bool"),
        ({"position": "before", "input_feeding": False}, ValueError, "`input_feeding=False`"),
        ({"input_feeding": 1}, TypeError, "`input_feeding` must be a bool"),
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
    rng = np.random.default_rng(11)
    x, memory, mask = _data(rng, "float32")
    sequence_mask = np.ones((BATCH, STEPS), bool)
    sequence_mask[0, 3:] = False
    x[~sequence_mask] = np.nan
    memory[~mask] = np.nan
    layer = AttentionRNN(
        AttentionWrapper(keras.layers.GRUCell(UNITS)), return_sequences=True,
        zero_output_for_mask=True,
    )  # fmt: skip

    def loss(memory):
        out = layer(x, memory=memory, memory_mask=mask, mask=sequence_mask)
        return keras.ops.sum(out**2)

    layer(x, memory=memory, memory_mask=mask, mask=sequence_mask)
    value, weight_grads, (memory_grad,) = gradients(loss, layer.trainable_weights, [memory])
    assert np.isfinite(value)
    assert all(np.isfinite(g).all() for g in weight_grads)
    np.testing.assert_array_equal(memory_grad[~mask], 0.0)
    assert np.isfinite(memory_grad).all()


@pytest.mark.parametrize("return_state", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_output_spec_is_exact(policy, return_sequences, return_state):
    x, memory, mask = _data(np.random.default_rng(12), "float32")
    cell = AttentionWrapper(keras.layers.LSTMCell(UNITS, dtype=policy), return_alignments=True,
                            attention_size=7, dtype=policy)  # fmt: skip
    layer = AttentionRNN(cell, return_sequences=return_sequences, return_state=return_state,
                         dtype=policy)  # fmt: skip
    eager = keras.tree.flatten(layer(x, memory=memory, memory_mask=mask))
    spec = keras.tree.flatten(layer.compute_output_spec(
        keras.KerasTensor(x.shape), memory=keras.KerasTensor(memory.shape)
    ))  # fmt: skip
    symbolic = keras.tree.flatten(
        layer(keras.Input(batch_shape=x.shape), memory=keras.Input(batch_shape=memory.shape))
    )
    head = (BATCH, STEPS) if return_sequences else (BATCH,)
    widths = [7, LENGTH] + ([UNITS, UNITS, 7] if return_state else [])
    shapes = [head + (widths[0],), head + (widths[1],)] + [(BATCH, w) for w in widths[2:]]
    for got in (eager, spec, symbolic):
        assert [tuple(t.shape) for t in got] == shapes
        dtype = keras.dtype_policies.get(policy).compute_dtype
        assert [keras.backend.standardize_dtype(t.dtype) for t in got] == [dtype] * len(shapes)


@pytest.mark.parametrize("initializer", ["glorot_uniform", keras.initializers.RandomUniform(
    -0.1, 0.1, seed=keras.random.SeedGenerator(3))], ids=["unseeded", "seed_generator"])
def test_kernels_drawn_from_one_initializer_start_independent(initializer):
    # The query and memory kernels have one shape here: a stateless initializer used for both
    # would start them equal.
    cell = AttentionWrapper(keras.layers.GRUCell(UNITS), kernel_initializer=initializer)
    cell.build((None, INPUT_DIM), (None, LENGTH, UNITS))
    query, memory = (keras.ops.convert_to_numpy(k) for k in (cell.query_kernel, cell.memory_kernel))
    assert query.shape == memory.shape and not np.allclose(query, memory)
