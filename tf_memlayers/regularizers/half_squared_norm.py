"""`HalfSquaredNorm`: the L2 penalty ``coefficient * ||w||^2 / 2`` of TensorFlow's ``l2_loss``."""

import keras
from keras import ops

from tf_memlayers._validation import check_number


@keras.saving.register_keras_serializable(package="tf_memlayers")
class HalfSquaredNorm(keras.regularizers.Regularizer):
    """The penalty ``coefficient * ||w||^2 / 2`` of a weight (TensorFlow's ``l2_loss``
    convention, which Gaffney's reference code used for its weight decay), in float32.

    `tf_memlayers.models.HeapCacheModel` gives it to every trainable weight without a
    regularizer of its own, with its ``weight_decay`` as the coefficient.

    Args:
        coefficient: Non-negative number, the factor ``c`` of ``c * ||w||^2 / 2``.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers.regularizers import HalfSquaredNorm
    >>> float(HalfSquaredNorm(0.1)(np.array([3.0, 4.0])))  # 0.1 * 25 / 2
    1.25
    """

    def __init__(self, coefficient):
        self.coefficient = check_number("coefficient", coefficient, 0.0, owner="HalfSquaredNorm")

    def __call__(self, weight):
        weight = ops.cast(weight, "float32")
        return self.coefficient * 0.5 * ops.sum(ops.square(weight))

    def get_config(self):
        return {"coefficient": self.coefficient}
