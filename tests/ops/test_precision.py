"""`softmax_dtype`: attention softmaxes run in float32 when the layer computes in float16 or
bfloat16 (where exp overflows and small weights vanish), and in the layer's own compute dtype
otherwise (the layers' half-precision results are tested with each layer)."""

import pytest

from tf_memlayers.ops.precision import softmax_dtype


@pytest.mark.parametrize(
    "compute_dtype, expected",
    [
        ("float16", "float32"),
        ("bfloat16", "float32"),
        ("float32", "float32"),
        ("float64", "float64"),
    ],
)
def test_half_precision_softmaxes_run_in_float32_others_in_their_own_dtype(compute_dtype, expected):
    assert softmax_dtype(compute_dtype) == expected
