"""Where Keras's cuDNN LSTM computes right: the ``use_cudnn`` of an LSTM beside the layers."""

import keras

from tf_memlayers._validation import check_bool

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def lstm_use_cudnn(compute_dtype=None, stateful=False):
    """The ``use_cudnn`` argument of a `keras.layers.LSTM` that computes in ``compute_dtype``.

    On a GPU, Keras's JAX backend runs `keras.layers.LSTM` through JAX's cuDNN LSTM when
    ``use_cudnn="auto"`` (the default), and that LSTM computes float32 only: in float64 its
    forward pass returns wrong values and its backward pass does not compile, and in float16
    or bfloat16 (the ``"mixed_float16"`` and ``"mixed_bfloat16"`` policies) it does not
    compile. On JAX an LSTM in any other dtype must therefore run Keras's own loop
    (``use_cudnn=False``). TensorFlow's cuDNN LSTM takes every float dtype, and so does
    PyTorch's (Keras's torch backend runs it in the kernel's dtype). On torch, Keras's fused
    LSTM reads a stateful layer's states without copying them, then assigns the new states in
    place, and the backward pass of `fit` fails ("modified by an inplace operation"); Keras's
    own loop copies them, so a stateful LSTM there takes ``use_cudnn=False``. The package's
    model builders pass this to their LSTMs; pass it to yours when you stack the layers on a
    `keras.layers.LSTM` under a mixed-precision policy, or a stateful one on torch.

    Args:
        compute_dtype: Optional string, the LSTM's compute dtype. Default: `None`, the compute
            dtype of the global dtype policy (`keras.config.dtype_policy`), which an LSTM built
            without a ``dtype`` argument takes.
        stateful: Bool, whether the LSTM is stateful. Default: `False`.

    Returns:
        `"auto"` (cuDNN where Keras can use it) or `False` (Keras's own loop).

    Raises:
        TypeError: ``compute_dtype`` is not a string (or None), or ``stateful`` not a bool.
        ValueError: ``compute_dtype`` is not a float dtype.

    Example:

    >>> import keras
    >>> from tf_memlayers import lstm_use_cudnn
    >>> lstm = keras.layers.LSTM(8, use_cudnn=lstm_use_cudnn())
    >>> lstm_use_cudnn("float32")
    'auto'
    """
    if compute_dtype is None:
        compute_dtype = keras.config.dtype_policy().compute_dtype
    if not isinstance(compute_dtype, str):
        raise TypeError(
            f"lstm_use_cudnn: `compute_dtype` must be a string naming a float dtype or None, "
            f"got {compute_dtype!r} of type {type(compute_dtype).__name__}."
        )
    if compute_dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"lstm_use_cudnn: `compute_dtype` must be one of {FLOAT_DTYPES} (an LSTM's compute "
            f"dtype), got {compute_dtype!r}."
        )
    stateful = check_bool("stateful", stateful, "lstm_use_cudnn")
    backend = keras.backend.backend()
    if (backend == "jax" and compute_dtype != "float32") or (backend == "torch" and stateful):
        return False
    return "auto"
