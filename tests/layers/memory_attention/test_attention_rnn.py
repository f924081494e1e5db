"""`AttentionRNN` against its `AttentionWrapper`'s NumPy reference and step-by-step loop."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import ALL_RNN_FLAGS, B, LayerTestCase
from tests.layers.memory_attention.test_attention_wrapper import (
    BATCH,
    LENGTH,
    STEPS,
    UNITS,
    _attend_from_hypothesis,
    _data,
    _layer,
    _wrapper,
    keras_checks_of,
    sharpened,
)
from tests.memory_attention_reference import attention_wrapper_reference as reference
from tests.memory_attention_reference import declared_memory
from tests.memory_attention_reference import randomize as _randomize
from tests.memory_attention_reference import wrapper_weights as _weights
from tests.support import as_numpy, assert_close, gradients, split_rows, tensorflow_only
from tf_memlayers.layers import (
    AssociativeGRUCell,
    AttentionMechanism,
    AttentionRNN,
    AttentionWrapper,
    ResettableRNN,
    WordByWordAttention,
)
from tf_memlayers.layers.resettable_rnn import RNN_FLAGS


def _attention_rnn(**kwargs):
    return AttentionRNN(AttentionWrapper(keras.layers.GRUCell(4)), **kwargs)


class AttentionRNNTest(LayerTestCase):
    layer_cls = AttentionRNN

    def test_layer_behaviors(self):
        cell = lambda dtype: _wrapper(dtype, score="general", position="before")  # noqa: E731
        checks = keras_checks_of(cell, own_weights=2, return_state=True)
        self.run_layer_test(**checks, expected_output_shape=((2, 4), (2, 4), (2, 4)))

    def test_journey(self, tmp_path):
        build = lambda p, h: _attend_from_hypothesis(p, h, score="general", position="before")  # noqa: E731
        self.run_journey_test("pair", build, tmp_path)

    def test_config_arguments_resets_and_nan_padding(self):
        cell = AttentionWrapper(keras.layers.GRUCell(4))
        self.run_config_test(AttentionRNN, cell=cell, **ALL_RNN_FLAGS)
        pytest.raises(TypeError, AttentionRNN, cell.cell).match("must be an AttentionWrapper, got")
        self.run_flags_test(_attention_rnn)
        self.run_reset_tests(_attention_rnn, **declared_memory(B))
        rnn = lambda: _attention_rnn(return_sequences=True, zero_output_for_mask=True)  # noqa: E731
        self.run_nan_padding_test(rnn, memory_width=8)

    # The wrapper's and `WordByWordAttention`'s (its memory_dim: the cell's width, 8).
    @pytest.mark.parametrize(
        "kind, return_sequences, return_state",
        [("wrapper", s, r) for s in (False, True) for r in (False, True)]
        + [("word_by_word", True, True), ("word_by_word", False, False)],
    )
    def test_output_spec(self, kind, return_sequences, return_state):
        memory = np.random.default_rng(12).normal(size=(BATCH, LENGTH, 8)).astype("float32")
        cls, size = (AttentionWrapper, 7) if kind == "wrapper" else (WordByWordAttention, 6)

        def make(dtype):
            options = dict(return_attention_scores=True, attention_size=size, dtype=dtype)
            wrapper = cls(keras.layers.LSTMCell(UNITS, dtype=dtype), **options)
            flags = dict(return_sequences=return_sequences, return_state=return_state)
            return AttentionRNN(wrapper, dtype=dtype, **flags)

        self.run_output_spec_test(make, (BATCH, STEPS, 4), memory=memory)


@pytest.mark.parametrize("score, position", [("additive", "after"), ("general", "before")])
@pytest.mark.usefixtures("float64_policy")
def test_attention_scores_of_a_layer_without_them_are_the_references(score, position):
    rng = np.random.default_rng(4)
    x, memory, mask = _data(rng)
    layer = _layer(score, position)
    _randomize(layer, rng, x, memory, mask)
    # Twice: after training changed the weights, the scores follow them (the copy is reused).
    for _ in range(2):
        scores = keras.ops.convert_to_numpy(layer.attention_scores(x, memory, mask))
        _, want = reference(x, memory, mask, *_weights(layer), score, position, True)
        np.testing.assert_allclose(scores, want, atol=1e-10, rtol=0)
        _randomize(layer, rng)
    # The copy is not a part of the layer: its weights and config are unchanged.
    assert [w.path for w in layer.weights] == [w.path for w in layer.cell.weights]
    assert layer.get_config()["cell"]["config"]["return_attention_scores"] is False
    with pytest.raises(ValueError, match=r"attention_scores: `sequences` must be \[batch, time, "):
        layer.attention_scores(x[..., :-1], memory, mask)
    with pytest.raises(ValueError, match="attention_scores: `memory` must be .* known length"):
        layer.attention_scores(x, memory[0])


def test_attention_scores_leave_saving_and_loading_as_they_were(tmp_path):
    x, memory, mask = _data(np.random.default_rng(5), "float32")
    inputs, layer = [keras.Input(x.shape[1:]), keras.Input(memory.shape[1:])], _layer()
    model = keras.Model(inputs, layer(inputs[0], memory=inputs[1]))
    model.save_weights(tmp_path / "before.weights.h5")
    model.save(tmp_path / "before.keras")
    scores = layer.attention_scores(x, memory, mask)
    model.save(tmp_path / "after.keras")
    model.load_weights(tmp_path / "before.weights.h5")
    restored = keras.saving.load_model(tmp_path / "after.keras")
    assert len(restored.weights) == len(model.weights)
    restored_scores = restored.layers[-1].attention_scores(x, memory, mask)
    np.testing.assert_array_equal(as_numpy(restored_scores), as_numpy(scores))
    restored.load_weights(tmp_path / "before.weights.h5")


def _mechanisms(**options):
    """A wrapper of two mechanisms over one memory."""
    mechanisms = [AttentionMechanism(), AttentionMechanism(score="dot", probability_fn=sharpened)]
    return AttentionWrapper(keras.layers.SimpleRNNCell(UNITS), mechanisms=mechanisms, **options)


class _ReluVector(AttentionWrapper):
    def attention_vector(self, context, output):
        return keras.ops.relu(super().attention_vector(context, output))


class _HalfQuery(AttentionMechanism):
    def attend(self, query, *args, **kwargs):
        return super().attend(query / 2.0, *args, **kwargs)


# Wrappers of each cell attending step by step and after the loop, with a score of each kind;
# subclasses that change how a step attends (AttentionRNN then steps them, calling it).
LOOPS = dict(
    own_vector=lambda: _ReluVector(keras.layers.GRUCell(UNITS), input_feeding=False),
    own_mechanism=lambda: AttentionWrapper(
        keras.layers.GRUCell(UNITS), mechanisms=[_HalfQuery()], input_feeding=False
    ),
    simple_rnn_general_before=lambda: AttentionWrapper(
        keras.layers.SimpleRNNCell(UNITS), score="general", position="before", scale=True
    ),
    lstm=lambda: AttentionWrapper(keras.layers.LSTMCell(UNITS)),
    gru_after_the_loop=lambda: AttentionWrapper(keras.layers.GRUCell(UNITS), input_feeding=False),
    am_gru_dot_after_the_loop=lambda: AttentionWrapper(
        AssociativeGRUCell(UNITS, num_copies=2), score="dot", input_feeding=False
    ),
    mechanisms_step_by_step=lambda: _mechanisms(attention_size=[5, 6]),
    mechanisms_after_the_loop=lambda: _mechanisms(input_feeding=False, attention_layer="context"),
    word_by_word_lstm=lambda: WordByWordAttention(keras.layers.LSTMCell(UNITS)),
    word_by_word_gru=lambda: WordByWordAttention(keras.layers.GRUCell(UNITS)),
    word_by_word_am_gru=lambda: WordByWordAttention(AssociativeGRUCell(UNITS, num_copies=2)),
)


@pytest.mark.usefixtures("float64_policy")
@pytest.mark.parametrize("case", split_rows(sorted(LOOPS)))
def test_the_cell_in_a_loop_of_ones_own_gives_the_sequence_forms_outputs_and_gradients(case):
    """The built layer's cell called step by step gives the layer's outputs and gradients
    (weights, inputs and memory), in float64; every weight and the memory get one."""
    rng = np.random.default_rng(4)
    x, memory, mask = _data(rng)
    layer = AttentionRNN(LOOPS[case](), return_sequences=True)
    _randomize(layer, rng, x, memory, mask)

    def by_cell(x, memory):
        states, outputs = [keras.ops.zeros((len(x), s), x.dtype) for s in layer.cell.state_size], []
        for t in range(STEPS):
            out, states = layer.cell(x[:, t], states, memory=memory, memory_mask=mask)
            outputs.append(out)
        return keras.ops.sum(keras.ops.stack(outputs, 1) ** 2)

    by_layer = lambda x, m: keras.ops.sum(layer(x, memory=m, memory_mask=mask) ** 2)  # noqa: E731
    loss_cell, *grads_cell = gradients(by_cell, layer.weights, [x, memory])
    loss_layer, grads_layer, input_grads_layer = gradients(by_layer, layer.weights, [x, memory])
    np.testing.assert_allclose(loss_cell, loss_layer, rtol=1e-12)
    assert_close(grads_cell, [grads_layer, input_grads_layer], atol=1e-12, rtol=1e-10)
    assert all(np.abs(g).max() > 0 for g in grads_layer)  # every weight is used
    assert np.abs(input_grads_layer[1]).max() > 1e-3  # the memory gets a gradient


@pytest.mark.parametrize(
    "wrapper, options",
    [(AttentionWrapper, dict(score="dot", position="before")), (WordByWordAttention, {})],
    ids=["dot_before", "word_by_word"],
)
def test_state_carries_over_from_one_call_to_the_next(wrapper, options):
    """Two calls, the second from the first's states, give one call's outputs."""
    x, memory, mask = _data(np.random.default_rng(6), "float32")
    cell = wrapper(keras.layers.GRUCell(UNITS), **options)
    layer = AttentionRNN(cell, return_sequences=True, return_state=True)
    whole, *_ = layer(x, memory=memory, memory_mask=mask)
    first, *states = layer(x[:, :2], memory=memory, memory_mask=mask)
    nested = [states[:1], *states[1:]]  # the cell's states nested, as tfa's `clone` held them
    second, *_ = layer(x[:, 2:], memory=memory, memory_mask=mask, initial_state=nested)
    both = np.concatenate([as_numpy(first), as_numpy(second)], 1)
    assert_close(both, whole, atol=1e-6, rtol=1e-7)
    assert [tuple(s.shape) for s in states] == [(BATCH, size) for size in layer.cell.state_size]


class _StepByStep(AttentionRNN):
    """`AttentionRNN` stepping its wrapper as it steps one that feeds back."""

    def inner_loop(self, sequences, initial_state, mask, training=False):
        return ResettableRNN.inner_loop(self, sequences, initial_state, mask, training=training)


# Options of the wrapper (no input feeding) and the layer (`RNN_FLAGS`), and what the call gets:
# a mask (padding at both ends and inside, a row of padding only), resets, an initial state.
SCORES = dict(return_attention_scores=True)
ALL_AT_ONCE_CASES = {
    "additive": ({}, ""),
    "additive_normalized_alignments": (dict(normalize=True, **SCORES), "mask"),
    "dot_scaled_cell_output": (dict(score="dot", scale=True, output_attention=False), "mask"),
    "general_zeros_for_mask": (dict(score="general", zero_output_for_mask=True), "mask state"),
    "general_last_output": (dict(score="general", return_sequences=False, **SCORES), "mask state"),
    "backwards": (dict(score="general", go_backwards=True), "mask"),
    "resets": ({}, "mask reset state"),
    "unrolled": (dict(score="dot", unroll=True), "mask"),
}


@pytest.mark.usefixtures("float64_policy")
@pytest.mark.parametrize("case", split_rows(sorted(ALL_AT_ONCE_CASES)))
def test_attention_after_the_loop_equals_the_step_by_step_loop(case):
    """Without input feeding (the loop, then attention) the step-by-step loop's results."""
    options, call = ALL_AT_ONCE_CASES[case]
    layer_options = {k: v for k, v in options.items() if k in RNN_FLAGS}
    wrapper_options = {k: v for k, v in options.items() if k not in RNN_FLAGS}
    rng = np.random.default_rng(7)
    x, memory, memory_mask = _data(rng)
    if wrapper_options.get("score") == "dot":
        memory = memory[..., :UNITS]
    wrapper = AttentionWrapper(
        keras.layers.GRUCell(UNITS), input_feeding=False, attention_size=5, **wrapper_options
    )
    options = {"return_sequences": True, "return_state": True, **layer_options}
    layer, loop = AttentionRNN(wrapper, **options), _StepByStep(wrapper, **options)
    assert not wrapper.feeds_back
    kwargs = {"memory_mask": memory_mask}
    if "mask" in call:
        mask = np.ones((BATCH, STEPS), bool)
        mask[0, :2] = mask[0, 4:] = mask[1, 2] = mask[2] = False
        kwargs["mask"] = mask
    if "reset" in call:
        reset = np.zeros((BATCH, STEPS), bool)
        reset[:, 3] = reset[0, 1] = True
        kwargs["reset"] = reset
    states = [rng.normal(size=(BATCH, size)) for size in wrapper.state_size]
    layer(x, memory=memory, **kwargs)
    _randomize(layer, rng)

    def run(model):
        def outputs(x, memory, *states):
            given = {"initial_state": list(states)} if "state" in call else {}
            return model(x, memory=memory, **kwargs, **given)

        def loss(*arrays):
            found = outputs(*arrays)
            return sum(keras.ops.sum(keras.ops.sin(3.0 * o)) for o in found), found

        (_, values), weight_grads, input_grads = gradients(
            loss, layer.trainable_weights, [x, memory, *states], has_aux=True
        )
        return values, weight_grads + input_grads

    got_outputs, got_grads = run(layer)
    want_outputs, want_grads = run(loop)
    assert_close(got_outputs, want_outputs, atol=1e-12)  # as many outputs, each close
    assert_close(got_grads, want_grads, atol=1e-12, rtol=1e-10)
    # Not vacuous: the weights get gradients, and a row of padding only is zeros.
    assert all(np.abs(g).max() > 0 for g in want_grads[: len(layer.trainable_weights)])
    if "mask" in call and "state" not in call:
        np.testing.assert_array_equal(want_outputs[0][2], 0.0)


def test_a_stateful_layer_attending_after_the_loop_carries_the_step_by_step_states():
    x, memory, memory_mask = _data(np.random.default_rng(8), "float32")
    wrapper = AttentionWrapper(keras.layers.LSTMCell(UNITS), score="general", input_feeding=False)
    options = {"return_sequences": True, "stateful": True}
    layer, loop = AttentionRNN(wrapper, **options), _StepByStep(wrapper, **options)
    for _ in range(2):
        got = layer(x, memory=memory, memory_mask=memory_mask)
        want = loop(x, memory=memory, memory_mask=memory_mask)
        assert_close(got, want, atol=1e-5, rtol=1e-7)
    assert_close(layer.states, loop.states, atol=1e-5, rtol=1e-7)
    assert np.abs(keras.ops.convert_to_numpy(layer.states[-1])).max() > 1e-2
    # The wrappers that feed back step with the layer's loop.
    cell = keras.layers.GRUCell(UNITS)
    assert AttentionWrapper(cell).feeds_back and WordByWordAttention(cell).feeds_back
    assert AttentionWrapper(cell, position="before").feeds_back


@tensorflow_only("XLA compiles the gradient of TensorFlow's loops only where they are bounded")
@pytest.mark.parametrize("mode", ["parallel", "recursive"])
def test_monotonic_attention_trains_under_xla(mode):
    rng = np.random.default_rng(0)
    sequences, memory = keras.Input((6, 4), batch_size=2), keras.Input((7, 6), batch_size=2)
    cell = AttentionWrapper(keras.layers.GRUCell(8), monotonic_mode=mode)
    model = keras.Model([sequences, memory], AttentionRNN(cell)(sequences, memory=memory))
    model.compile("adam", "mse", jit_compile=True)
    x = [rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 7, 6))]
    assert np.isfinite(model.fit(x, np.zeros((2, 8)), verbose=0).history["loss"]).all()


@pytest.mark.parametrize("input_feeding", [True, False])
def test_integer_sequences_are_read_as_numbers(input_feeding):
    x, memory = np.ones((2, 4, 3)), np.ones((2, 5, 6), "float32")
    wrapper = AttentionWrapper(keras.layers.GRUCell(4), input_feeding=input_feeding)
    layer = AttentionRNN(wrapper, return_sequences=True)
    want = as_numpy(layer(x.astype("float32"), memory=memory))
    np.testing.assert_array_equal(as_numpy(layer(x.astype("int32"), memory=memory)), want)
