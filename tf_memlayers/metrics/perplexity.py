"""Perplexity over a whole corpus split."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tf_memlayers")
class Perplexity(keras.metrics.Metric):
    """Perplexity: exp(weighted mean negative log-likelihood) of integer targets under logits.

    Unlike exp of the batch-averaged loss, it sums the log-likelihood and the weights over all
    batches, so over a whole split (with zero-weight padding) it is the corpus perplexity.

    Args:
        name: String, name of the metric instance. Default: `"perplexity"`.
        **kwargs: Other `keras.metrics.Metric` arguments, such as ``dtype`` (Keras's
            float type by default): the metric keeps its sums and returns its result in it,
            and computes the log-likelihoods in it or float32, whichever is wider.

    Standalone usage: ``update_state(y_true, y_pred, sample_weight=None)`` with integer
    targets ``y_true`` ``[...]``, logits ``y_pred`` ``[..., vocabulary]`` and optional
    weights ``sample_weight`` broadcastable to ``y_true`` (0 for padding); a mask the logits
    carry (an ``Embedding(mask_zero=True)``'s, passed on) counts as zero weights, as in
    Keras's losses. In ``compile``, pass it in ``weighted_metrics``: Keras hands the sample
    weights only to those, so under ``metrics`` the padding would count
    (`compile_language_model` does this).

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import Perplexity
    >>> metric = Perplexity()
    >>> metric.update_state(np.array([[0, 1]]), np.zeros((1, 2, 4), "float32"))
    >>> round(float(metric.result()), 4)
    4.0
    """

    def __init__(self, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        variable = dict(shape=(), initializer="zeros", dtype=self.dtype)
        self.total_nll = self.add_variable(**variable, name="total_nll")
        self.count = self.add_variable(**variable, name="count")
        # Keras's losses weigh each token by the sample weight and the mask the logits carry
        # (an `Embedding(mask_zero=True)`'s, passed on): the metric counts as they do. They
        # take the targets in their dtype: float32 at least, which holds every id exactly.
        dtype = "float64" if self.dtype == "float64" else "float32"
        self._nll = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=None, dtype=dtype, name="token_nll"
        )
        self._weights = _TokenWeights(name="token_weights", reduction=None, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        nll = self._nll(y_true, y_pred, sample_weight=sample_weight)
        weights = self._weights(y_true, y_pred, sample_weight=sample_weight)
        self.total_nll.assign_add(ops.cast(ops.sum(nll), self.total_nll.dtype))
        self.count.assign_add(ops.cast(ops.sum(weights), self.count.dtype))

    def result(self):
        # Cast: torch divides float64 variables into Keras's float type.
        return ops.cast(ops.exp(ops.divide_no_nan(self.total_nll, self.count)), self.dtype)

    def reset_state(self):
        self.total_nll.assign(0.0)
        self.count.assign(0.0)


class _TokenWeights(keras.losses.Loss):
    """Each target token's weight in a Keras loss: its sample weight times the logits' mask."""

    def call(self, y_true, y_pred):
        return ops.ones(ops.shape(y_true), self.dtype)
