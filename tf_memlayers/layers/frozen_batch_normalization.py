"""`FrozenBatchNormalization`: batch normalization that always runs in inference mode."""

import keras


@keras.saving.register_keras_serializable(package="tf_memlayers")
class FrozenBatchNormalization(keras.layers.BatchNormalization):
    """Batch normalization that always runs in inference mode, as in the reference code.

    The reference code called ``tf.layers.batch_normalization`` with ``training`` left at
    False, so the moving mean 0 and variance 1 are never updated and the layer is the fixed
    affine ``gamma * x / sqrt(1 + epsilon) + beta`` with trainable ``gamma`` and ``beta``.
    `tf_memlayers.models.build_fill_last_word_model` puts it on the state and on the logits
    with ``faithful_to_code=True``.

    Args:
        **kwargs: The arguments of `keras.layers.BatchNormalization` (``axis``, ``epsilon``,
            the initializers, ``name``, ``dtype``, ...); ``momentum`` has no effect, since
            the moving statistics never move.

    Call arguments:
        inputs: Tensor of any rank, normalized along ``axis``.
        training: Ignored: the layer always runs in inference mode. Default: `None`.
        mask: Passed to `keras.layers.BatchNormalization`. Default: `None`.

    Returns:
        A tensor of the shape of ``inputs``.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import FrozenBatchNormalization
    >>> norm = FrozenBatchNormalization(epsilon=1e-3)
    >>> float(norm(np.full((2, 3), 2.0, "float32"), training=True)[0, 0])  # 2 / sqrt(1.001)
    1.999000...
    """

    def call(self, inputs, training=None, mask=None):
        return super().call(inputs, training=False, mask=mask)
