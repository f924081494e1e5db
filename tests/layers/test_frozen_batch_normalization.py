"""`FrozenBatchNormalization`: always in inference mode, its scale and offset trained."""

import keras
import numpy as np

from tests.layer_test_case import LayerTestCase, masking_checks
from tf_memlayers import FrozenBatchNormalization


class FrozenBatchNormalizationTest(LayerTestCase):
    layer_cls = FrozenBatchNormalization

    def test_layer_behaviors(self):
        checks = masking_checks((2, 3, 4), 2, expected_num_non_trainable_weights=2)
        self.run_layer_test(FrozenBatchNormalization, {"epsilon": 1e-3}, **checks)

    def test_journey(self, tmp_path):
        build = lambda e: FrozenBatchNormalization()(keras.layers.GRU(8)(e))  # noqa: E731
        self.run_journey_test("pooled", build, tmp_path)

    def test_config_output_spec_and_empty_input(self):
        self.run_config_test(FrozenBatchNormalization, axis=1, epsilon=1e-2, center=False)
        self.run_output_spec_test(lambda dtype: FrozenBatchNormalization(dtype=dtype), (2, 5, 4))
        # Its output is the input, normalized: no memory.
        self.run_empty_input_test(FrozenBatchNormalization, last_output_is_memory=False)


def test_is_the_fixed_affine_map_and_trains_only_its_scale_and_offset():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(16, 5)).astype("float32")
    y, norm = rng.normal(size=(16, 5)).astype("float32"), FrozenBatchNormalization(epsilon=1e-3)
    model = keras.Sequential([keras.Input((5,)), norm])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(x, y, epochs=2, verbose=0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(norm.moving_mean), 0.0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(norm.moving_variance), 1.0)
    gamma, beta = (keras.ops.convert_to_numpy(w) for w in (norm.gamma, norm.beta))
    assert np.abs(gamma - 1.0).max() > 1e-3 and np.abs(beta).max() > 1e-3
    want = gamma * x / np.sqrt(1.0 + 1e-3) + beta
    for training in (True, False, None):
        got = keras.ops.convert_to_numpy(norm(x, training=training))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Not vacuous: Keras's layer in training normalizes by the batch's own statistics.
    keras_norm = keras.layers.BatchNormalization(epsilon=1e-3)
    assert np.abs(keras.ops.convert_to_numpy(keras_norm(x, training=True)) - x).max() > 1.0
