"""`tf_memlayers.ops.products` against NumPy."""

import numpy as np
import pytest
from keras import ops

from tests.support import assert_close, gradients
from tf_memlayers.ops.products import dot_last_axis


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5), (4, 1, 3, 5), (0, 5)])
def test_dot_last_axis_is_the_product_over_the_last_axis(float64_policy, shape):
    rng = np.random.default_rng(len(shape))
    x, vector = rng.normal(size=shape), rng.normal(size=shape[-1])
    got = ops.convert_to_numpy(dot_last_axis(*map(ops.convert_to_tensor, (x, vector))))
    assert got.shape == shape[:-1]
    np.testing.assert_allclose(got, x @ vector, atol=1e-12, rtol=0)


def test_dot_last_axis_gradients(float64_policy):
    rng = np.random.default_rng(0)
    x, vector = rng.normal(size=(4, 1, 3, 5)), rng.normal(size=5)
    _, _, grads = gradients(lambda x, v: ops.sum(ops.sin(dot_last_axis(x, v))), inputs=[x, vector])
    outer = np.cos(x @ vector)
    assert_close(grads, [outer[..., None] * vector, np.tensordot(outer, x, axes=3)], 1e-12)
