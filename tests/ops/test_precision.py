"""`softmax_dtype`: attention softmaxes run in float32 when the layer computes in float16 or
bfloat16, and in the layer's own compute dtype otherwise; the half-precision policies' compute
dtypes map to float32, and the reason (a softmax in float16 loses what float32 keeps) holds."""

import keras
import numpy as np
import pytest

from tf_memlayers.ops.precision import softmax_dtype


@pytest.mark.parametrize(
    "compute_dtype, expected",
    [("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32"),
     ("float64", "float64")],
)  # fmt: skip
def test_half_precision_softmaxes_run_in_float32_others_in_their_own_dtype(
    compute_dtype, expected
):
    assert softmax_dtype(compute_dtype) == expected


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16", "float16", "bfloat16"])
def test_every_half_precision_policy_gets_float32_weights(policy):
    # What the layers pass is their policy's compute dtype.
    assert softmax_dtype(keras.DTypePolicy(policy).compute_dtype) == "float32"


def test_float16_cannot_hold_what_a_float32_softmax_keeps():
    # Why the rule exists: exp(12) overflows float16 (max 65504), and a weight of 1e-8 is
    # below float16's smallest subnormal (6e-8); float32 keeps both.
    logits = np.array([12.0, -6.4])
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(logits.astype(np.float16))[0])
    weights = np.exp(logits - logits.max())
    weights /= weights.sum()
    assert weights.astype(softmax_dtype("float16"))[1] > 0
    assert weights.astype(np.float16)[1] == 0
