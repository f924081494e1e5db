"""The precision attention weights are computed in under mixed precision, and the floating
point inputs of layers given integers."""

import keras
from keras import ops


def softmax_dtype(compute_dtype):
    """The dtype attention softmaxes run in: float32 under half precision, else the input's.

    Args:
        compute_dtype: String, the compute dtype of the calling layer (e.g. `"float32"`, or
            `"float16"` under a `"mixed_float16"` policy).

    Returns:
        String, `"float32"` when ``compute_dtype`` is `"float16"` or `"bfloat16"`, else
        ``compute_dtype`` unchanged.
    """
    return "float32" if compute_dtype in ("float16", "bfloat16") else compute_dtype


def floating(inputs, compute_dtype):
    """``inputs`` as a tensor, cast to ``compute_dtype`` if not floating point: a layer reads
    integers as numbers, as `keras.layers.Dense` does, rather than rounding its results to
    them.

    Args:
        inputs: Tensor or array.
        compute_dtype: String, the calling layer's compute dtype.

    Returns:
        A tensor: ``inputs`` (floating point ones unchanged) or their cast.
    """
    inputs = ops.convert_to_tensor(inputs)
    if keras.backend.is_float_dtype(inputs.dtype):
        return inputs
    return ops.cast(inputs, compute_dtype)
