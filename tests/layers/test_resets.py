"""The ``reset`` call argument of the window-attention and N-gram layers and cells against
their references (the suites of every layer and cell taking it: tests/layer_test_case.py).

A row with a reset at step t computes, from t on, exactly what the layer computes on the
document alone from a fresh state: checked against the NumPy references (which start the
history again at a reset) and against separate runs of each document, in both forms, with
masks, carried memory, XLA and mixed precision.
"""

import keras
import numpy as np
import pytest

from tests.layer_test_case import B, T, W
from tests.layer_test_case import packed_resets as _resets
from tests.support import BACKEND, PassThroughCell, all_pairs, compiled, gradients
from tests.window_reference import ngram_reference, window_attention_reference
from tf_memlayers import (
    NGramConcat,
    NGramConcatCell,
    ResettableRNN,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)

RNG = np.random.default_rng(7)


def _random_weights(layer, scale=0.5):
    values = {}
    for variable in layer.trainable_weights:
        name = variable.path.split("/")[-1]
        values[name] = RNG.normal(0.0, scale, variable.shape)
        variable.assign(values[name])
    return values


def _call(layer, x, mask, reset):
    """``layer(x, mask=mask, reset=reset)`` as NumPy, compiled on JAX (`compiled`)."""
    outputs = compiled(lambda x, mask, reset: layer(x, mask=mask, reset=reset))(x, mask, reset)
    return keras.tree.map_structure(np.asarray, outputs)


WINDOW_CASES = [
    ("attention", None, "mask"),
    ("key_value", (7, 5), "mask"),
    ("key_value_predict", None, "zeros"),
    ("key_value", None, "zeros"),
]


# Each case with and without a mask, the backend one more factor (`all_pairs`): each pass
# runs every case and both mask settings, half the pairs of them.
@pytest.mark.parametrize(
    "case, masked", all_pairs(WINDOW_CASES, [False, True], split_by_backend=True)
)
def test_window_attention_with_resets_matches_reference(float64_policy, case, masked):
    mode, sizes, pad = case
    x = RNG.normal(size=(B, T, W))
    reset = _resets()
    mask = None
    if masked:
        mask = np.ones((B, T), bool)
        mask[0, [2, 3, 9]] = False  # a reset at a masked step (3) is ignored
        mask[2, 7:] = False
    layer = SlidingWindowAttention(
        3, mode=mode, sizes=sizes, pad=pad, use_bias=True, return_attention_scores=True
    )
    layer.build(x.shape)
    weights = _random_weights(layer)
    outputs, scores = _call(layer, x, mask, reset)
    expected, expected_scores, _ = window_attention_reference(
        x, weights, mode, layer.piece_sizes, 3, pad, mask=mask, reset=reset
    )
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-10, rtol=0)
    # The reset changed something: without it, the rows with resets differ.
    assert not np.allclose(_call(layer, x, mask, None)[0][0, 4:], expected[0, 4:])

    cell = SlidingWindowAttentionCell(
        PassThroughCell(W), 3, mode=mode, sizes=sizes, pad=pad, use_bias=True
    )
    rnn = ResettableRNN(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    for variable in cell.trainable_weights:
        variable.assign(weights[variable.path.split("/")[-1]])
    cell_outputs = _call(rnn, x, mask, reset)
    np.testing.assert_allclose(cell_outputs, expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("n, masked", all_pairs([2, 3, 5], [False, True], split_by_backend=True))
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
    expected, _ = ngram_reference(
        x,
        weights["ngram_kernel"],
        n,
        layer.piece_sizes,
        weights["ngram_bias"],
        mask=mask,
        reset=reset,
    )
    np.testing.assert_allclose(_call(layer, x, mask, reset), expected, atol=1e-10, rtol=0)
    cell = NGramConcatCell(PassThroughCell(W), n, 5, use_bias=True)
    rnn = ResettableRNN(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    for variable in cell.trainable_weights:
        variable.assign(weights[variable.path.split("/")[-1]])
    np.testing.assert_allclose(_call(rnn, x, mask, reset), expected, atol=1e-10, rtol=0)


def _pair(window=3):
    """An LSTM under the parallel layer, and the cell form, with the same weights."""
    lstm = ResettableRNN(keras.layers.LSTMCell(W), return_sequences=True)
    parallel = SlidingWindowAttention(window, mode="key_value_predict", use_bias=True)
    rnn = ResettableRNN(
        SlidingWindowAttentionCell(
            keras.layers.LSTMCell(W), window, mode="key_value_predict", use_bias=True
        ),
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


def test_reset_with_go_backwards_is_refused():
    rnn = ResettableRNN(keras.layers.GRUCell(4), go_backwards=True)
    with pytest.raises(ValueError, match="`reset` cannot be combined with go_backwards"):
        rnn(np.zeros((B, T, W), "float32"), reset=_resets())
