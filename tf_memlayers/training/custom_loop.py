"""A `tf.distribute` custom training loop that keeps `keras.Model.fit`'s contract.

`tf_memlayers.training.distributed.train` runs it where Keras 3's `fit` fails
(`tf.distribute.MultiWorkerMirroredStrategy`, keras-team/keras#20585). One step is
`strategy.run` inside a `tf.function` over a batch of `strategy.experimental_distribute_dataset`:
each replica scales its loss by the global batch (`tf.nn.compute_average_loss`), the
optimizer gets the gradients summed over all replicas and clips and applies them as in one
process, and the logged loss and metrics cover the global batch. The callbacks are called as
`fit` calls them, with the same logs.
"""

import copy

import keras
import numpy as np
import tensorflow as tf


def _fresh_metrics(model):
    """A `CompileMetrics` with fresh copies of ``model``'s compiled metrics (plain
    variables, outside any strategy)."""
    from keras.src.trainers.compile_utils import CompileMetrics

    config = model.get_compile_config() if model.compiled else {}

    def fresh(entry):
        if entry is None or isinstance(entry, str):
            return entry  # CompileMetrics resolves names such as "accuracy" by the shapes
        if isinstance(entry, (list, tuple)):
            return [fresh(e) for e in entry]
        if isinstance(entry, dict) and "class_name" not in entry:
            raise NotImplementedError(
                "the custom training loop supports one output; got metrics per output "
                f"{sorted(entry)}"
            )
        return keras.metrics.get(entry)

    return CompileMetrics(fresh(config.get("metrics")), fresh(config.get("weighted_metrics")))


def _loss_object(model):
    loss = model.loss
    if isinstance(loss, (list, tuple, dict)):
        raise NotImplementedError(
            f"the custom training loop supports one loss; got {type(loss).__name__} {loss!r}"
        )
    if loss is None:
        raise ValueError("the model must be compiled with a loss")
    if isinstance(loss, keras.losses.Loss):
        return loss
    from keras.src.losses.losses import LossFunctionWrapper

    return LossFunctionWrapper(keras.losses.get(loss))


def _unreduced(loss):
    """A copy of ``loss`` that returns the weighted per-element values."""
    values = copy.copy(loss)
    values.reduction = "none"
    return values


def _merged_weights(loss, values, y_pred, sample_weight):
    """The sample weights as Keras divides by them (mask merged, same rank as the values)."""
    from keras.src.losses.loss import apply_mask, squeeze_or_expand_to_same_rank

    mask = keras.backend.get_keras_mask(y_pred) if hasattr(keras.backend, "get_keras_mask") else (
        getattr(y_pred, "_keras_mask", None)
    )
    if sample_weight is None and mask is None:
        return None
    if sample_weight is not None:
        sample_weight = tf.cast(sample_weight, values.dtype)
    if mask is not None:
        mask = tf.cast(mask, values.dtype)
    weights = apply_mask(sample_weight, mask, dtype=values.dtype, reduction=loss.reduction)
    return squeeze_or_expand_to_same_rank(values, weights)[1]


def _additive(metrics):
    for variable in metrics.variables:
        if variable.aggregation != "sum" or np.any(np.asarray(variable.numpy()) != 0):
            raise NotImplementedError(
                f"the custom training loop sums metric states over the replicas; "
                f"{variable.path} is not a zero-initialized sum"
            )


class _CustomLoop:
    """The training and evaluation steps of `train_with_custom_loop` for one model."""

    def __init__(self, model, strategy):
        self.model = model
        self.strategy = strategy
        self.loss = _loss_object(model)
        self.values = _unreduced(self.loss)
        self.train_metrics = _fresh_metrics(model)
        self.test_metrics = _fresh_metrics(model)
        self.train_loss = keras.metrics.Mean(name="loss")
        self.test_loss = keras.metrics.Mean(name="loss")
        self._train_function = None
        self._test_function = None

    # Metrics: built on the first batch's structure, outside any tf.function.

    def _build_metrics(self, metrics, data):
        if metrics.built:
            return
        x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
        y_spec = tf.nest.map_structure(
            lambda t: keras.KerasTensor(t.shape, t.dtype), y
        )
        x_spec = tf.nest.map_structure(lambda t: keras.KerasTensor(t.shape, t.dtype), x)
        y_pred = self.model.compute_output_spec(x_spec, training=False)
        metrics.build(y_spec, y_pred)
        _additive(metrics)

    def build(self, dataset):
        spec = dataset.element_spec
        data = tf.nest.map_structure(
            lambda s: keras.KerasTensor(s.shape, s.dtype), spec
        )
        self._build_metrics(self.train_metrics, data)
        self._build_metrics(self.test_metrics, data)

    # The loss of one replica's share of the global batch.

    def _replica_loss(self, y, y_pred, sample_weight, context):
        values = self.values(y, y_pred, sample_weight)
        reduction = self.loss.reduction
        if reduction == "sum":
            loss = tf.reduce_sum(values)
        elif reduction == "mean_with_sample_weight" and sample_weight is not None:
            weights = _merged_weights(self.loss, values, y_pred, sample_weight)
            total = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.reduce_sum(weights))
            loss = tf.math.divide_no_nan(tf.reduce_sum(values), total)
        else:  # "sum_over_batch_size", "mean": over every element of the global batch
            count = tf.size(values, out_type=tf.int64)
            count = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
            loss = tf.nn.compute_average_loss(
                tf.reshape(values, [-1]), global_batch_size=count
            )
        if self.model.losses:
            regularization = tf.add_n([tf.cast(l, loss.dtype) for l in self.model.losses])
            loss = loss + tf.nn.scale_regularization_loss(regularization)
        return loss

    def _apply(self, gradients, variables, context):
        """Sums the replicas' gradients, then lets the optimizer clip and apply them.

        The optimizer sums the replicas' gradients after clipping each replica's share; here
        it gets the sums instead (its own summation skipped), so it clips and updates as in
        one process, sparse gradients (`tf.IndexedSlices`, gathered) included.
        """
        optimizer = self.model.optimizer
        inner = getattr(optimizer, "inner_optimizer", optimizer)  # under a LossScaleOptimizer
        pairs = [(g, v) for g, v in zip(gradients, variables) if g is not None]
        if not hasattr(inner, "_all_reduce_sum_gradients"):
            optimizer.apply_gradients(pairs)  # each replica's share clipped on its own
            return
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [g for g, _ in pairs])
        inner._all_reduce_sum_gradients = lambda grads_and_vars: grads_and_vars
        try:
            optimizer.apply_gradients([(g, v) for g, (_, v) in zip(summed, pairs)])
        finally:
            del inner._all_reduce_sum_gradients

    def _replica_step(self, data):
        context = tf.distribute.get_replica_context()
        model = self.model
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = self._replica_loss(y, y_pred, sample_weight, context)
            scaled = model.optimizer.scale_loss(loss)  # mixed precision: the loss scale
        gradients = tape.gradient(scaled, variables)
        self._apply(gradients, variables, context)
        write_caches = getattr(model, "write_caches", None)
        if write_caches is not None:  # HeapCacheModel: the cache write after the update
            write_caches(x)
        zeros = [tf.zeros_like(v) for v in self.train_metrics.variables]
        states = self.train_metrics.stateless_update_state(zeros, y, y_pred, sample_weight)
        rows = tf.cast(tf.shape(tf.nest.flatten(x)[0])[0], loss.dtype)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, [loss, rows, *states])

    def train_function(self):
        if self._train_function is None:

            def step(data):
                outputs = self.strategy.run(self._replica_step, args=(data,))
                loss, rows, *states = [
                    self.strategy.experimental_local_results(o)[0] for o in outputs
                ]
                self.train_loss.update_state(loss, sample_weight=rows)
                for variable, state in zip(self.train_metrics.variables, states):
                    variable.assign_add(tf.cast(state, variable.dtype))

            self._train_function = tf.function(step, reduce_retracing=True)
        return self._train_function

    def test_function(self):
        if self._test_function is None:

            def step(data):
                x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
                y_pred = self.model(x, training=False)
                loss = self.loss(y, y_pred, sample_weight)
                if self.model.losses:
                    loss = loss + tf.add_n([tf.cast(l, loss.dtype) for l in self.model.losses])
                rows = tf.shape(tf.nest.flatten(x)[0])[0]
                self.test_loss.update_state(loss, sample_weight=rows)
                self.test_metrics.update_state(y, y_pred, sample_weight)

            self._test_function = tf.function(step, reduce_retracing=True)
        return self._test_function

    @staticmethod
    def logs(loss, metrics):
        logs = {"loss": float(loss.result())}
        logs.update({k: float(v) for k, v in metrics.result().items()})
        return logs

    def evaluate(self, dataset, callbacks):
        """The validation logs of ``dataset``, computed whole on this worker."""
        self.test_loss.reset_state()
        self.test_metrics.reset_state()
        callbacks.on_test_begin()
        logs = {}
        for step, data in enumerate(dataset):
            callbacks.on_test_batch_begin(step)
            self.test_function()(data)
            logs = self.logs(self.test_loss, self.test_metrics)
            callbacks.on_test_batch_end(step, logs)
        logs = self.logs(self.test_loss, self.test_metrics)
        callbacks.on_test_end(logs)
        return logs


def _distributed(strategy, dataset):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return strategy.experimental_distribute_dataset(dataset.with_options(options))


def _check_workers_agree(strategy, initial_epoch):
    """Raises unless every worker resumes at the same epoch."""
    if strategy.num_replicas_in_sync == 1:
        return

    def gather():
        context = tf.distribute.get_replica_context()
        return context.all_gather(tf.constant([initial_epoch], tf.int64), axis=0)

    epochs = tf.function(lambda: strategy.run(gather))()
    epochs = np.asarray(strategy.experimental_local_results(epochs)[0])
    low, high = int(epochs.min()), int(epochs.max())
    if low != high:
        raise ValueError(
            f"The workers resume at different epochs ({low} to {high}): the run directory "
            "must be on storage every worker reads (the chief's backup is where each worker "
            "resumes from)."
        )


def train_with_custom_loop(
    model,
    x,
    epochs=1,
    initial_epoch=0,
    steps_per_epoch=None,
    validation_data=None,
    callbacks=(),
    verbose=1,
    strategy=None,
):
    """Trains ``model`` as `keras.Model.fit` would, with a `tf.distribute` custom loop.

    Each step runs `strategy.run` in a `tf.function` over a batch of
    `strategy.experimental_distribute_dataset` (every worker takes its replicas' shares of each
    global batch). Validation runs whole on every worker, so every worker logs the same
    numbers. Models with a ``write_caches(x)`` method (`tf_memlayers.models.HeapCacheModel`)
    write their caches after each update, as their `fit` does.

    Args:
        model: A compiled `keras.Model` built under ``strategy`` (one loss, one output;
            metrics whose states are sums, such as means and accuracies).
        x: A `tf.data.Dataset` of global batches: ``(inputs, targets)`` or ``(inputs,
            targets, sample_weights)``.
        epochs, initial_epoch, steps_per_epoch, validation_data, callbacks, verbose: as for
            `keras.Model.fit`. With ``steps_per_epoch`` the epochs continue one stream (an
            endless dataset); without it every epoch runs through ``x``.
        strategy: The strategy (default: ``model.distribute_strategy``).

    Returns:
        The `keras.callbacks.History` of the run.
    """
    strategy = strategy or model.distribute_strategy
    loop = _CustomLoop(model, strategy)
    loop.build(x)
    with strategy.scope():
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    if not isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks = keras.callbacks.CallbackList(
            list(callbacks),
            add_history=True,
            add_progbar=verbose != 0,
            model=model,
            verbose=verbose,
            epochs=epochs,
            steps=steps_per_epoch,
        )
    distributed = _distributed(strategy, x)
    iterator = iter(distributed) if steps_per_epoch else None
    step_function = loop.train_function()
    model.stop_training = False
    callbacks.on_train_begin()
    _check_workers_agree(strategy, initial_epoch)
    logs = {}
    for epoch in range(initial_epoch, epochs):
        loop.train_loss.reset_state()
        loop.train_metrics.reset_state()
        callbacks.on_epoch_begin(epoch)
        batches = iterator if steps_per_epoch else iter(distributed)
        step = 0
        while steps_per_epoch is None or step < steps_per_epoch:
            try:
                data = next(batches)
            except StopIteration:
                break
            callbacks.on_train_batch_begin(step)
            step_function(data)
            callbacks.on_train_batch_end(step, loop.logs(loop.train_loss, loop.train_metrics))
            step += 1
            if model.stop_training:
                break
        logs = loop.logs(loop.train_loss, loop.train_metrics)
        if validation_data is not None:
            validation = loop.evaluate(validation_data, callbacks)
            logs.update({f"val_{name}": value for name, value in validation.items()})
        callbacks.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    callbacks.on_train_end(logs)
    history = next(
        (c for c in callbacks.callbacks if isinstance(c, keras.callbacks.History)), None
    )
    return history


def evaluate_locally(model, x, callbacks=(), verbose=0):
    """``model.evaluate(x, return_dict=True)`` computed on this process alone, without the
    model's strategy (each worker of a multi-worker run gets the same numbers)."""
    loop = _CustomLoop(model, model.distribute_strategy)
    loop._build_metrics(
        loop.test_metrics,
        tf.nest.map_structure(lambda s: keras.KerasTensor(s.shape, s.dtype), x.element_spec),
    )
    if not isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks = keras.callbacks.CallbackList(
            list(callbacks), add_progbar=verbose != 0, model=model, verbose=verbose
        )
    return loop.evaluate(x, callbacks)
