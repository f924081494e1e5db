"""`train`: `keras.Model.fit` under any `tf.distribute` strategy, several machines included.

Keras 3's ``fit`` fails under `tf.distribute.MultiWorkerMirroredStrategy` for every model
(keras-team/keras#20585: "Attempt to convert a value (PerReplica:...) with an unsupported
type"). `train` calls ``fit`` wherever `fit_works_under` the strategy, and there runs a custom
loop that keeps ``fit``'s contract. Set `KERAS_FIT_FIXED_IN` to the first Keras version with
the fix and `train` calls ``fit`` everywhere, with no other change.
"""

import keras

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import (
    check_callbacks,
    check_choice,
    check_int,
    check_optional_int,
    errors_named,
)
from tf_memlayers.training._custom_loop import build_from_batches, train_with_custom_loop
from tf_memlayers.training.is_chief import _is_multi_worker, check_strategy
from tf_memlayers.training.run_backup import RunBackup

tf = require_tensorflow("tf_memlayers.training")

KERAS_ISSUE = "keras-team/keras#20585"
# The first Keras version whose `fit` works under MultiWorkerMirroredStrategy (None: the issue
# is open, tested with Keras 3.15).
KERAS_FIT_FIXED_IN = None


def _version(text):
    parts = []
    for piece in str(text).split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def fit_works_under(strategy, keras_version=None):
    """Whether `keras.Model.fit` trains under ``strategy``: `False` for a
    `tf.distribute.MultiWorkerMirroredStrategy` while `KERAS_FIT_FIXED_IN` is `None` or newer
    than ``keras_version`` (default: the installed Keras), `True` otherwise."""
    if not _is_multi_worker(strategy):
        return True
    if KERAS_FIT_FIXED_IN is None:
        return False
    return _version(keras_version or keras.__version__) >= _version(KERAS_FIT_FIXED_IN)


def _check_model_and_data(model, x, strategy, verbose):
    """The checks `train` and `evaluate` share."""
    if not isinstance(model, keras.Model) or not model.compiled:
        error = ValueError if isinstance(model, keras.Model) else TypeError
        raise error(f"`model` must be a compiled keras.Model, got {model!r}.")
    check_strategy(strategy)
    check_choice("verbose", verbose, (0, 1, 2))
    if not isinstance(x, tf.data.Dataset):
        raise TypeError(
            f"`x` must be a tf.data.Dataset of batches (inputs, targets[, sample_weights]), "
            f"got {type(x).__name__}."
        )


@errors_named("train")
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
    """Trains ``model`` as ``model.fit(x, ...)`` would, under any `tf.distribute` strategy.

    Keras 3's ``fit`` fails under `tf.distribute.MultiWorkerMirroredStrategy`
    (keras-team/keras#20585); `train` is ``fit`` elsewhere (with ``shuffle=False``: the
    `tf.data` pipeline orders the data) and, under that strategy, a custom loop with
    ``fit``'s contract. Each step of the loop is ``strategy.run`` in a `tf.function` (not
    XLA-compiled) over a batch of ``strategy.experimental_distribute_dataset``: each replica
    divides its summed loss by the all-reduced count of the global batch (elements, unmasked
    elements or sample weights, as the compiled loss's reduction divides), the gradients are
    summed over the replicas, and the optimizer clips and applies the sums once per worker, as
    in one process. Fresh copies of the compiled metrics, their states summed over the
    replicas, report the global batch. The callbacks are called as ``fit`` calls them, with
    the same logs (``model.stop_training`` obeyed); validation runs whole on every worker.
    The workers thus end with identical weights, equal to float rounding to one process
    trained on the same global batches. The loop takes one loss and one output, metrics whose
    states are sums starting at zero (means, accuracies, `tf_memlayers.Perplexity`), and
    writes the caches of a model with a ``write_caches(x)`` method
    (`tf_memlayers.models.HeapCacheModel`) after each update, as its ``fit`` does. Dropout
    masks are drawn on each replica for its share of the batch.

    Args:
        model: A compiled `keras.Model`, built under ``strategy``.
        x: A `tf.data.Dataset` of global batches: ``(inputs, targets)`` or ``(inputs,
            targets, sample_weights)``.
        epochs: Integer >= 1, as for `keras.Model.fit`. Default: `1`.
        initial_epoch: Integer >= 0, the epoch to start at (`RunBackup.epoch` for a resumed
            run). Default: `0`.
        steps_per_epoch: Optional integer >= 1; with it the epochs continue one stream (an
            endless dataset), without it every epoch runs through ``x``. Default: `None`.
        validation_data: Optional `tf.data.Dataset`, evaluated after each epoch.
            Default: `None`.
        callbacks: Sequence of `keras.callbacks.Callback`, or `None`. Default: `()`.
        verbose: `0`, `1` or `2`, as for `keras.Model.fit`. Default: `1`.
        strategy: Optional `tf.distribute.Strategy`. Default: `None` (the model's).

    Returns:
        The `keras.callbacks.History` of the run.

    Raises:
        TypeError: If ``model`` is not a `keras.Model`, ``x`` or ``validation_data`` not a
            `tf.data.Dataset`, ``strategy`` not a `tf.distribute.Strategy`, or an epoch count
            not an integer.
        ValueError: If ``model`` is not compiled, an epoch count is out of range, ``verbose``
            not 0, 1 or 2, or (under the custom loop) the workers resume at different epochs.
        NotImplementedError: Under the custom loop, for several losses or outputs, a
            metric whose states are not sums, a model with its own ``train_step``,
            ``compute_loss`` or ``compute_metrics`` (and ``test_step`` with
            ``validation_data``: the loop computes the compiled loss itself), or
            `keras.callbacks.BackupAndRestore` (which resumes ``fit`` alone: use
            `RunBackup`).

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import tensorflow as tf
    >>> from tf_memlayers.training import train
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> data = tf.data.Dataset.from_tensor_slices((np.ones((8, 2)), np.ones((8, 1)))).batch(4)
    >>> history = train(model, data, epochs=2, verbose=0)
    >>> len(history.history["loss"])
    2
    """
    _check_model_and_data(model, x, strategy, verbose)
    if validation_data is not None and not isinstance(validation_data, tf.data.Dataset):
        raise TypeError(
            "`validation_data` must be a tf.data.Dataset of batches (inputs, targets[, "
            f"sample_weights]) or None, got {type(validation_data).__name__}."
        )
    epochs = check_int("epochs", epochs, 1)
    initial_epoch = check_int("initial_epoch", initial_epoch, 0)
    steps_per_epoch = check_optional_int("steps_per_epoch", steps_per_epoch, 1)
    callbacks = check_callbacks(callbacks)
    if any(isinstance(c, RunBackup) and c.stopped for c in callbacks):
        epochs = initial_epoch  # a callback ended the run: restored, it trains no more epochs
    strategy = strategy or model.distribute_strategy
    if not fit_works_under(strategy):
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
    # The optimizer's variables made before `fit`, under the strategy: Keras would otherwise
    # make them inside the first trace of the step and trace it twice (for the variables of a
    # model built first, where it has no `Input`).
    build_from_batches(model, x.element_spec, strategy)
    if not model.optimizer.built:
        with strategy.scope():
            model.optimizer.build(model.trainable_variables)
    return model.fit(
        x,
        epochs=epochs,
        initial_epoch=initial_epoch,
        steps_per_epoch=steps_per_epoch,
        validation_data=validation_data,
        callbacks=callbacks,
        shuffle=False,
        verbose=verbose,
    )
