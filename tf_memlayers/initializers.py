"""Initializers: `ForgetGateBias` and `GRUGateBias` (the gate biases of the papers' recurrent
layers), and `for_one_weight` for layers that draw several weights from one initializer."""

import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import check_number

__all__ = ["ForgetGateBias", "GRUGateBias", "for_one_weight"]


def for_one_weight(initializer):
    """``initializer`` made ready to draw one more weight, so that no two weights start alike.

    Keras's random initializers are stateless: one instance returns the same values at every
    call with a shape (and the same leading values for other shapes). A layer that draws
    several weights from its one ``kernel_initializer`` clones it for each weight, as
    `keras.layers.MultiHeadAttention` does, and an unseeded clone draws a seed of its own. An
    initializer seeded by a `keras.random.SeedGenerator` draws new values at every call and is
    used as it is; one with an integer seed gives each weight the same values, as in Keras.

    Args:
        initializer: A `keras.initializers.Initializer`, or `None` (Keras's default, as a
            layer's ``kernel_initializer=None`` means: ``add_weight`` draws a float weight
            from a fresh ``"glorot_uniform"``).

    Returns:
        The initializer to pass to ``add_weight`` for one weight.

    Example:

    >>> import keras, numpy as np
    >>> from tf_memlayers.initializers import for_one_weight
    >>> glorot = keras.initializers.GlorotUniform()
    >>> a, b = (np.asarray(for_one_weight(glorot)((3, 3))) for _ in range(2))
    >>> bool(np.array_equal(a, b))
    False
    """
    seed = getattr(initializer, "seed", None)
    if initializer is None or isinstance(seed, keras.random.SeedGenerator):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())


@keras.saving.register_keras_serializable(package="tf_memlayers")
class ForgetGateBias(keras.initializers.Initializer):
    """LSTM bias initialiser: ``forget_bias`` for the forget gate, 0 for the other gates.

    Keras orders an LSTM's bias as [input, forget, cell, output] gates of ``units`` each.
    Give it to a Keras LSTM built with ``unit_forget_bias=False``: with Keras's default
    (`True`), the LSTM adds 1 to the forget gate's bias itself and calls its initializer on
    the other gates' parts, which this one would take for whole biases.

    Args:
        forget_bias: Float, the initial forget-gate bias. Default: `1.0` (Jozefowicz et al.
            2015).

    Call arguments:
        shape: Tuple ``(4 * units,)``, the shape of a Keras LSTM bias.
        dtype: Optional dtype of the tensor. Default: `None` (`keras.config.floatx()`).

    Example:

    >>> import keras
    >>> from tf_memlayers.initializers import ForgetGateBias
    >>> keras.ops.convert_to_numpy(ForgetGateBias(1.0)((8,))).tolist()
    [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, forget_bias=1.0):
        self.forget_bias = check_number("forget_bias", forget_bias, owner="ForgetGateBias")

    def __call__(self, shape, dtype=None):
        if len(shape) != 1 or shape[0] % 4:
            raise ValueError(
                f"ForgetGateBias: expected an LSTM bias shape (4*units,), got {shape} (an "
                "LSTM with unit_forget_bias=True calls it on its gates' parts: build it with "
                "unit_forget_bias=False)."
            )
        units = shape[0] // 4
        values = np.zeros(shape[0], dtype=np.float64)
        values[units : 2 * units] = self.forget_bias
        return ops.convert_to_tensor(values, dtype=dtype or keras.config.floatx())

    def get_config(self):
        return {"forget_bias": self.forget_bias}


@keras.saving.register_keras_serializable(package="tf_memlayers")
class GRUGateBias(keras.initializers.Initializer):
    """GRU bias initialiser: ``gate_bias`` for the update and reset gates, 0 for the candidate.

    TensorFlow 0.8's ``GRUCell``, the GRU of the original SNLI code (Weissenborn 2016), starts
    both gates' biases at 1.0 and the candidate's at 0, and applies the reset gate to the state
    before its product: a Keras GRU built with ``reset_after=False`` and this initializer
    computes that cell. Keras orders a GRU's bias as [update, reset, candidate] of ``units``
    each, shape ``(3 * units,)``; with ``reset_after=True`` the bias is ``(2, 3 * units)``, an
    input row and a recurrent row, and the gate bias goes to the input row.

    Args:
        gate_bias: Float, the initial bias of the update and reset gates. Default: `1.0` (the
            original code's).

    Call arguments:
        shape: Tuple ``(3 * units,)`` or ``(2, 3 * units)``, the shape of a Keras GRU bias.
        dtype: Optional dtype of the tensor. Default: `None` (`keras.config.floatx()`).

    Example:

    >>> import keras
    >>> from tf_memlayers.initializers import GRUGateBias
    >>> keras.ops.convert_to_numpy(GRUGateBias(1.0)((6,))).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    >>> gru = keras.layers.GRU(100, reset_after=False, bias_initializer=GRUGateBias())
    """

    def __init__(self, gate_bias=1.0):
        self.gate_bias = check_number("gate_bias", gate_bias, owner="GRUGateBias")

    def __call__(self, shape, dtype=None):
        shape = tuple(shape)
        if len(shape) not in (1, 2) or shape[-1] % 3 or (len(shape) == 2 and shape[0] != 2):
            raise ValueError(
                f"GRUGateBias: expected a GRU bias shape (3*units,) or, with reset_after=True, "
                f"(2, 3*units), got {shape}."
            )
        values = np.zeros(shape, dtype=np.float64)
        values.reshape(-1, shape[-1])[0, : 2 * shape[-1] // 3] = self.gate_bias
        return ops.convert_to_tensor(values, dtype=dtype or keras.config.floatx())

    def get_config(self):
        return {"gate_bias": self.gate_bias}
