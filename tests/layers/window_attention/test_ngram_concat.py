"""NGramConcat (parallel form) and NGramConcatCell (cell form), eq. (13)."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase, masking_checks, rnn_over, user_rnn
from tests.layers.window_attention.test_sliding_window_attention import (
    INITIALIZERS,
    assert_memory_carries_over,
    assert_twins_agree,
    build_twins,
    holes_and_right_padding,
    random_weights,
    resets,
)
from tests.support import PassThroughCell, all_pairs, as_numpy, assert_close, keras_lstm
from tests.window_reference import ngram_reference
from tf_memlayers import NGramConcat, NGramConcatCell, ResettableRNN


class NGramConcatTest(LayerTestCase):
    layer_cls = NGramConcat

    @pytest.mark.parametrize("init_kwargs", [dict(n=3, use_bias=True), dict(n=4, stateful=True)])
    def test_layer_behaviors(self, init_kwargs):
        weights = 1 + init_kwargs.get("use_bias", False)
        stateful = {"expected_num_non_trainable_weights": int(init_kwargs.get("stateful", False))}
        checks = masking_checks((2, 3, 5), weights, (2, 3, 6), **stateful)
        self.run_layer_test(NGramConcat, {"units": 5, **init_kwargs}, **checks)

    def test_journey(self, tmp_path):
        build = lambda e: NGramConcat(3, 6)(keras_lstm(8, return_sequences=True)(e))  # noqa: E731
        self.run_journey_test("step", build, tmp_path)

    def test_config_arguments_and_output_spec(self):
        config = dict(sizes=(3, 3, 3, 3), use_bias=True, return_memory=True, stateful=True)
        self.run_config_test(NGramConcat, n=5, units=9, **config, **INITIALIZERS, name="ng")
        self.run_flags_test(lambda **kw: NGramConcat(3, 4, **kw))
        self.run_sizes_test(lambda **kw: NGramConcat(3, 4, **kw))
        for n, sizes, memory in [(3, None, False), (4, (2, 1, 3), True), (2, None, True)]:
            options = dict(sizes=sizes, return_memory=memory)
            make = lambda dtype, n=n, o=options: NGramConcat(n, 5, dtype=dtype, **o)  # noqa: E731
            self.run_output_spec_test(make, (2, 5, sum(sizes or (4,))))

    def test_padding_resets_and_carried_memory(self):
        self.run_nan_padding_test(lambda: NGramConcat(3, 5, use_bias=True))
        self.run_empty_input_test(lambda: NGramConcat(3, 5, return_memory=True))
        self.run_reset_tests(lambda **kw: NGramConcat(3, 4, **kw))
        self.run_carried_memory_tests(lambda **kw: NGramConcat(5, 4, **kw))

    def test_mixed_float16_matches_float32(self):
        inputs = RNG.normal(size=(4, 8, 9)).astype("float32")
        self.run_mixed_precision_test(lambda: NGramConcat(4, 6), inputs, atol=5e-3)


class NGramConcatCellTest(LayerTestCase):
    layer_cls = NGramConcatCell

    @pytest.mark.parametrize(
        "inner, n, use_bias", [(keras.layers.GRUCell, 2, False), (keras.layers.LSTMCell, 4, True)]
    )
    def test_layer_and_cell_behaviors(self, inner, n, use_bias):
        def make(dtype=None):
            return NGramConcatCell(inner(6, dtype=dtype), n, 5, use_bias=use_bias, dtype=dtype)

        self.run_cell_tests(make)
        checks = masking_checks((2, 3, 5), 3 + 1 + use_bias, expected_num_seed_generators=1)
        self.run_layer_test(rnn_over(make), **checks)

    def test_journey(self, tmp_path):
        cell = lambda: NGramConcatCell(keras.layers.GRUCell(8), n=3, units=6)  # noqa: E731
        build = lambda e: user_rnn(cell(), return_sequences=True)(e)  # noqa: E731
        self.run_journey_test("step", build, tmp_path)

    def test_config_arguments_and_resets(self):
        config = dict(n=3, units=4, sizes=(5, 3), use_bias=True, **INITIALIZERS)
        self.run_config_test(NGramConcatCell, cell=keras.layers.LSTMCell(8), **config)
        make = lambda **kw: NGramConcatCell(keras.layers.LSTMCell(4), 3, 4, **kw)  # noqa: E731
        self.run_flags_test(make)
        self.run_sizes_test(make)
        self.run_reset_tests(make)


RNG = np.random.default_rng(1)


# Each (n, sizes), bias, mask (holes, padding) and resets by pairs, the backend one more factor;
# with resets the cell form runs in `ResettableRNN`'s loop, else in Keras's.
@pytest.mark.parametrize(
    "case, use_bias, masked, reset",
    all_pairs(
        [(2, None), (3, None), (4, None), (4, (5, 4, 3)), (5, (3, 3, 3, 3))],
        [False, True],
        [False, True],
        [False, True],
        split_by_backend=True,
    ),
)
@pytest.mark.usefixtures("float64_policy")
def test_parallel_and_cell_match_numpy_reference_float64(case, use_bias, masked, reset):
    n, sizes = case
    x, mask = RNG.normal(size=(2, 9, 12)), holes_and_right_padding() if masked else None
    extra = {"reset": resets()} if reset else {}
    layer = NGramConcat(n, 7, sizes=sizes, use_bias=use_bias)
    layer.build(x.shape)
    weights = random_weights(layer)
    kernel, bias = weights["ngram_kernel"], weights.get("ngram_bias", 0.0)
    expected, _ = ngram_reference(x, kernel, n, layer.piece_sizes, bias, mask=mask, **extra)
    np.testing.assert_allclose(as_numpy(layer(x, mask=mask, **extra)), expected, atol=1e-10, rtol=0)
    cell = NGramConcatCell(PassThroughCell(12), n, 7, sizes=sizes, use_bias=use_bias)
    loop = ResettableRNN if reset else keras.layers.RNN
    rnn = loop(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    for name, value in weights.items():
        getattr(cell, name).assign(value)
    np.testing.assert_allclose(as_numpy(rnn(x, mask=mask, **extra)), expected, atol=1e-10, rtol=0)
    if reset and n > 2:  # not vacuous: the rows with resets differ without (n = 2 keeps none)
        assert not np.allclose(as_numpy(layer(x, mask=mask)), expected)


def test_float32_matches_reference_to_1e5():
    x, layer = RNG.normal(size=(2, 9, 12)).astype("float32"), NGramConcat(4, 6)
    layer.build(x.shape)
    weights = random_weights(layer)
    expected, _ = ngram_reference(x.astype("float64"), weights["ngram_kernel"], 4, (4, 4, 4))
    np.testing.assert_allclose(as_numpy(layer(x)), expected, atol=1e-5)


def test_piece_i_comes_from_output_at_t_minus_i_plus_1(float64_policy):
    """With W^N the identity, h*_t = tanh([h^1_t ; h^2_{t-1} ; h^3_{t-2}])."""
    x, layer = RNG.normal(size=(1, 6, 3)) * 0.1, NGramConcat(4, 3)
    layer.build(x.shape)
    layer.ngram_kernel.assign(np.eye(3))
    got = np.arctanh(as_numpy(layer(x))[0])
    for t in range(6):
        expected = [x[0, t - i, i] if t >= i else 0.0 for i in range(3)]
        np.testing.assert_allclose(got[t], expected, atol=1e-12)


@pytest.mark.parametrize(
    "case, masked",
    all_pairs(
        [(2, None), (3, (8, 4)), (4, None), (5, (3, 3, 3, 3))], [False, True], split_by_backend=True
    ),
)
def test_cell_and_parallel_agree_on_gradients(float64_policy, case, masked):
    n, sizes = case
    twins = build_twins(NGramConcat, NGramConcatCell, n, 6, sizes=sizes, use_bias=True)
    assert_twins_agree(twins, masked, steps=8)


def test_the_memory_is_the_references_history_and_the_cell_state(float64_policy):
    x = RNG.normal(size=(2, 12, 12))
    # Holes on both sides of the cut after step 6; row 1 ends in padding.
    keep = np.ones((2, 12), bool)
    keep[0, [4, 5, 7]] = keep[1, 9:] = False
    layer = NGramConcat(4, 5, sizes=(5, 4, 3), use_bias=True, return_memory=True)
    layer.build(x.shape)
    weights = random_weights(layer)
    cell = NGramConcatCell(PassThroughCell(12), 4, 5, sizes=(5, 4, 3), use_bias=True)
    memory = assert_memory_carries_over(layer, cell, x, 6, keep)
    _, histories = ngram_reference(
        x[:, :6], weights["ngram_kernel"], 4, (5, 4, 3), weights["ngram_bias"], mask=keep[:, :6]
    )
    assert_close(memory, np.stack([np.concatenate(h) for h in histories]), atol=1e-12)
