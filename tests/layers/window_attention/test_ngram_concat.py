"""NGramConcat (parallel form) and NGramConcatCell (cell form), eq. (13)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.layer_test_case import (
    CELL_SPEC,
    RNN_MASKING,
    CarriedMemoryTests,
    CellTests,
    EmptyInputTests,
    LayerTestCase,
    ResetCellTests,
    ResetSequenceTests,
    SizesTests,
    rnn_case,
    user_rnn,
)
from tests.layers.window_attention.test_sliding_window_attention import (
    PassThroughCell,
    holes_and_right_padding,
    loss_and_grads,
)
from tests.support import BACKEND, all_pairs, gradients, keras_lstm
from tests.window_reference import ngram_reference
from tf_memlayers import NGramConcat, NGramConcatCell
from tf_memlayers.models._compiling import compile_and_build_optimizer


class NGramConcatTest(
    EmptyInputTests, ResetSequenceTests, CarriedMemoryTests, SizesTests, LayerTestCase
):
    """The shared suites of `NGramConcat` (tests/layer_test_case.py)."""

    layer_cls = NGramConcat
    make = staticmethod(lambda **kw: NGramConcat(3, 4, **kw))
    flags = ("use_bias", "return_memory", "stateful")
    keras_checks = {
        "ngram": (
            NGramConcat,
            {"n": 3, "units": 5, "use_bias": True},
            dict(
                input_shape=(2, 3, 6),
                expected_output_shape=(2, 3, 5),
                expected_num_trainable_weights=2,
                supports_masking=True,
            ),
        ),
        "ngram_stateful": (
            NGramConcat,
            {"n": 4, "units": 5, "stateful": True},
            dict(
                input_shape=(2, 3, 6),
                expected_output_shape=(2, 3, 5),
                expected_num_trainable_weights=1,
                expected_num_non_trainable_weights=1,
                supports_masking=True,
            ),
        ),
    }
    journeys = {
        "NGramConcat": (
            "step",
            lambda e: NGramConcat(3, 6)(keras_lstm(8, return_sequences=True)(e)),
        ),
    }
    nan_padding = {
        "ngram": lambda: NGramConcat(3, 5, use_bias=True),
    }
    output_spec = {
        "ngram": (lambda dtype: NGramConcat(3, 5, dtype=dtype), (2, 5, 4), {}),
        "ngram_memory": (
            lambda dtype: NGramConcat(4, 5, sizes=(2, 1, 3), return_memory=True, dtype=dtype),
            (2, 5, 6),
            {},
        ),
        "ngram_2_memory": (
            lambda dtype: NGramConcat(2, 5, return_memory=True, dtype=dtype),
            (2, 5, 4),
            {},
        ),
    }
    empty = {
        "ngram": lambda: NGramConcat(3, 5, return_memory=True),
    }


class NGramConcatCellTest(CellTests, ResetCellTests, SizesTests, LayerTestCase):
    """The shared suites of `NGramConcatCell` (tests/layer_test_case.py)."""

    layer_cls = NGramConcatCell
    make = staticmethod(lambda **kw: NGramConcatCell(keras.layers.LSTMCell(4), 3, 4, **kw))
    flags = ("use_bias",)
    not_in = {"output_spec": CELL_SPEC, "nan_padding": RNN_MASKING}
    cells = {
        "ngram_2": lambda dtype=None: NGramConcatCell(
            keras.layers.GRUCell(6, dtype=dtype), n=2, units=5, dtype=dtype
        ),
        "ngram_4": lambda dtype=None: NGramConcatCell(
            keras.layers.LSTMCell(6, dtype=dtype), n=4, units=5, use_bias=True, dtype=dtype
        ),
    }
    keras_checks = {
        "rnn_ngram_2": rnn_case(cells["ngram_2"], 5, 3 + 1, 1),
        "rnn_ngram_4": rnn_case(cells["ngram_4"], 5, 3 + 2, 1),
    }
    journeys = {
        "NGramConcatCell": (
            "step",
            lambda e: user_rnn(
                NGramConcatCell(keras.layers.GRUCell(8), n=3, units=6), return_sequences=True
            )(e),
        ),
    }


RNG = np.random.default_rng(1)


def set_random(layer, names=("ngram_kernel", "ngram_bias")):
    values = {}
    for name in names:
        if hasattr(layer, name):
            variable = getattr(layer, name)
            values[name] = RNG.normal(0.0, 0.5, variable.shape)
            variable.assign(values[name])
    return values


# Each (n, sizes) with and without a bias, the backend one more factor (`all_pairs`).
@pytest.mark.parametrize(
    "case, use_bias",
    all_pairs(
        [(2, None), (3, None), (4, None), (4, (5, 4, 3)), (5, (3, 3, 3, 3))],
        [False, True],
        split_by_backend=True,
    ),
)
def test_parallel_and_cell_match_numpy_reference_float64(float64_policy, case, use_bias):
    n, sizes = case
    x = RNG.normal(size=(2, 9, 12))
    layer = NGramConcat(n, 7, sizes=sizes, use_bias=use_bias)
    layer.build(x.shape)
    weights = set_random(layer)
    expected, _ = ngram_reference(
        x, weights["ngram_kernel"], n, layer.piece_sizes, weights.get("ngram_bias", 0.0)
    )
    np.testing.assert_allclose(np.asarray(layer(x)), expected, atol=1e-10, rtol=0)
    cell = NGramConcatCell(PassThroughCell(12), n, 7, sizes=sizes, use_bias=use_bias)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    rnn.build(x.shape)
    for name, value in weights.items():
        getattr(cell, name).assign(value)
    np.testing.assert_allclose(np.asarray(rnn(x)), expected, atol=1e-10, rtol=0)


def test_float32_matches_reference_to_1e5():
    x = RNG.normal(size=(2, 9, 12)).astype("float32")
    layer = NGramConcat(4, 6)
    layer.build(x.shape)
    weights = set_random(layer)
    expected, _ = ngram_reference(x.astype("float64"), weights["ngram_kernel"], 4, (4, 4, 4))
    np.testing.assert_allclose(np.asarray(layer(x)), expected, atol=1e-5)


def test_piece_i_comes_from_output_at_t_minus_i_plus_1(float64_policy):
    """With W^N the identity, h*_t = tanh([h^1_t ; h^2_{t-1} ; h^3_{t-2}])."""
    x = RNG.normal(size=(1, 6, 3)) * 0.1
    layer = NGramConcat(4, 3)
    layer.build(x.shape)
    layer.ngram_kernel.assign(np.eye(3))
    got = np.arctanh(np.asarray(layer(x))[0])
    for t in range(6):
        expected = [
            x[0, t, 0],
            x[0, t - 1, 1] if t >= 1 else 0.0,
            x[0, t - 2, 2] if t >= 2 else 0.0,
        ]
        np.testing.assert_allclose(got[t], expected, atol=1e-12)


def build_pair(n, sizes, units=6, width=12, features=5):
    """An LSTM + parallel layer and an RNN(cell form) with identical weights."""
    lstm = keras_lstm(width, return_sequences=True)
    parallel = NGramConcat(n, units, sizes=sizes, use_bias=True)
    cell = NGramConcatCell(keras.layers.LSTMCell(width), n, units, sizes=sizes, use_bias=True)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    lstm.build((2, 8, features))
    parallel.build((2, 8, width))
    rnn.build((2, 8, features))
    set_random(parallel)
    for a, b in zip(lstm.weights, cell.cell.weights):
        b.assign(a)
    cell.ngram_kernel.assign(parallel.ngram_kernel)
    cell.ngram_bias.assign(parallel.ngram_bias)
    return lstm, parallel, rnn


@pytest.mark.parametrize(
    "case, masked",
    all_pairs(
        [(2, None), (3, (8, 4)), (4, None), (5, (3, 3, 3, 3))], [False, True], split_by_backend=True
    ),
)
def test_cell_and_parallel_agree_on_gradients(float64_policy, case, masked):
    n, sizes = case
    lstm, parallel, rnn = build_pair(n, sizes)
    # Masked steps are left out of the comparison and the loss; on JAX Keras's RNN emits the
    # cell's first state there (KERAS_MASKED_OUTPUT), zeros with zero_output_for_mask.
    rnn.zero_output_for_mask = BACKEND != "tensorflow"
    x = RNG.normal(size=(2, 8, 5))
    keep = holes_and_right_padding(steps=8) if masked else np.ones((2, 8), bool)
    mask = ops.convert_to_tensor(keep) if masked else None
    # Masked steps are left out of the loss: there the cell form repeats its previous output.
    projection = ops.convert_to_tensor(RNG.normal(size=(2, 8, 6)) * keep[..., None])
    out_p, g_p = loss_and_grads(
        lambda v: parallel(lstm(v, mask=mask), mask=mask),
        x,
        [*lstm.trainable_weights, parallel.ngram_kernel, parallel.ngram_bias],
        projection,
    )
    cell = rnn.cell
    out_c, g_c = loss_and_grads(
        lambda v: rnn(v, mask=mask),
        x,
        [*cell.cell.trainable_weights, cell.ngram_kernel, cell.ngram_bias],
        projection,
    )
    np.testing.assert_allclose(np.asarray(out_c)[keep], np.asarray(out_p)[keep], atol=1e-12)
    for a, b in zip(g_p, g_c):
        assert np.abs(np.asarray(a)).max() > 0
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-11)


def test_masked_steps_are_skipped_and_right_padding_is_harmless(float64_policy):
    x = RNG.normal(size=(2, 9, 12))
    mask = RNG.random((2, 9)) > 0.3
    layer = NGramConcat(4, 5)
    layer.build(x.shape)
    weights = set_random(layer)
    expected, _ = ngram_reference(x, weights["ngram_kernel"], 4, (4, 4, 4), mask=mask)
    mask_tensor = ops.convert_to_tensor(mask)
    np.testing.assert_allclose(np.asarray(layer(x, mask=mask_tensor)), expected, atol=1e-10)
    cell = NGramConcatCell(PassThroughCell(12), 4, 5)
    rnn = keras.layers.RNN(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    cell.ngram_kernel.assign(weights["ngram_kernel"])
    np.testing.assert_allclose(np.asarray(rnn(x, mask=mask_tensor)), expected, atol=1e-10)
    right = np.arange(9)[None] < np.array([[9], [4]])
    padded = np.asarray(layer(x, mask=ops.convert_to_tensor(right)))
    np.testing.assert_allclose(padded[1, :4], np.asarray(layer(x[1:2, :4]))[0], atol=1e-12)


def test_stateful_segments_equal_one_run_and_reset_clears(float64_policy):
    x = RNG.normal(size=(3, 40, 12))
    whole = NGramConcat(4, 5)
    whole.build(x.shape)
    stateful = NGramConcat(4, 5, stateful=True)
    stateful.build((3, 20, 12))
    stateful.ngram_kernel.assign(whole.ngram_kernel)
    expected = np.asarray(whole(x))
    first, second = np.asarray(stateful(x[:, :20])), np.asarray(stateful(x[:, 20:]))
    np.testing.assert_allclose(np.concatenate([first, second], 1), expected, atol=1e-12)
    stateful.reset_state()
    np.testing.assert_allclose(np.asarray(stateful(x[:, :20])), first, atol=1e-12)

    cell_rnn = keras.layers.RNN(
        NGramConcatCell(PassThroughCell(12), 4, 5), return_sequences=True, stateful=True
    )
    cell_rnn.build((3, 20, 12))
    cell_rnn.cell.ngram_kernel.assign(whole.ngram_kernel)
    got = np.concatenate([np.asarray(cell_rnn(x[:, :20])), np.asarray(cell_rnn(x[:, 20:]))], 1)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    cell_rnn.reset_state()
    np.testing.assert_allclose(np.asarray(cell_rnn(x[:, :20])), first, atol=1e-12)


def test_explicit_memory_equals_cell_state(float64_policy):
    x = RNG.normal(size=(2, 10, 12))
    layer = NGramConcat(5, 4, return_memory=True)
    layer.build(x.shape)
    _, memory = layer(x)
    _, histories = ngram_reference(x, np.asarray(layer.ngram_kernel), 5, (3, 3, 3, 3))
    np.testing.assert_allclose(np.asarray(memory), np.stack([np.concatenate(h) for h in histories]))


def test_explicit_memory_in_and_out_equals_one_run_and_cell_state(float64_policy):
    x = RNG.normal(size=(2, 12, 12))
    # Holes on both sides of the cut after step 6; row 1 ends in padding.
    keep = np.ones((2, 12), bool)
    keep[0, [4, 5, 7]] = False
    keep[1, 9:] = False
    mask = ops.convert_to_tensor(keep)
    layer = NGramConcat(4, 5, sizes=(5, 4, 3), use_bias=True, return_memory=True)
    layer.build(x.shape)
    weights = set_random(layer)
    expected, _ = layer(x, mask=mask)
    first, memory = layer(x[:, :6], mask=mask[:, :6])
    second, _ = layer(x[:, 6:], mask=mask[:, 6:], initial_memory=memory)
    np.testing.assert_allclose(np.concatenate([first, second], 1), np.asarray(expected), atol=1e-12)
    # The memory is exactly the cell form's state after the same 6 steps.
    cell = NGramConcatCell(PassThroughCell(12), 4, 5, sizes=(5, 4, 3), use_bias=True)
    rnn = keras.layers.RNN(cell, return_state=True)
    rnn.build(x.shape)
    for name, value in weights.items():
        getattr(cell, name).assign(value)
    _, _, cell_memory = rnn(x[:, :6], mask=mask[:, :6])
    np.testing.assert_allclose(np.asarray(cell_memory), np.asarray(memory), atol=1e-12)


def test_no_gradient_flows_into_carried_memory(float64_policy):
    x = RNG.normal(size=(1, 6, 12))
    layer = NGramConcat(4, 5, return_memory=True)
    layer.build(x.shape)
    memory = RNG.normal(size=(1, layer.memory_size))
    _, _, (memory_grad,) = gradients(
        lambda m: ops.sum(layer(x, initial_memory=m)[0]), inputs=[memory]
    )
    assert np.all(memory_grad == 0.0)
    # ... although the first outputs do read it.
    out, _ = layer(x, initial_memory=memory)
    expected, _ = ngram_reference(
        x,
        np.asarray(layer.ngram_kernel),
        4,
        (4, 4, 4),
        memory=[np.split(np.asarray(memory)[0], 2)],
    )
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-12)


def test_config_round_trip_and_keras_file(tmp_path):
    layer = NGramConcat(
        5,
        9,
        sizes=(3, 3, 3, 3),
        use_bias=True,
        return_memory=True,
        stateful=True,
        kernel_initializer="orthogonal",
        name="ng",
    )
    assert NGramConcat.from_config(layer.get_config()).get_config() == layer.get_config()
    cell = NGramConcatCell(keras.layers.LSTMCell(8), 3, 4, sizes=(5, 3), use_bias=True)
    assert NGramConcatCell.from_config(cell.get_config()).get_config() == cell.get_config()

    inputs = keras.Input((None, 3))
    h = keras.layers.GRU(8, return_sequences=True)(inputs)
    a = NGramConcat(3, 4)(h)
    b = keras.layers.RNN(NGramConcatCell(keras.layers.GRUCell(8), 3, 4), return_sequences=True)(
        inputs
    )
    model = keras.Model(inputs, [a, b])
    x = RNG.normal(size=(2, 6, 3)).astype("float32")
    before = model(x)
    model.save(tmp_path / "ngram.keras")
    after = keras.models.load_model(tmp_path / "ngram.keras")(x)
    for u, v in zip(before, after):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def small_language_model(probe=False):
    """Logits; with ``probe`` also h*_t."""
    inputs = keras.Input((8,), dtype="int32")
    h = keras.layers.Embedding(20, 6)(inputs)
    h = keras_lstm(9, return_sequences=True)(h)
    h_star = NGramConcat(4, 6)(h)
    logits = keras.layers.Dense(20)(h_star)
    return keras.Model(inputs, [logits, h_star] if probe else logits)


def test_jit_fit_matches_eager_and_trains():
    data = RNG.integers(0, 20, (16, 9))
    model = small_language_model()
    eager = model.predict(data[:, :-1], verbose=0)
    compile_and_build_optimizer(
        model,
        "adam",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    np.testing.assert_allclose(model.predict(data[:, :-1], verbose=0), eager, atol=1e-5)
    losses = model.fit(data[:, :-1], data[:, 1:], epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses))


def test_mixed_float16_matches_float32():
    rng = np.random.default_rng(5)
    data = rng.integers(0, 20, (4, 8))
    model = small_language_model(probe=True)
    # At the Glorot init h*_t is tiny (|logits| < 0.02): U(-0.8, 0.8) gives it a real range.
    for variable in model.weights:
        variable.assign(rng.uniform(-0.8, 0.8, variable.shape))
    logits, h_star = model.predict(data, verbose=0)
    keras.config.set_dtype_policy("mixed_float16")
    half = small_language_model(probe=True)
    half.set_weights(model.get_weights())
    got_logits, got_h_star = half.predict(data, verbose=0)
    assert got_h_star.dtype == got_logits.dtype == np.float16  # the policy's compute dtype
    np.testing.assert_allclose(got_logits, logits, atol=5e-3 * max(1.0, np.abs(logits).max()))
    np.testing.assert_allclose(got_h_star, h_star, atol=5e-3)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"`n` must be >= 2, got 1"):
        NGramConcat(1, 4)
    with pytest.raises(ValueError, match=r"`units` must be >= 1, got 0"):
        NGramConcat(3, 0)
    with pytest.raises(ValueError, match=r"width 10 does not divide into 3 equal pieces.*sizes="):
        NGramConcat(4, 4)(np.zeros((1, 2, 10), "float32"))
    with pytest.raises(ValueError, match=r"`sizes` \(4, 4\) sum to 8, but the input width is 10"):
        NGramConcat(3, 4, sizes=(4, 4))(np.zeros((1, 2, 10), "float32"))
    with pytest.raises(ValueError, match=r"must have rank 3"):
        NGramConcat(3, 4)(np.zeros((2, 10), "float32"))
    with pytest.raises(ValueError, match=r"`sizes` must list 2 pieces"):
        NGramConcatCell(keras.layers.GRUCell(10), 3, 4, sizes=(4, 3, 3))
