"""Cross-entropy of token sequences, with the two reductions language models use."""

import warnings

import keras
from keras import ops

from tf_memlayers._validation import check_choice, renamed_arguments

#: The values of `SequenceCrossentropy`'s ``loss_reduction``: the mean over every
#: target token, or the sum over the time steps of the per-step mean over the batch.
LOSS_REDUCTIONS = ("token_mean", "sum_over_time")


@keras.saving.register_keras_serializable(package="tf_memlayers")
class SequenceCrossentropy(keras.losses.Loss):
    """Cross-entropy of integer targets ``[batch, time]`` under logits, two reductions.

    * ``"token_mean"``: the weighted mean negative log-likelihood per target token (padding,
      with weight 0, does not count).
    * ``"sum_over_time"``: the sum over the time steps of the per-step mean over the batch
      (weights applied), the cost of Zaremba et al. (2014) and of TensorFlow's PTB tutorial:
      each sequence's weighted token losses summed over time, averaged over the sequences.
      Without padding it is ``sequence_length`` times the token mean, so with plain SGD its
      step is ``sequence_length`` times larger, and the gradient-norm clipping sees the
      scaled gradient.

    A mask the logits carry (an ``Embedding(mask_zero=True)``'s, passed on) leaves the
    padding out of both, as Keras's losses do: it counts as zero sample weights.

    Args:
        loss_reduction: String, one of `LOSS_REDUCTIONS`: `"token_mean"` or
            `"sum_over_time"` (the name `compile_language_model` gives it too). Default:
            `"token_mean"`.
        name: String, name of the loss instance. Default: `"sequence_crossentropy"`.
        **kwargs: Other `keras.losses.Loss` arguments, such as ``dtype`` (``reduction`` is
            the one ``loss_reduction`` sets: another is a `ValueError`). ``reduction_mode``,
            the name of ``loss_reduction`` in 0.2, is taken with a `DeprecationWarning`.

    Call arguments:
        y_true: Integer targets ``[batch, time]``.
        y_pred: Logits ``[batch, time, vocabulary]``.
        sample_weight: Optional weights ``[batch, time]`` (0 for padding). Default: `None`.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import SequenceCrossentropy
    >>> targets, logits = np.zeros((2, 5), "int32"), np.zeros((2, 5, 4), "float32")
    >>> mean = SequenceCrossentropy()(targets, logits)
    >>> summed = SequenceCrossentropy("sum_over_time")(targets, logits)
    >>> round(float(summed / mean), 4)
    5.0
    """

    @renamed_arguments("SequenceCrossentropy", "0.4", reduction_mode="loss_reduction")
    def __init__(self, loss_reduction="token_mean", name="sequence_crossentropy", **kwargs):
        check_choice("loss_reduction", loss_reduction, LOSS_REDUCTIONS, "SequenceCrossentropy")
        reduction = (
            "mean_with_sample_weight" if loss_reduction == "token_mean" else "sum_over_batch_size"
        )
        given = kwargs.pop("reduction", reduction)
        if given != reduction:
            modes = ", ".join(map(repr, LOSS_REDUCTIONS))
            raise ValueError(
                f"SequenceCrossentropy: `reduction` is set by `loss_reduction` "
                f"({loss_reduction!r}: Keras's {reduction!r}); got reduction={given!r}. Choose "
                f"the reduction with loss_reduction, one of {modes}."
            )
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.loss_reduction = loss_reduction

    def __getattr__(self, name):
        # Not a property: Keras's saving reads every attribute `dir` lists, which would warn
        # whoever saves a model compiled with this loss.
        if name == "reduction_mode":
            warnings.warn(
                "SequenceCrossentropy: `reduction_mode` is deprecated and will be removed in "
                "0.4; read `loss_reduction`.",
                DeprecationWarning,
                stacklevel=2,
            )
            return self.loss_reduction
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self.loss_reduction == "token_mean":
            return super().__call__(y_true, y_pred, sample_weight)
        # Keras scales a mask's weights up to the count of unmasked elements before a
        # "sum_over_batch_size" mean; the sum over time takes the mask as 0/1 weights: the
        # weighted token losses (reduction None: masked, unscaled), summed over time, then
        # their mean over the sequences, divided among a strategy's replicas as Keras does.
        tokens = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=None, dtype=self.dtype
        )(y_true, y_pred, sample_weight)
        sequences = ops.sum(tokens, axis=-1)
        return _MeanOverBatch(self.dtype)(sequences, sequences)

    def call(self, y_true, y_pred):
        """The negative log-likelihood of each target token, ``[batch, time]``."""
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)

    @classmethod
    def from_config(cls, config):
        # A config of Keras's own form also holds the `reduction` that `loss_reduction` sets;
        # one saved by 0.1 or 0.2 names `loss_reduction` `reduction_mode` (loaded silently:
        # whoever loads a file cannot rename what is in it).
        config = {k: v for k, v in config.items() if k != "reduction"}
        if "reduction_mode" in config:
            config["loss_reduction"] = config.pop("reduction_mode")
        return cls(**config)

    def get_config(self):
        return {"loss_reduction": self.loss_reduction, "name": self.name, "dtype": self.dtype}


class _MeanOverBatch(keras.losses.Loss):
    """The mean of per-example values over the batch (``y_pred``), as Keras reduces."""

    def __init__(self, dtype):
        super().__init__(name="mean_over_batch", dtype=dtype)

    def call(self, y_true, y_pred):
        return y_pred
