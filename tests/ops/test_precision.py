"""`softmax_dtype`: float32 for a half-precision layer's softmax, else the compute dtype."""

import pytest

from tf_memlayers.ops.precision import softmax_dtype


@pytest.mark.parametrize(
    "compute_dtype, expected",
    [("float16", "float32"), ("bfloat16", "float32"), ("float32",) * 2, ("float64",) * 2],
)
def test_half_precision_softmaxes_run_in_float32_others_in_their_own_dtype(compute_dtype, expected):
    assert softmax_dtype(compute_dtype) == expected
