"""Products over a tensor's last axis."""

from keras import ops


def dot_last_axis(x, vector):
    """``x`` ``[..., n]`` times ``vector`` ``[n]`` over the last axis: ``[...]``.

    Computed as one 2-D matrix product over every leading position. An einsum or a batched
    product over ``[B, 1, M, n]`` against the vector becomes, on TensorFlow's CPU, a oneDNN
    batched matmul that writes outside its buffers when B is 4 or more (a one-step call of an
    attention layer at batch 4 or more), after which the process aborts.

    Args:
        x: Tensor ``[..., n]``, n static.
        vector: Tensor ``[n]``.

    Returns:
        Tensor of the leading shape of ``x``.
    """
    products = ops.matmul(ops.reshape(x, (-1, x.shape[-1])), vector[:, None])
    return ops.reshape(products, ops.shape(x)[:-1])
