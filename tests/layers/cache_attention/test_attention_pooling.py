"""AttentionPooling against a NumPy restatement of Gaffney §3.2."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase, masking_checks
from tests.support import as_numpy, assert_close, keras_lstm
from tests.window_reference import masked_softmax
from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling


class AttentionPoolingTest(LayerTestCase):
    layer_cls = AttentionPooling

    def test_layer_behaviors(self):
        self.run_layer_test(AttentionPooling, {"attention_units": 3}, **masking_checks((2, 4), 2))

    def test_journey(self, tmp_path):
        build = lambda e: AttentionPooling(4)(keras_lstm(8, return_sequences=True)(e))  # noqa: E731
        self.run_journey_test("pooled", build, tmp_path)

    def test_config_padding_and_empty_input(self):
        self.run_config_test(AttentionPooling, attention_units=5, kernel_initializer="ones")
        # Versions 0.1 and 0.2 named the attention width `units` in the config.
        config = AttentionPooling(5, name="p").get_config()
        config["units"] = config.pop("attention_units")
        assert AttentionPooling.from_config(config).attention_units == 5
        with pytest.warns(DeprecationWarning, match="`units` is deprecated"):  # 0.2's name
            assert AttentionPooling(units=5).units == 5  # as an argument and an attribute
        self.run_nan_padding_test(lambda: AttentionPooling(3))
        # Pooling has no memory: its one output is the pooled vector.
        self.run_empty_input_test(lambda: AttentionPooling(3), last_output_is_memory=False)

    @pytest.mark.parametrize("scores", [False, True])
    def test_output_spec(self, scores):
        make = lambda dtype: AttentionPooling(3, dtype=dtype)  # noqa: E731
        self.run_output_spec_test(make, (2, 5, 4), return_attention_scores=scores)

    def test_mixed_float16_matches_float32(self):
        inputs = np.random.default_rng(3).normal(size=(8, 5, 6)).astype("float32")
        make = lambda: AttentionPooling(3)  # noqa: E731
        got = self.run_mixed_precision_test(make, inputs, atol=5e-3, return_attention_scores=True)
        # Documented: pooled in the compute dtype, the softmax weights in float32.
        assert keras.backend.standardize_dtype(got[1].dtype) == "float32"


def reference(inputs, mask, kernel, score_vector):
    weights = masked_softmax(np.tanh(inputs @ kernel) @ score_vector, mask)  # [B, T]
    return np.einsum("bt,btd->bd", weights, inputs), weights


@pytest.mark.parametrize("dtype, atol", [("float64", 1e-12), ("float32", 1e-5)])
def test_matches_reference_with_mask(dtype, atol):
    inputs, mask = np.random.default_rng(0).normal(size=(3, 7, 5)), np.ones((3, 7), bool)
    mask[0, :3] = False  # left padding
    mask[2] = False  # nothing to pool
    layer = AttentionPooling(4, dtype=dtype)
    pooled, weights = layer(inputs.astype(dtype), mask=mask, return_attention_scores=True)
    kernel, score = (as_numpy(v).astype(np.float64) for v in (layer.kernel, layer.score))
    expected, expected_weights = reference(inputs, mask, kernel, score)
    assert_close([pooled, weights], [expected, expected_weights], atol)
    np.testing.assert_array_equal(as_numpy(pooled)[2], 0.0)
    changed = inputs.copy()
    changed[0, :3] = 100.0  # masked steps have no influence
    pooled_again = layer(changed.astype(dtype), mask=mask)
    np.testing.assert_allclose(as_numpy(pooled_again), as_numpy(pooled), atol=atol)


def test_bad_calls_and_integer_inputs_read_as_numbers():
    pytest.raises(ValueError, AttentionPooling(4), np.ones((2, 5), "float32")).match("rank 3")
    inputs = np.ones((2, 5, 6), "float32")
    for call in (AttentionPooling(4), AttentionPooling(4).compute_output_spec):
        with pytest.raises(TypeError, match="`return_attention_scores` must be a bool, got 'x'"):
            call(inputs, return_attention_scores="x")
    layer, x = AttentionPooling(8), np.arange(24).reshape(2, 3, 4)
    pooled = layer(x.astype("int32"))  # not the weighted sum rounded to the integers: zeros
    np.testing.assert_array_equal(as_numpy(pooled), as_numpy(layer(x.astype("float32"))))
