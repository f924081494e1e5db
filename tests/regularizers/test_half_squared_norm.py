"""`HalfSquaredNorm`: ``coefficient * ||w||^2 / 2`` in float32, restored by its registered name."""

import keras
import numpy as np
import pytest

from tf_memlayers.regularizers import HalfSquaredNorm


def test_is_half_the_squared_norm_in_float32_restored_by_name_and_refuses_a_negative_one():
    weight = np.random.default_rng(0).normal(size=(3, 4))
    penalty = HalfSquaredNorm(1e-3)(weight.astype("float16"))
    assert keras.backend.standardize_dtype(penalty.dtype) == "float32"
    want = 1e-3 * 0.5 * np.sum(weight.astype("float16").astype("float64") ** 2)
    np.testing.assert_allclose(float(penalty), want, rtol=1e-6)
    pytest.raises(ValueError, HalfSquaredNorm, -1.0).match("HalfSquaredNorm: `coefficient` must be")
    config = keras.regularizers.serialize(HalfSquaredNorm(2))
    assert config["registered_name"] == "tf_memlayers>HalfSquaredNorm"
    restored = keras.regularizers.deserialize(config)
    assert type(restored) is HalfSquaredNorm and restored.coefficient == 2.0
    assert restored.get_config() == {"coefficient": 2.0}
