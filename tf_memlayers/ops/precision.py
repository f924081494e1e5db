"""The precision attention weights are computed in under mixed precision."""


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
