"""The compiled loss and metrics of a model over a global batch split among replicas.

Public Keras API only. `GlobalBatchLoss` rebuilds the compiled loss as two
`keras.losses.Loss` objects with ``reduction="sum"``: one sums the weighted per-element
losses of a replica's share (Keras merges the sample weights and the predictions' mask as it
does for the compiled loss), the other sums the same weights (the number of elements, or of
unmasked elements, or the sample weights, as the compiled reduction divides by). Each replica
divides its sum by the all-reduced global count, so the replicas' losses add up to the loss
of the global batch in one process, and their gradients add up to its gradient.
`GlobalBatchMetrics` holds fresh copies of the compiled metrics, whose states are sums: each
replica computes its share's states (`keras.metrics.Metric.stateless_update_state` from
zeros), the states are all-reduced, and the sums are added to the copies, which then report
the global batch.
"""

import keras
import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers.losses.sequence_crossentropy import SequenceCrossentropy

tf = require_tensorflow("tf_memlayers.training")

# The reductions of `keras.losses.Loss` that divide the summed losses by a count.
_DIVIDING = ("sum_over_batch_size", "mean", "mean_with_sample_weight")


def _binary_or_sparse(y_true, y_pred):
    """As Keras resolves ``"accuracy"`` and ``"crossentropy"``: by the shapes."""
    binary = y_pred.shape[-1] == 1
    sparse = len(y_true.shape) < len(y_pred.shape) or (
        y_true.shape[-1] == 1 and y_pred.shape[-1] > 1
    )
    return binary, sparse


class _Summed(keras.losses.Loss):
    """The sum of ``function``'s per-element values (or of ones in their place), weighted."""

    def __init__(self, function, ones=False, dtype=None):
        super().__init__(name="summed", reduction="sum", dtype=dtype)
        self.function = function
        self.ones = ones

    def call(self, y_true, y_pred):
        values = self.function(y_true, y_pred)
        return keras.ops.ones_like(values) if self.ones else values


class GlobalBatchLoss:
    """The compiled loss of ``model`` (one output) over a global batch.

    Args:
        model: A compiled `keras.Model` with one loss (a `keras.losses.Loss`, a loss function
            or its name). A loss whose reduction is ``"mean_with_sample_weight"`` counts
            sample weights broadcast to the per-element losses (as Keras does when they
            have the losses' shape).
        y_true, y_pred: Specs (or tensors) of the targets and predictions, for resolving
            ``"crossentropy"`` by the shapes as Keras does.
    """

    def __init__(self, model, y_true, y_pred):
        loss = model.loss
        if loss is None:
            raise ValueError("The model must be compiled with a loss; got loss=None.")
        if isinstance(loss, (list, tuple, dict)):
            raise NotImplementedError(
                f"The custom training loop supports one loss; got {type(loss).__name__} {loss!r}."
            )
        outputs = len(tf.nest.flatten(y_pred))
        if outputs != 1:
            raise NotImplementedError(
                f"The custom training loop supports models with one output; this one has "
                f"{outputs} (`fit` would sum the compiled loss over them)."
            )
        # `compile(loss_weights=...)` of the one output: a number, or one in a list or dict.
        weight = (model.get_compile_config() or {}).get("loss_weights")
        if isinstance(weight, dict):
            weight = list(weight.values())
        if isinstance(weight, (list, tuple)):
            weight = weight[0] if len(weight) == 1 else weight
        if weight is not None and not isinstance(weight, (int, float)):
            raise NotImplementedError(
                f"The custom training loop supports one loss weight; got loss_weights={weight!r}."
            )
        self.weight = 1.0 if weight is None else float(weight)
        if isinstance(loss, str) and loss.lower() in ("crossentropy", "ce"):
            binary, sparse = _binary_or_sparse(y_true, y_pred)
            loss = (
                "binary_crossentropy"
                if binary
                else "sparse_categorical_crossentropy"
                if sparse
                else "categorical_crossentropy"
            )
        if not isinstance(loss, keras.losses.Loss):
            loss = keras.losses.get(loss)
        if isinstance(loss, SequenceCrossentropy) and loss.loss_reduction == "sum_over_time":
            # Each sequence's weighted token losses summed over time, over the sequences.
            function, reduction, dtype = loss.call, "sum_over_sequences", loss.dtype
        elif isinstance(loss, keras.losses.Loss):
            function, reduction, dtype = loss.call, loss.reduction, loss.dtype
        else:
            function, reduction, dtype = loss, "sum_over_batch_size", None
        if reduction not in (*_DIVIDING, "sum", "sum_over_sequences"):
            raise NotImplementedError(
                "The custom training loop needs a loss reduced to a scalar: "
                f"'sum', 'sum_over_batch_size', 'mean' or 'mean_with_sample_weight'; got "
                f"reduction={reduction!r}."
            )
        self.reduction = reduction
        self.summed = _Summed(function, dtype=dtype)
        self.counted = _Summed(function, ones=True, dtype=dtype)
        self.model = model

    def sum_and_count(self, y_true, y_pred, sample_weight=None):
        """The weighted sum of the per-element losses and what the reduction divides it by
        (`None` for ``"sum"``), for this share of the batch."""
        total = self.summed(y_true, y_pred, sample_weight)
        if self.reduction == "sum":
            return total, None
        if self.reduction == "sum_over_sequences":
            return total, keras.ops.cast(keras.ops.shape(y_true)[0], total.dtype)
        weights = sample_weight if self.reduction == "mean_with_sample_weight" else None
        return total, self.counted(y_true, y_pred, weights)

    @staticmethod
    def regularization(losses, dtype):
        """The sum of ``losses`` (a model's added losses: regularizers), or `None`."""
        if not losses:
            return None
        return tf.add_n([tf.cast(tf.reduce_sum(loss), dtype) for loss in losses])

    def replica_loss(self, y_true, y_pred, sample_weight, context, added_losses):
        """This replica's part of the global batch's loss: the replicas' parts add up to it.

        ``context`` is the `tf.distribute.ReplicaContext`; the count is all-reduced over it,
        and ``added_losses`` (the model's ``losses`` after this replica's forward pass) are
        divided among the replicas.
        """
        total, count = self.sum_and_count(y_true, y_pred, sample_weight)
        loss = total
        if count is not None:
            count = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
            loss = tf.math.divide_no_nan(total, count)
        loss = loss * tf.cast(self.weight, loss.dtype)
        regularization = self.regularization(added_losses, loss.dtype)
        if regularization is not None:
            loss = loss + regularization / tf.cast(context.num_replicas_in_sync, loss.dtype)
        return loss

    def local_loss(self, y_true, y_pred, sample_weight=None):
        """The loss of a whole batch on this process (as `keras.Model.evaluate` logs it)."""
        total, count = self.sum_and_count(y_true, y_pred, sample_weight)
        loss = total if count is None else tf.math.divide_no_nan(total, count)
        loss = loss * tf.cast(self.weight, loss.dtype)
        regularization = self.regularization(self.model.losses, loss.dtype)
        return loss if regularization is None else loss + regularization


def _metric(identifier, y_true, y_pred):
    """A fresh metric for a compiled metric ``identifier``, named as Keras names it."""
    if isinstance(identifier, dict):
        if "class_name" not in identifier:
            raise NotImplementedError(
                "The custom training loop supports one output; got metrics per output "
                f"{sorted(identifier)}."
            )
    elif isinstance(identifier, keras.metrics.Metric):
        identifier = keras.metrics.serialize(identifier)  # a copy: fresh variables
    if isinstance(identifier, str) and identifier.lower() in ("accuracy", "acc"):
        binary, sparse = _binary_or_sparse(y_true, y_pred)
        kind = (
            keras.metrics.BinaryAccuracy
            if binary
            else keras.metrics.SparseCategoricalAccuracy
            if sparse
            else keras.metrics.CategoricalAccuracy
        )
        return kind(name=identifier)
    try:
        metric = keras.metrics.get(identifier)
    except (ValueError, TypeError) as error:
        raise ValueError(
            "The custom training loop makes its own copies of the compiled metrics from the "
            "model's compile config, which names this metric but cannot rebuild it: register "
            "a function or Metric class of your own with "
            f"keras.saving.register_keras_serializable ({error})"
        ) from error
    if not isinstance(metric, keras.metrics.Metric):
        name = identifier if isinstance(identifier, str) else metric.__name__
        metric = keras.metrics.MeanMetricWrapper(metric, name=name)
    elif isinstance(identifier, str):
        metric.name = identifier
    return metric


def _metric_list(entry, y_true, y_pred):
    if entry is None:
        return []
    if isinstance(entry, dict) and "class_name" not in entry:
        _metric(entry, y_true, y_pred)  # raises: metrics per output
    entries = entry if isinstance(entry, (list, tuple)) else [entry]
    return [_metric(e, y_true, y_pred) for e in entries]


class GlobalBatchMetrics:
    """Fresh copies of ``model``'s compiled metrics (plain variables, outside any strategy).

    Args:
        model: A compiled `keras.Model` with one output, compiled with ``metrics`` and/or
            ``weighted_metrics`` whose states are sums starting at zero (means,
            accuracies, `tf_memlayers.metrics.Perplexity`, ...).
        y_true, y_pred: Specs (or tensors) of the targets and predictions.

    Raises:
        NotImplementedError: For a metric whose states are not zero-initialized sums.
    """

    def __init__(self, model, y_true, y_pred):
        config = model.get_compile_config() if model.compiled else {}
        config = config or {}
        self.metrics = _metric_list(config.get("metrics"), y_true, y_pred)
        self.weighted = _metric_list(config.get("weighted_metrics"), y_true, y_pred)
        names = {m.name for m in self.metrics}
        for metric in self.weighted:
            if metric.name in names:
                metric.name = "weighted_" + metric.name  # as Keras renames duplicates
        for metric in self.metrics + self.weighted:
            for variable in metric.variables:
                initial = np.asarray(keras.ops.convert_to_numpy(variable.value))
                if variable.aggregation != "sum" or np.any(initial != 0):
                    raise NotImplementedError(
                        "The custom training loop sums metric states over the replicas; "
                        f"metric {metric.name!r} has state {variable.path!r} that is not a "
                        "zero-initialized sum."
                    )

    @property
    def variables(self):
        return [v for m in self.metrics + self.weighted for v in m.variables]

    def batch_states(self, y_true, y_pred, sample_weight=None):
        """The metrics' states for this batch alone (from zeros), in `variables` order."""
        states = []
        for metric, weights in [(m, None) for m in self.metrics] + [
            (m, sample_weight) for m in self.weighted
        ]:
            zeros = [tf.zeros(v.shape, v.dtype) for v in metric.variables]
            states += list(metric.stateless_update_state(zeros, y_true, y_pred, weights))
        return states

    def add(self, states):
        """Adds summed ``states`` (from `batch_states`, all-reduced) to the metrics."""
        for variable, state in zip(self.variables, states):
            variable.assign_add(tf.cast(state, variable.dtype))

    def update_state(self, y_true, y_pred, sample_weight=None):
        for metric in self.metrics:
            metric.update_state(y_true, y_pred)
        for metric in self.weighted:
            metric.update_state(y_true, y_pred, sample_weight)

    def reset_state(self):
        for metric in self.metrics + self.weighted:
            metric.reset_state()

    def result(self):
        return {m.name: m.result() for m in self.metrics + self.weighted}
