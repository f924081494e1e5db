"""Dropout whose TensorFlow masks name their random algorithm, so that XLA compiles them well."""

import numbers

import keras

from tf_memlayers._validation import check_optional_int


@keras.saving.register_keras_serializable(package="tf_memlayers")
class PhiloxDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` whose masks, on TensorFlow, come from the Philox generator named
    explicitly.

    `keras.layers.Dropout` on TensorFlow draws its masks with
    ``tf.nn.experimental.stateless_dropout`` and the default algorithm (``"auto_select"``).
    Compiled with XLA on CPU (``jit_compile=True``, the default of `Model.compile` there),
    that generator is slow: in the language models of `tf_memlayers.models` a dropout of 0.4
    made a training step about 1.7x slower, the masks taking about as long as the rest of the
    step. With the algorithm named (``rng_alg="philox"``, the one ``"auto_select"`` picks on
    CPU) the same masks cost nearly nothing (``python -m benchmarks.speed --tables
    lm_equal_parameters`` times the language models with a dropout of 0.4).

    Everything else is `keras.layers.Dropout`: the same arguments, the same scaling (kept
    values are divided by ``1 - rate``), masks from the layer's own seed generator, nothing
    dropped at inference. Run eagerly or in a graph without XLA on CPU, it drops exactly the
    units `keras.layers.Dropout` with the same ``seed`` drops. On the other backends it is
    `keras.layers.Dropout` (JAX's generator compiles well). Keras's own tests of
    `keras.layers.Dropout` (``dropout_test.py`` of ``keras/src/layers/regularization/``) all
    pass with it in its place, as the package's tests check on each backend.

    Args:
        rate: Float in [0, 1], the fraction of the input units to drop.
        noise_shape: Optional tuple of integers (or `None` for a dimension of the input), the
            shape of the mask broadcast over the input: ``(batch, 1, features)`` drops the
            same features at every time step. Default: `None` (one mask value per unit).
        seed: Optional integer, the seed of the masks. Default: `None`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A tensor of any rank.
        training: Boolean, whether to drop (training) or pass the input through unchanged
            (inference). Default: `False`.

    Returns:
        A tensor of the input's shape and dtype.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import PhiloxDropout
    >>> dropout = PhiloxDropout(0.5, seed=1)
    >>> outputs = np.asarray(dropout(np.ones((2, 1000), "float32"), training=True))
    >>> sorted(set(outputs.ravel().tolist()))
    [0.0, 2.0]
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        # The types here; the range of `rate` is `keras.layers.Dropout`'s own check (and
        # message, which Keras's tests of the layer expect).
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
            raise TypeError(
                f"PhiloxDropout: `rate` must be a number in [0, 1], got {rate!r} of type "
                f"{type(rate).__name__}."
            )
        seed = check_optional_int("seed", seed, 0, type(self).__name__)  # JAX's: unsigned
        super().__init__(rate, noise_shape=noise_shape, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if not training or self.rate in (0, 1) or keras.backend.backend() != "tensorflow":
            return super().call(inputs, training=training)
        import tensorflow as tf

        # The seed as Keras's TensorFlow backend passes it to the stateless ops: int32 (which
        # XLA needs), reduced the same way, so that the masks are Keras's own.
        seed = self.seed_generator.next()
        if seed.dtype != tf.int32:
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        noise_shape = None
        if self.noise_shape is not None:
            shape = tf.shape(inputs)
            noise_shape = tf.stack(
                [shape[i] if size is None else size for i, size in enumerate(self.noise_shape)]
            )
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, rng_alg="philox", noise_shape=noise_shape
        )
