"""A `tf.distribute` custom training loop that keeps `keras.Model.fit`'s contract.

`tf_memlayers.training.train` runs it where Keras 3's `fit` fails
(`tf.distribute.MultiWorkerMirroredStrategy`, keras-team/keras#20585). One step is
`strategy.run` inside a `tf.function` over a batch of `strategy.experimental_distribute_dataset`:
each replica divides its summed loss by the all-reduced count of the global batch
(``tf_memlayers.training._global_batch``), the gradients are all-reduced (summed: the gradient of
the global batch's loss), and the optimizer clips and applies the sums outside the replicas,
once per worker, as in one process. The logged loss and metrics cover the global batch (the
metrics' states are all-reduced). The callbacks are called as `fit` calls them, with the same
logs. Public Keras API only.
"""

import inspect
import warnings

import keras
import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers.models.heap_cache_model import HeapCacheModel
from tf_memlayers.training._global_batch import GlobalBatchLoss, GlobalBatchMetrics

tf = require_tensorflow("tf_memlayers.training")


def _specs(structure):
    return tf.nest.map_structure(lambda s: keras.KerasTensor(s.shape, s.dtype), structure)


def _refuse_overridden(model, method):
    """Raises if ``model``'s class overrides Keras's ``method`` (`train_step`, `test_step`,
    `compute_loss`, `compute_metrics`), which the loop does not call: it computes the compiled
    loss and metrics itself. `HeapCacheModel`'s ``train_step`` (Keras's, then the cache write)
    is the loop's own cache write."""
    owner = next(c for c in type(model).__mro__ if method in vars(c))
    if owner.__module__.split(".")[0] == "keras" or owner is HeapCacheModel:
        return
    raise NotImplementedError(
        f"The custom training loop (MultiWorkerMirroredStrategy) computes the compiled loss "
        f"and metrics itself and does not call {owner.__name__}.{method}; train this model "
        f"with `fit` under another strategy, or move what {method} adds into its layers "
        f"(`add_loss`) and compiled loss."
    )


def build_from_batches(model, element_spec, strategy):
    """Builds ``model`` if it is not built (a model without an `Input`) from the shapes of
    the batches ``element_spec`` describes, under ``strategy``'s scope, as `fit` builds it
    from its first batch."""
    if not model.built:
        x = keras.utils.unpack_x_y_sample_weight(_specs(element_spec))[0]
        with strategy.scope():
            model(x, training=False)


class _CustomLoop:
    """The training and evaluation steps of `train_with_custom_loop` for one model."""

    def __init__(self, model, strategy, element_spec):
        self.model = model
        self.strategy = strategy
        build_from_batches(model, element_spec, strategy)
        for method in ("compute_loss", "compute_metrics"):
            _refuse_overridden(model, method)
        x, y, _ = keras.utils.unpack_x_y_sample_weight(_specs(element_spec))
        # As a layer's call passes `training` only to a `call` that takes it.
        parameters = inspect.signature(model.call).parameters.values()
        takes_training = any(p.name == "training" or p.kind is p.VAR_KEYWORD for p in parameters)
        y_pred = model.compute_output_spec(x, **({"training": False} if takes_training else {}))
        self.loss = GlobalBatchLoss(model, y, y_pred)
        self.train_metrics = GlobalBatchMetrics(model, y, y_pred)
        self.test_metrics = GlobalBatchMetrics(model, y, y_pred)
        self.train_loss = keras.metrics.Mean(name="loss")
        self.test_loss = keras.metrics.Mean(name="loss")
        self.train_step = None
        self.test_step = None
        self.present = []

    def _replica_step(self, data):
        """One replica's share: its part of the global loss, the all-reduced gradients
        (summed: the gradient of the global batch's loss), the loss and metric states."""
        context = tf.distribute.get_replica_context()
        model = self.model
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            # This replica's added losses, read before the loss's collective: the replicas'
            # threads share the layers' lists, which the next replica's forward pass fills (a
            # forward pass with a collective of its own, a synchronized BatchNormalization,
            # interleaves them there, as under `fit`).
            added = list(model.losses)
            loss = self.loss.replica_loss(y, y_pred, sample_weight, context, added)
            scaled = model.optimizer.scale_loss(loss)  # mixed precision: the loss scale
        gradients = tape.gradient(scaled, variables)
        # Which variables have gradients (the same on every replica), known when tracing.
        present = [i for i, g in enumerate(gradients) if g is not None]
        self.present = present
        # Sparse gradients (`tf.IndexedSlices` of an embedding) stay sparse, as under `fit`.
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [gradients[i] for i in present])
        states = self.train_metrics.batch_states(y, y_pred, sample_weight)
        rows = tf.cast(tf.shape(tf.nest.flatten(x)[0])[0], loss.dtype)
        logged = context.all_reduce(tf.distribute.ReduceOp.SUM, [loss, rows, *states])
        return summed, logged

    def _write_caches(self, data):
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        self.model.write_caches(x)

    def _local(self, value):
        """This worker's first replica's copy (all-reduced values agree on every replica)."""
        return tf.nest.map_structure(
            lambda v: self.strategy.experimental_local_results(v)[0], value
        )

    def train_function(self):
        if self.train_step is None:
            model = self.model
            variables = model.trainable_variables
            write_caches = getattr(model, "write_caches", None)

            def step(data):
                outputs = self.strategy.run(self._replica_step, args=(data,))
                summed, logged = self._local(outputs[0]), self._local(outputs[1])
                # Outside the replicas: the optimizer clips and applies the summed gradients
                # once per worker, as it would in one process, to every local copy.
                model.optimizer.apply_gradients(
                    [(g, variables[i]) for g, i in zip(summed, self.present)]
                )
                if write_caches is not None:  # HeapCacheModel: the cache write after the update
                    self.strategy.run(self._write_caches, args=(data,))
                loss, rows, *states = logged
                self.train_loss.update_state(loss, sample_weight=rows)
                self.train_metrics.add(states)

            self.train_step = tf.function(step, reduce_retracing=True)
        return self.train_step

    def test_function(self):
        if self.test_step is None:

            def step(data):
                x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
                y_pred = self.model(x, training=False)
                loss = self.loss.local_loss(y, y_pred, sample_weight)
                rows = tf.shape(tf.nest.flatten(x)[0])[0]
                self.test_loss.update_state(loss, sample_weight=rows)
                self.test_metrics.update_state(y, y_pred, sample_weight)

            self.test_step = tf.function(step, reduce_retracing=True)
        return self.test_step

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


def _ran_out():
    warnings.warn(
        "Your input ran out of data; interrupting training. Make sure that your dataset can "
        "generate at least `steps_per_epoch * epochs` batches. You may need to use the "
        "`.repeat()` function when building your dataset.",
        stacklevel=3,
    )


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
            metrics whose states are sums, such as means and accuracies, and Keras's or
            registered with ``keras.saving.register_keras_serializable``; Keras's
            ``train_step`` and ``compute_loss``).
        x: A `tf.data.Dataset` of global batches: ``(inputs, targets)`` or ``(inputs,
            targets, sample_weights)``.
        epochs, initial_epoch, steps_per_epoch, validation_data, callbacks, verbose: as for
            `keras.Model.fit`. With ``steps_per_epoch`` the epochs continue one pass over
            ``x`` (a finite one starts again when it has ended, and one that runs out within
            an epoch ends the epoch, with Keras's warning, as in `fit`); without it every
            epoch runs through ``x``.
        strategy: The strategy (default: ``model.distribute_strategy``).

    Returns:
        The `keras.callbacks.History` of the run.
    """
    strategy = strategy or model.distribute_strategy
    for method in ("train_step", "test_step") if validation_data is not None else ("train_step",):
        _refuse_overridden(model, method)
    given = (
        callbacks.callbacks if isinstance(callbacks, keras.callbacks.CallbackList) else callbacks
    )
    if any(isinstance(c, keras.callbacks.BackupAndRestore) for c in given):
        raise NotImplementedError(
            "`callbacks`: keras.callbacks.BackupAndRestore resumes `fit` alone (the custom "
            "training loop under MultiWorkerMirroredStrategy cannot read the epoch it "
            "restores); use tf_memlayers.training.RunBackup, which restores the run in both."
        )
    loop = _CustomLoop(model, strategy, x.element_spec)
    with strategy.scope():
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    count = int(x.cardinality())
    count = count if count >= 0 else None
    if not isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks = keras.callbacks.CallbackList(
            list(callbacks),
            add_history=True,
            add_progbar=verbose != 0,
            model=model,
            verbose=verbose,
            epochs=epochs,
            # An epoch's steps, as `fit` gives the callbacks: the data's batches, if known.
            steps=count if steps_per_epoch is None else steps_per_epoch,
        )
    distributed = _distributed(strategy, x)
    # With `steps_per_epoch`, as `fit` does: the epochs continue one pass over the data, a
    # pass of known length starts again once it has ended, and one that runs out within an
    # epoch ends that epoch early, with Keras's warning.
    iterator, seen = None, 0
    step_function = loop.train_function()
    model.stop_training = False
    callbacks.on_train_begin()
    _check_workers_agree(strategy, initial_epoch)
    logs = {}
    for epoch in range(initial_epoch, epochs):
        loop.train_loss.reset_state()
        loop.train_metrics.reset_state()
        callbacks.on_epoch_begin(epoch)
        if steps_per_epoch is None:
            batches = iter(distributed)
        else:
            if iterator is None:
                iterator, seen = iter(distributed), 0
            batches = iterator
        step = 0
        while steps_per_epoch is None or step < steps_per_epoch:
            if steps_per_epoch and count is not None and seen >= count:
                _ran_out()
                break
            try:
                data = next(batches)
            except StopIteration:
                if steps_per_epoch:
                    _ran_out()
                    iterator = None
                break
            seen += 1
            callbacks.on_train_batch_begin(step)
            step_function(data)
            callbacks.on_train_batch_end(step, loop.logs(loop.train_loss, loop.train_metrics))
            step += 1
            if model.stop_training:
                break
        if count is not None and seen >= count:
            iterator = None
        logs = loop.logs(loop.train_loss, loop.train_metrics)
        if validation_data is not None:
            validation = loop.evaluate(validation_data, callbacks)
            logs.update({f"val_{name}": value for name, value in validation.items()})
        callbacks.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    if isinstance(model.optimizer, keras.optimizers.Optimizer) and epochs > 0:
        # As `fit` ends: an optimizer with ``use_ema`` writes the moving averages.
        model.optimizer.finalize_variable_values(model.trainable_weights)
    callbacks.on_train_end(logs)
    history = next((c for c in callbacks.callbacks if isinstance(c, keras.callbacks.History)), None)
    return history


def evaluate_locally(model, x, callbacks=(), verbose=0):
    """``model.evaluate(x, return_dict=True)`` computed on this process alone, without the
    model's strategy (each worker of a multi-worker run gets the same numbers)."""
    _refuse_overridden(model, "test_step")
    loop = _CustomLoop(model, model.distribute_strategy, x.element_spec)
    if not isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks = keras.callbacks.CallbackList(
            list(callbacks), add_progbar=verbose != 0, model=model, verbose=verbose
        )
    return loop.evaluate(x, callbacks)
