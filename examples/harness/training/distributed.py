"""Training under any `tf.distribute` strategy, several machines included.

`train` is the one entry point of the examples: it calls `keras.Model.fit` wherever `fit`
works, and runs `train_with_custom_loop` under `tf.distribute.MultiWorkerMirroredStrategy`,
where Keras 3's `fit` fails for every model (keras-team/keras#20585: "Attempt to convert a
value (PerReplica:...) with an unsupported type"). `fit_works_under` makes that choice; set
`KERAS_FIT_FIXED_IN` to the first Keras version with the fix and every example goes back to
`fit` with no other change.

The custom loop keeps `fit`'s contract for the callbacks (``on_train_begin``,
``on_epoch_begin``, ``on_train_batch_begin/end``, ``on_test_*`` during validation,
``on_epoch_end`` with ``loss``, the compiled metrics and their ``val_`` counterparts,
``on_train_end``; ``model.stop_training`` is obeyed), so `BestModelCheckpoint`, `RunBackup`,
`keras.callbacks.TensorBoard` and the learning-rate rules work unchanged. One training step
is `strategy.run` inside a `tf.function`: each replica divides its summed loss by the
all-reduced count of the global batch (elements, unmasked elements or sample weights, as the
compiled loss's reduction divides), the gradients are summed over all replicas, and the
optimizer clips and applies the sums as in one process; the logged loss and metrics cover the
global batch (the metrics' states are summed over the replicas). Public Keras API only. The
replicas therefore end with identical weights, equal (to float rounding) to one process
trained on the same global batches, and their logs agree.

Every worker runs the same callbacks, so that the collective operations they may involve
(saving a model reads every variable) match; `worker_directory` gives the chief the run
directory and every other worker a temporary copy of it, which it resumes from and which is
removed at the end.
"""

import contextlib
import os
import shutil
import tempfile

import keras
import tensorflow as tf

from examples.harness.training.custom_loop import evaluate_locally, train_with_custom_loop

KERAS_ISSUE = "keras-team/keras#20585"
# The first Keras version whose `fit` works under MultiWorkerMirroredStrategy (None: the issue
# is open, tested with Keras 3.15). `train` then calls `fit` everywhere.
KERAS_FIT_FIXED_IN = None


def _version(text):
    parts = []
    for piece in str(text).split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def is_multi_worker(strategy):
    """Whether ``strategy`` is a `tf.distribute.MultiWorkerMirroredStrategy`."""
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def fit_works_under(strategy, keras_version=None):
    """Whether `keras.Model.fit` can train under ``strategy`` (else `train` runs the custom
    loop).

    `False` for a `tf.distribute.MultiWorkerMirroredStrategy` while keras-team/keras#20585 is
    open (`KERAS_FIT_FIXED_IN` is `None` or newer than the installed Keras), `True` otherwise.

    Args:
        strategy: A `tf.distribute.Strategy`.
        keras_version: The Keras version to judge (default: the installed one).
    """
    if not is_multi_worker(strategy):
        return True
    if KERAS_FIT_FIXED_IN is None:
        return False
    return _version(keras_version or keras.__version__) >= _version(KERAS_FIT_FIXED_IN)


def worker_task(strategy=None):
    """``(task_type, task_id)`` of this process in its cluster (``(None, None)`` outside a
    multi-worker strategy)."""
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None) if is_multi_worker(strategy) else None
    if resolver is None or not resolver.task_type:
        return None, None
    return resolver.task_type, resolver.task_id


def is_chief(strategy=None):
    """Whether this process writes the run's files: `True` except on the workers of a
    multi-worker strategy other than the chief (the ``chief`` task, else ``worker`` 0)."""
    strategy = strategy or tf.distribute.get_strategy()
    if not is_multi_worker(strategy):
        return True
    return bool(strategy.extended.should_checkpoint)


def _copy_backup(workdir, target):
    """Copies what a resumed run reads from ``workdir`` (settings, backup) into ``target``."""
    from examples.harness.training.backup import BACKUP_DIR
    from examples.harness.training.resumable import SETTINGS_FILE

    settings = os.path.join(workdir, SETTINGS_FILE)
    if os.path.isfile(settings):
        shutil.copy2(settings, os.path.join(target, SETTINGS_FILE))
    backup = os.path.join(workdir, BACKUP_DIR)
    if os.path.isdir(backup):
        shutil.copytree(backup, os.path.join(target, BACKUP_DIR))


@contextlib.contextmanager
def worker_directory(workdir, strategy=None):
    """The run directory this process writes to: ``workdir`` on the chief, else a temporary
    one.

    A worker that is not the chief gets a fresh temporary directory holding a copy of the
    chief's settings and backup (when ``workdir`` is on storage it can read), so that it
    resumes the run where the chief does and runs the same callbacks; the directory is removed
    when the block ends. The chief alone writes checkpoints, logs and metrics in ``workdir``.

    Args:
        workdir: String or path, the run directory.
        strategy: The training strategy (default: the current one).

    Yields:
        The directory, a string.
    """
    workdir = str(workdir)
    if is_chief(strategy):
        yield workdir
        return
    task_type, task_id = worker_task(strategy)
    target = tempfile.mkdtemp(prefix=f"tf_memlayers-{task_type}-{task_id}-")
    try:
        _copy_backup(workdir, target)
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


def train(
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
    """Trains ``model`` like ``model.fit(x, ...)`` under the strategy the model was built in.

    `keras.Model.fit` (with ``shuffle=False``: the `tf.data` pipeline orders the data) where
    `fit_works_under` the strategy, else `train_with_custom_loop`, which keeps the callbacks'
    contract. ``x`` is a `tf.data.Dataset` of ``(inputs, targets)`` or ``(inputs, targets,
    sample_weights)`` batches of the global batch size.

    Returns:
        The `keras.callbacks.History` of the run.
    """
    strategy = strategy or model.distribute_strategy
    if fit_works_under(strategy):
        # The optimizer's variables made before `fit`, as the package's compile helpers make
        # them (tf_memlayers.models._compiling says why), for a model compiled otherwise.
        if not model.optimizer.built:
            with strategy.scope():
                model.optimizer.build(model.trainable_variables)
        return model.fit(
            x,
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps_per_epoch,
            validation_data=validation_data,
            callbacks=list(callbacks),
            shuffle=False,
            verbose=verbose,
        )
    return train_with_custom_loop(
        model,
        x,
        epochs=epochs,
        initial_epoch=initial_epoch,
        steps_per_epoch=steps_per_epoch,
        validation_data=validation_data,
        callbacks=callbacks,
        verbose=verbose,
        strategy=strategy,
    )


def evaluate(model, x, callbacks=(), verbose=0, strategy=None):
    """``model.evaluate(x, return_dict=True)`` where `fit_works_under` the strategy, else the
    same numbers computed by every worker on the whole of ``x`` (`evaluate_locally`)."""
    strategy = strategy or model.distribute_strategy
    if fit_works_under(strategy):
        return model.evaluate(x, callbacks=list(callbacks), verbose=verbose, return_dict=True)
    return evaluate_locally(model, x, callbacks=callbacks, verbose=verbose)
