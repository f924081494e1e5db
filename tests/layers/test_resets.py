"""The ``reset`` call argument: of the window-attention and N-gram layers and cells against
their references, and of every declared layer and cell that takes it.

A row with a reset at step t computes, from t on, exactly what the layer computes on the
document alone from a fresh state: checked against the NumPy references (which start the
history again at a reset) and against separate runs of each document, in both forms, with
masks, carried memory, XLA and mixed precision.
"""

import keras
import numpy as np
import pytest

from support import BACKEND, PassThroughCell, gradients
from layer_registry import declared_makers, extra_call_arguments
from tf_memlayers import (
    NGramConcat,
    NGramConcatCell,
    ResettableRNN,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.layers.window_attention.sequence_layer import MemorySequenceLayer
from window_reference import ngram_reference, window_attention_reference

RNG = np.random.default_rng(7)
B, T, W = 3, 11, 12


def _resets():
    """Row 0: two resets; row 1: a reset at the first step and one at the last; row 2: none."""
    reset = np.zeros((B, T), bool)
    reset[0, [3, 8]] = True
    reset[1, [0, T - 1]] = True
    return reset


def _documents(reset, row):
    """``(start, stop)`` of each document of ``row`` (the steps before the first reset form
    the first)."""
    starts = sorted({0, *np.flatnonzero(reset[row])})
    return list(zip(starts, [*starts[1:], reset.shape[1]]))


def _random_weights(layer, scale=0.5):
    values = {}
    for variable in layer.trainable_weights:
        name = variable.path.split("/")[-1]
        values[name] = RNG.normal(0.0, scale, variable.shape)
        variable.assign(values[name])
    return values


WINDOW_CASES = [
    ("attention", None, "mask"),
    ("key_value", (7, 5), "mask"),
    ("key_value_predict", None, "zeros"),
    ("key_value", None, "zeros"),
]


@pytest.mark.parametrize("mode,sizes,pad", WINDOW_CASES)
@pytest.mark.parametrize("masked", [False, True])
def test_window_attention_with_resets_matches_reference(float64_policy, mode, sizes, pad, masked):
    x = RNG.normal(size=(B, T, W))
    reset = _resets()
    mask = None
    if masked:
        mask = np.ones((B, T), bool)
        mask[0, [2, 3, 9]] = False  # a reset at a masked step (3) is ignored
        mask[2, 7:] = False
    layer = SlidingWindowAttention(3, mode=mode, sizes=sizes, pad=pad, use_bias=True,
                                   return_attention_scores=True)  # fmt: skip
    layer.build(x.shape)
    weights = _random_weights(layer)
    outputs, scores = layer(x, mask=mask, reset=reset)
    expected, expected_scores, _ = window_attention_reference(
        x, weights, mode, layer.piece_sizes, 3, pad, mask=mask, reset=reset
    )
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-10, rtol=0)
    # The reset changed something: without it, the rows with resets differ.
    assert not np.allclose(np.asarray(layer(x, mask=mask)[0])[0, 4:], expected[0, 4:])

    cell = SlidingWindowAttentionCell(PassThroughCell(W), 3, mode=mode, sizes=sizes, pad=pad,
                                      use_bias=True)  # fmt: skip
    rnn = ResettableRNN(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    for variable in cell.trainable_weights:
        variable.assign(weights[variable.path.split("/")[-1]])
    cell_outputs = np.asarray(rnn(x, mask=mask, reset=reset))
    np.testing.assert_allclose(cell_outputs, expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("masked", [False, True])
def test_ngram_with_resets_matches_reference(float64_policy, n, masked):
    x = RNG.normal(size=(B, T, W))
    reset = _resets()
    mask = None
    if masked:
        mask = np.ones((B, T), bool)
        mask[0, [3, 5]] = False
        mask[1, :2] = False
    layer = NGramConcat(n, 5, use_bias=True)
    layer.build(x.shape)
    weights = _random_weights(layer)
    expected, _ = ngram_reference(x, weights["ngram_kernel"], n, layer.piece_sizes,
                                  weights["ngram_bias"], mask=mask, reset=reset)  # fmt: skip
    np.testing.assert_allclose(
        np.asarray(layer(x, mask=mask, reset=reset)), expected, atol=1e-10, rtol=0
    )
    cell = NGramConcatCell(PassThroughCell(W), n, 5, use_bias=True)
    rnn = ResettableRNN(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    for variable in cell.trainable_weights:
        variable.assign(weights[variable.path.split("/")[-1]])
    np.testing.assert_allclose(
        np.asarray(rnn(x, mask=mask, reset=reset)), expected, atol=1e-10, rtol=0
    )


# Every declared sequence layer with a carried memory (tests/layer_registry.py), and the
# window layer with zero padding of the window.
MEMORY_LAYERS = {
    **declared_makers(base=MemorySequenceLayer),
    "SlidingWindowAttention_pad_zeros": lambda **kw: SlidingWindowAttention(2, pad="zeros", **kw),
}


@pytest.mark.parametrize("name", sorted(MEMORY_LAYERS))
def test_packed_documents_equal_separate_runs_and_memory_is_the_last_document(
    float64_policy, name
):
    x = RNG.normal(size=(B, T, W))
    reset = _resets()
    layer = MEMORY_LAYERS[name](return_memory=True)
    outputs, memory = layer(x, reset=reset)
    for row in range(B):
        for start, stop in _documents(reset, row):
            alone, alone_memory = layer(x[row : row + 1, start:stop])
            np.testing.assert_allclose(np.asarray(outputs)[row, start:stop],
                                       np.asarray(alone)[0], atol=1e-12, rtol=0)  # fmt: skip
        # The memory after the call is the last document's: continuing from it equals
        # continuing the last document alone.
        np.testing.assert_allclose(np.asarray(memory)[row], np.asarray(alone_memory)[0],
                                   atol=1e-12, rtol=0)  # fmt: skip


@pytest.mark.parametrize("name", sorted(MEMORY_LAYERS))
def test_a_reset_forgets_carried_memory_and_other_rows_keep_it(float64_policy, name):
    x = RNG.normal(size=(B, T, W))
    layer = MEMORY_LAYERS[name](return_memory=True)
    _, carried = layer(RNG.normal(size=(B, 6, W)))
    reset = np.zeros((B, T), bool)
    reset[0, 0] = True  # row 0 starts a new document: the carried memory is forgotten
    reset[1, 4] = True
    outputs = np.asarray(layer(x, initial_memory=carried, reset=reset)[0])
    fresh = np.asarray(layer(x)[0])
    continued = np.asarray(layer(x, initial_memory=carried)[0])
    np.testing.assert_allclose(outputs[0], fresh[0], atol=1e-12, rtol=0)
    np.testing.assert_allclose(outputs[1, :4], continued[1, :4], atol=1e-12, rtol=0)
    np.testing.assert_allclose(outputs[1, 4:], np.asarray(layer(x[1:2, 4:])[0])[0],
                               atol=1e-12, rtol=0)  # fmt: skip
    np.testing.assert_allclose(outputs[2], continued[2], atol=1e-12, rtol=0)
    assert not np.allclose(fresh[2], continued[2])


@pytest.mark.parametrize("name", sorted(MEMORY_LAYERS))
def test_stateful_segments_with_resets_equal_one_run(float64_policy, name):
    x = RNG.normal(size=(B, T, W))
    reset = _resets()
    whole = MEMORY_LAYERS[name]()
    expected = np.asarray(whole(x, reset=reset))
    stateful = MEMORY_LAYERS[name](stateful=True)
    stateful.build((B, None, W))
    stateful.set_weights(whole.get_weights()[: len(stateful.trainable_weights)]
                         + [np.zeros(stateful.memory.shape)])  # fmt: skip
    parts = [stateful(x[:, a:b], reset=reset[:, a:b]) for a, b in ((0, 5), (5, 9), (9, T))]
    np.testing.assert_allclose(np.concatenate([np.asarray(p) for p in parts], axis=1), expected,
                               atol=1e-12, rtol=0)  # fmt: skip


def _pair(window=3):
    """An LSTM under the parallel layer, and the cell form, with the same weights."""
    lstm = ResettableRNN(keras.layers.LSTMCell(W), return_sequences=True)
    parallel = SlidingWindowAttention(window, mode="key_value_predict", use_bias=True)
    rnn = ResettableRNN(
        SlidingWindowAttentionCell(keras.layers.LSTMCell(W), window, mode="key_value_predict",
                                   use_bias=True),  # fmt: skip
        return_sequences=True,
    )
    shape = (B, T, 5)
    lstm.build(shape)
    parallel.build((B, T, W))
    rnn.build(shape)
    _random_weights(parallel)
    cell = rnn.cell
    # Copied as arrays: a JAX variable assigned another variable shares its buffer, which a
    # compiled predict of the other model may then donate.
    for source, target in zip(lstm.weights, cell.cell.weights):
        target.assign(keras.ops.convert_to_numpy(source))
    for variable in parallel.weights:
        getattr(cell, variable.path.split("/")[-1]).assign(keras.ops.convert_to_numpy(variable))
    return lstm, parallel, rnn


def test_cell_and_parallel_forms_agree_with_resets_forward_and_gradients(float64_policy):
    lstm, parallel, rnn = _pair()
    x = RNG.normal(size=(B, T, 5))
    reset = _resets()
    mask = np.ones((B, T), bool)
    mask[2, 8:] = False

    def parallel_loss(inputs):
        h = lstm(inputs, mask=mask, reset=reset)
        out = parallel(h, mask=mask, reset=reset)
        return keras.ops.sum(keras.ops.where(mask[..., None], out, 0.0) ** 2)

    def cell_loss(inputs):
        out = rnn(inputs, mask=mask, reset=reset)
        return keras.ops.sum(keras.ops.where(mask[..., None], out, 0.0) ** 2)

    names = [v.path.split("/")[-1] for v in parallel.trainable_weights]
    cell = rnn.cell
    variables = lstm.trainable_weights + parallel.trainable_weights
    cell_variables = cell.cell.trainable_weights + [getattr(cell, name) for name in names]
    loss_a, grads_a, (dx_a,) = gradients(parallel_loss, variables, [x])
    loss_b, grads_b, (dx_b,) = gradients(cell_loss, cell_variables, [x])
    np.testing.assert_allclose(loss_a, loss_b, rtol=1e-12)
    for a, b in zip(grads_a, grads_b):
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=0)
    np.testing.assert_allclose(dx_a, dx_b, atol=1e-10, rtol=0)


@pytest.mark.parametrize("form", ["parallel", "cell"])
def test_no_gradient_crosses_a_reset(float64_policy, form):
    lstm, parallel, rnn = _pair()
    x = RNG.normal(size=(B, T, 5))
    reset = _resets()

    def loss(inputs):
        if form == "parallel":
            out = parallel(lstm(inputs, reset=reset), reset=reset)
        else:
            out = rnn(inputs, reset=reset)
        return keras.ops.sum(out[0, 3:8] ** 2)  # row 0's second document

    _, _, (dx,) = gradients(loss, [], [x])
    assert np.all(dx[0, :3] == 0) and np.all(dx[0, 8:] == 0) and np.all(dx[1:] == 0)
    assert np.all(np.abs(dx[0, 3:8]).sum(-1) > 0)


# Every declared cell whose step takes ``reset`` (tests/layer_registry.py).
RESET_CELLS = declared_makers(cell=True, call_argument="reset")
# Every declared layer on whole sequences whose call takes ``reset``.
RESET_SEQUENCE_LAYERS = declared_makers(cell=False, call_argument="reset")


def _step_states(cell):
    return [RNG.normal(size=(B, size)) for size in keras.tree.flatten(cell.state_size)]


@pytest.mark.parametrize("name", sorted(RESET_CELLS))
def test_one_step_cell_reset_starts_the_rows_again(float64_policy, name):
    """A reset row steps from zero states, except the states a cell carries unchanged (the
    dual cell's source memory); the other rows step from their own states."""
    cell = RESET_CELLS[name]()
    extra = extra_call_arguments(name, B)
    x = RNG.normal(size=(B, 5))
    states = _step_states(cell)
    kept_output, kept_states = cell(x, states, **extra)
    carried = [np.array_equal(np.asarray(new), old) for new, old in zip(kept_states, states)]
    reset = np.array([True, False, True])
    output, new_states = cell(x, states, reset=reset, **extra)
    zeroed = [old if keep else np.zeros_like(old) for old, keep in zip(states, carried)]
    fresh_output, fresh_states = cell(x, zeroed, **extra)
    output = np.asarray(output)
    np.testing.assert_allclose(output[reset], np.asarray(fresh_output)[reset], atol=1e-12)
    np.testing.assert_allclose(output[~reset], np.asarray(kept_output)[~reset], atol=1e-12)
    assert np.abs(output[0] - np.asarray(kept_output)[0]).max() > 1e-3
    for new, fresh, kept in zip(new_states, fresh_states, kept_states):
        new = np.asarray(new)
        np.testing.assert_allclose(new[reset], np.asarray(fresh)[reset], atol=1e-12)
        np.testing.assert_allclose(new[~reset], np.asarray(kept)[~reset], atol=1e-12)


def test_resets_under_jit_compile_match_eager():
    lstm, parallel, rnn = _pair()
    x = RNG.normal(size=(B, T, 5)).astype("float32")
    reset = _resets()
    inputs = keras.Input((T, 5))
    flags = keras.Input((T,), dtype="bool")
    outputs = parallel(lstm(inputs, reset=flags), reset=flags)
    model = keras.Model([inputs, flags], outputs)
    cell_model = keras.Model([inputs, flags], rnn(inputs, reset=flags))
    model.compile(jit_compile=BACKEND != "torch")
    cell_model.compile(jit_compile=BACKEND != "torch")
    eager = np.asarray(model([x, reset]))
    np.testing.assert_allclose(model.predict([x, reset], verbose=0), eager, atol=1e-5)
    np.testing.assert_allclose(cell_model.predict([x, reset], verbose=0), eager, atol=1e-5)


def test_resets_under_mixed_float16_match_float32():
    x = RNG.normal(size=(B, T, W)).astype("float32")
    reset = _resets()
    reference = SlidingWindowAttention(3, mode="key_value")
    expected = np.asarray(reference(x, reset=reset))
    half = SlidingWindowAttention(3, mode="key_value", dtype="mixed_float16")
    half.build(x.shape)
    half.set_weights(reference.get_weights())
    np.testing.assert_allclose(
        np.asarray(half(x, reset=reset)).astype("float32"), expected, atol=2e-2
    )


BAD_RESETS = [
    (np.zeros((B, T), "float32"), "must be a bool tensor"),
    (np.zeros((B, T), "int32"), "must be a bool tensor"),
    (np.zeros((B, T + 1), bool), r"must have shape \(batch, time\)"),
    (np.zeros((B,), bool), r"must have shape \(batch, time\)"),
    (np.zeros((B + 1, T), bool), r"must have shape \(batch, time\)"),
]


@pytest.mark.parametrize("bad,match", BAD_RESETS)
@pytest.mark.parametrize("name", sorted(RESET_SEQUENCE_LAYERS))
def test_bad_resets_are_refused_naming_reset(name, bad, match):
    layer = RESET_SEQUENCE_LAYERS[name]()
    x = np.zeros((B, T, W), "float32")
    with pytest.raises(ValueError, match="`reset` " + match):
        layer(x, reset=bad, **extra_call_arguments(name, B))


@pytest.mark.parametrize(
    "bad",
    [np.zeros((B,), "float32"), np.zeros((B + 1,), bool), np.zeros((B, 1), bool),
     np.zeros((B, 5), bool)],  # fmt: skip
    ids=["float32", "another_batch", "rank_2", "a_sequence"],
)
@pytest.mark.parametrize("name", sorted(RESET_CELLS))
def test_bad_one_step_resets_are_refused_naming_reset(name, bad):
    cell = RESET_CELLS[name]()
    states = [state.astype("float32") for state in _step_states(cell)]
    extra = extra_call_arguments(name, B)
    with pytest.raises(ValueError, match="`reset` must"):
        cell(np.zeros((B, 5), "float32"), states, reset=bad, **extra)


def test_reset_with_go_backwards_is_refused():
    rnn = ResettableRNN(keras.layers.GRUCell(4), go_backwards=True)
    with pytest.raises(ValueError, match="`reset` cannot be combined with go_backwards"):
        rnn(np.zeros((B, T, W), "float32"), reset=_resets())
