"""``reset`` beyond the suites: packed documents equal separate runs (masks, initial and
carried states, XLA), and no gradient crosses a reset."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.layer_test_case import B, T, as_numpy, documents
from tests.layer_test_case import packed_resets as _resets
from tests.layers.window_attention.test_sliding_window_attention import window_twins
from tests.support import (
    BACKEND,
    FUSED_LOOP,
    all_pairs,
    assert_close,
    gradients,
    masked_rnn,
    tensorflow_only,
)
from tf_memlayers import ResettableRNN
from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    AssociativeMemoryCell,
    DualAssociativeGRU,
    DualAssociativeGRUCell,
)
from tf_memlayers.layers.resets import zero_where


def test_no_gradient_crosses_a_reset(float64_policy):
    lstm, parallel, rnn = window_twins(resettable=True)
    x, reset = np.random.default_rng(7).normal(size=(B, T, 5)), _resets()
    forms = {
        "parallel": lambda inputs: parallel(lstm(inputs, reset=reset), reset=reset),
        "cell": lambda inputs: rnn(inputs, reset=reset),
    }
    for form, forward in forms.items():  # the loss of row 0's second document
        _, _, (dx,) = gradients(lambda v, f=forward: keras.ops.sum(f(v)[0, 3:8] ** 2), [], [x])
        assert np.all(dx[0, :3] == 0) and np.all(dx[0, 8:] == 0) and np.all(dx[1:] == 0), form
        assert np.all(np.abs(dx[0, 3:8]).sum(-1) > 0), form


def test_resets_under_jit_compile_match_eager():
    lstm, parallel, rnn = window_twins(resettable=True)
    x, reset = np.random.default_rng(7).normal(size=(B, T, 5)).astype("float32"), _resets()
    inputs, flags = keras.Input((T, 5)), keras.Input((T,), dtype="bool")
    parallel_model = keras.Model([inputs, flags], parallel(lstm(inputs, reset=flags), reset=flags))
    eager = as_numpy(parallel_model([x, reset]))
    # The parallel model compiled, and the cell's, both equal the parallel one run eagerly.
    for model in (parallel_model, keras.Model([inputs, flags], rnn(inputs, reset=flags))):
        model.compile(jit_compile=BACKEND != "torch")
        np.testing.assert_allclose(model.predict([x, reset], verbose=0), eager, atol=1e-5)


UNITS, COPIES, INPUT_DIM, STEPS = 8, 3, 4, 7
SEQUENCE_FLAGS = {"return_sequences": True, "return_state": True}


def _layer(layer_cls, *args, **options):
    return lambda **kw: layer_cls(*args, **SEQUENCE_FLAGS, **options, **kw)


def _rnn(make_cell, **options):
    return lambda **kw: ResettableRNN(make_cell(), **SEQUENCE_FLAGS, **options, **kw)


def _memory_cell(cell, copies=COPIES):
    return lambda: AssociativeMemoryCell(cell(6), num_copies=copies)


# Layers returning each step's output and final states (on TF "auto": fused; `reset`: Keras's).
KINDS = {
    "am_gru_keras_loop": _layer(AssociativeGRU, UNITS, num_copies=COPIES, fused_loop=False),
    "am_gru_auto": _layer(AssociativeGRU, UNITS, num_copies=COPIES),
    "am_gru_unroll": _layer(AssociativeGRU, UNITS, num_copies=COPIES, unroll=True),
    "am_gru_retrievals": _layer(AssociativeGRU, UNITS, num_copies=COPIES, return_retrievals=True),
    "dual_auto": _layer(DualAssociativeGRU, UNITS, num_copies=COPIES),
    "dual_released": _layer(DualAssociativeGRU, UNITS, num_copies=COPIES, dual_key="released"),
    "rnn_am_gru_cell": _rnn(lambda: AssociativeGRUCell(UNITS, num_copies=COPIES)),
    "rnn_memory_cell_gru": _rnn(_memory_cell(keras.layers.GRUCell)),
    "rnn_memory_cell_lstm": _rnn(_memory_cell(keras.layers.LSTMCell, copies=2)),
    "rnn_dual_cell": _rnn(lambda: DualAssociativeGRUCell(UNITS, num_copies=COPIES)),
    "rnn_lstm": _rnn(lambda: keras.layers.LSTMCell(4)),
    "rnn_gru_unroll": _rnn(lambda: keras.layers.GRUCell(4), unroll=True),
}
ASSOCIATIVE = ["am_gru_auto", "dual_auto", "rnn_memory_cell_gru"]  # each associative memory
KIND_NAMES = sorted(KINDS)


def _resets_and_mask():
    """Resets at steps 2, 5 of row 0, 0, 4 of row 1, a masked 3 of row 2; padding, holes."""
    reset = np.zeros((3, STEPS), bool)
    reset[0, [2, 5]] = reset[1, [0, 4]] = reset[2, 3] = True
    mask = np.ones((3, STEPS), bool)
    mask[0, 6] = mask[0, 3] = False  # padding at the end; a hole in the second document
    mask[1, 5] = mask[2, 3] = False  # a hole right after a reset; the reset here is ignored
    return reset, mask


def _fresh_state(layer, initial_state, row):
    """A row's states after a reset: zeros, but the Dual cell's source memory (kept)."""
    if not isinstance(layer.cell, DualAssociativeGRUCell):
        return None
    sizes, dtype = keras.tree.flatten(layer.cell.state_size), layer.cell.compute_dtype
    states = [np.zeros((1, size), dtype) for size in sizes]
    if initial_state is not None:
        states[2] = as_numpy(initial_state[2])[row : row + 1]
    return states


def separate_runs(layer, xs, reset, mask=None, initial_state=None):
    """Each document run alone: the packed run's expected outputs, then final states."""
    outputs, finals = None, []
    for row, spans in enumerate(documents(reset, mask)):
        for start, end, fresh in spans:
            if fresh or initial_state is None:
                init = _fresh_state(layer, initial_state, row)
            else:
                init = [as_numpy(s)[row : row + 1] for s in initial_state]
            x = xs[row : row + 1, start:end]
            rows = None if mask is None else mask[row : row + 1, start:end]
            result = masked_rnn(layer, x, rows, initial_state=init)
            if outputs is None:
                outputs = np.zeros(xs.shape[:2] + result[0].shape[2:], result[0].dtype)
            outputs[row, start:end] = result[0][0]
        finals.append([state[0] for state in result[1:]])
    return [outputs, *(np.stack(states) for states in zip(*finals))]


def _random_initial_state(layer, rng, batch=3):
    sizes, dtype = keras.tree.flatten(layer.cell.state_size), layer.cell.compute_dtype
    return [(0.5 * rng.normal(size=(batch, size))).astype(dtype) for size in sizes]


def _built(kind, xs, rng, **kwargs):
    """A layer of ``kind``, built, with weights far from the initializers."""
    layer = KINDS[kind](**kwargs)
    layer.build(xs.shape)
    for weight in layer.weights:
        weight.assign(rng.uniform(-0.7, 0.7, size=weight.shape).astype(weight.dtype))
    return layer


# Each layer masked or not, with an initial state or not, by pairs (`all_pairs`).
@pytest.mark.parametrize(
    "kind, masked, initial_state",
    all_pairs(
        KIND_NAMES, ["masked", "unmasked"], ["initial_state", "zero_state"], split_by_backend=True
    ),
)
@pytest.mark.usefixtures("float64_policy")
def test_packed_documents_equal_separate_runs_in_float64(kind, masked, initial_state):
    rng = np.random.default_rng(KIND_NAMES.index(kind))
    xs = rng.normal(size=(3, STEPS, INPUT_DIM))
    layer = _built(kind, xs, rng)
    reset, mask = _resets_and_mask()
    mask = mask if masked == "masked" else None
    initial = _random_initial_state(layer, rng) if initial_state == "initial_state" else None
    packed = layer(xs, reset=reset, mask=mask, initial_state=initial)
    expected = separate_runs(layer, xs, reset, mask, initial)
    assert_close(packed, expected, atol=1e-10)  # the outputs and each final state
    # Not vacuous: without the resets the rows with documents compute something else.
    plain = masked_rnn(layer, xs, mask, initial_state=initial)[0]
    assert np.abs(plain[:2] - expected[0][:2]).max() > 1e-3
    if mask is not None:  # row 2's only reset is at a masked step, which ignores it
        np.testing.assert_allclose(as_numpy(packed[0])[2], plain[2], atol=1e-10, rtol=0)


@pytest.mark.parametrize("kind", [*ASSOCIATIVE, "rnn_lstm"])
def test_stateful_layer_forgets_the_carried_states_at_a_reset(float64_policy, kind):
    rng = np.random.default_rng(3)
    # Two segments of a stream.
    first, xs = rng.normal(size=(3, 3, INPUT_DIM)), rng.normal(size=(3, STEPS, INPUT_DIM))
    stateful = _built(kind, xs, rng, stateful=True)
    twin = KINDS[kind]()  # the same weights, not stateful
    twin.build(xs.shape)
    twin.set_weights(stateful.get_weights())
    carried, reset = [as_numpy(s) for s in stateful(first)[1:]], np.zeros((3, STEPS), bool)
    reset[0, 4] = reset[1, 0] = True  # new documents: row 0's from step 4, row 1's at once
    packed = stateful(xs, reset=reset)
    expected = separate_runs(twin, xs, reset, initial_state=carried)
    assert_close(packed, expected, atol=1e-10)  # the outputs and each final state
    # The layer keeps the packed run's final states for the next segment.
    assert_close(stateful.states, expected[1:], atol=1e-10)


@pytest.mark.parametrize("kind", ["am_gru_keras_loop", *ASSOCIATIVE])
def test_no_gradient_flows_back_through_a_reset(float64_policy, kind):
    rng = np.random.default_rng(6)
    xs = rng.normal(size=(3, STEPS, INPUT_DIM))
    layer = _built(kind, xs, rng)
    initial, start, reset = _random_initial_state(layer, rng), 4, np.zeros((3, STEPS), bool)
    reset[0, start] = True

    def loss_with(reset):
        def loss(xs, *initial):
            outputs = layer(xs, reset=reset, initial_state=list(initial))[0]
            return ops.sum(ops.sin(outputs[0, start:]))

        return loss

    _, _, (grad_x, *grad_initial) = gradients(loss_with(reset), inputs=[xs, *initial])
    np.testing.assert_array_equal(grad_x[0, :start], 0.0)
    assert np.abs(grad_x[0, start:]).min() > 0
    # The recurrent states are forgotten; the Dual layer's source memory is read after it too.
    for grad in grad_initial[:2]:
        np.testing.assert_array_equal(grad, 0.0)
    if isinstance(layer.cell, DualAssociativeGRUCell):
        assert np.abs(grad_initial[2][0]).max() > 0
    # Without the reset, the same loss depends on the earlier steps.
    _, _, (grad_x, *_) = gradients(loss_with(np.zeros_like(reset)), inputs=[xs, *initial])
    assert np.abs(grad_x[0, :start]).min() > 0


def _compiled(function):
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=True)
    if BACKEND == "jax":
        import jax

        return jax.jit(function)
    pytest.skip(f"no XLA compilation on the {BACKEND} backend")


@pytest.mark.parametrize("how", ["xla", "mixed_float16", "functional"])
@pytest.mark.parametrize("kind", ASSOCIATIVE)
def test_xla_mixed_float16_or_functional_call_with_reset_equals_separate_runs(kind, how):
    if how == "mixed_float16":
        keras.config.set_dtype_policy("mixed_float16")
    rng = np.random.default_rng(7)
    xs = rng.normal(size=(3, STEPS, INPUT_DIM)).astype("float32")
    layer = _built(kind, xs, rng)
    reset, mask = _resets_and_mask()
    call = lambda xs, reset, mask: layer(xs, reset=reset, mask=mask)  # noqa: E731
    if how == "xla":
        call = _compiled(call)
    elif how == "functional":  # a model with a reset input, the mask Keras's (`Masking`)
        xs[~mask] = 0.0
        inputs = [keras.Input((None, INPUT_DIM)), keras.Input((None,), dtype="bool")]
        symbolic = layer(keras.layers.Masking()(inputs[0]), reset=inputs[1])
        sizes = keras.tree.flatten(layer.cell.state_size)
        shapes = [(None, None, layer.cell.output_size), *((None, size) for size in sizes)]
        assert [tuple(t.shape) for t in symbolic] == shapes
        call = lambda xs, reset, _: keras.Model(inputs, symbolic)([xs, reset])  # noqa: E731
    packed = call(xs, reset, mask)
    dtype = keras.backend.standardize_dtype(packed[0].dtype)
    assert dtype == ("float16" if how == "mixed_float16" else "float32")
    atol = 5e-3 if how == "mixed_float16" else 1e-5
    assert_close(packed, separate_runs(layer, xs, reset, mask), atol=atol)


@tensorflow_only(FUSED_LOOP)
@pytest.mark.parametrize("layer_cls", [AssociativeGRU, DualAssociativeGRU])
def test_fused_loop_true_refuses_reset_and_auto_runs_keras_loop_with_it(layer_cls):
    xs = np.random.default_rng(11).normal(size=(2, 5, INPUT_DIM)).astype("float32")
    layer = layer_cls(UNITS, num_copies=COPIES, fused_loop=True)
    layer(xs)  # runs without reset
    message = "`reset`.*fused_loop=True.*fused_loop='auto'.*False"
    pytest.raises(ValueError, layer, xs, reset=np.zeros((2, 5), bool)).match(message)
    with pytest.raises(ValueError, match=message):
        layer(keras.Input((5, INPUT_DIM)), reset=keras.Input((5,), dtype="bool"))
    # "auto": the fused loop without `reset`, Keras's loop with it, to the same outputs.
    layer = layer_cls(UNITS, num_copies=COPIES, return_sequences=True)
    layer.build(xs.shape)
    assert layer.uses_fused_loop
    loops = []
    fused, keras_loop = layer.fused_inner_loop, layer.keras_inner_loop
    layer.fused_inner_loop = lambda *a: loops.append("fused") or fused(*a)
    layer.keras_inner_loop = lambda *a: loops.append("keras") or keras_loop(*a)
    plain, with_reset = layer(xs), layer(xs, reset=np.zeros((2, 5), bool))
    assert loops == ["fused", "keras"]
    np.testing.assert_allclose(as_numpy(with_reset), as_numpy(plain), atol=1e-5)


def test_a_reset_selects_zeros_so_a_non_finite_state_does_not_leak():
    (state,) = zero_where(np.array([True, False]), [np.array([[np.nan], [1.0]], "float32")])
    np.testing.assert_array_equal(as_numpy(state), [[0.0], [1.0]])
