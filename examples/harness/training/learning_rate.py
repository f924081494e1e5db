"""Learning-rate rules: Zaremba et al.'s per-epoch decay and the halving on a plateau."""

import keras

from examples.harness.checks import check_optional_int
from examples.harness.training.run_files import read_json, write_json


def epoch_learning_rate(epoch, learning_rate, lr_decay=1.0, full_rate_epochs=None):
    """The learning rate of epoch ``epoch`` (counted from 0) under Zaremba's schedule.

    ``learning_rate * lr_decay ** max(epoch + 1 - full_rate_epochs, 0)``: the first
    ``full_rate_epochs`` epochs at the full rate, then multiplied by ``lr_decay`` each epoch
    (TensorFlow's PTB tutorial, ``lr_decay ** max(i + 1 - max_epoch, 0)``). With
    ``full_rate_epochs=None`` the rate stays constant.

    Args:
        epoch: Non-negative integer, the epoch, counted from 0.
        learning_rate: Float, the initial (full) learning rate.
        lr_decay: Float, the factor applied per epoch after the full-rate epochs.
            Default: `1.0` (no decay).
        full_rate_epochs: Optional non-negative integer, the number of epochs at the full
            rate. Default: `None` (a constant rate).

    Returns:
        Float, the learning rate of ``epoch``.

    Example:

    >>> [epoch_learning_rate(e, 1.0, 0.5, 4) for e in range(7)]
    [1.0, 1.0, 1.0, 1.0, 0.5, 0.25, 0.125]
    """
    if full_rate_epochs is None:
        return float(learning_rate)
    return float(learning_rate * lr_decay ** max(epoch + 1 - full_rate_epochs, 0))


class EpochLearningRate(keras.callbacks.LearningRateScheduler):
    """Sets the optimizer's learning rate at the start of each epoch (`epoch_learning_rate`)
    and logs it as ``learning_rate`` (a TensorBoard scalar). It depends only on the epoch
    index, so a resumed run continues the schedule where it stopped.

    Args:
        learning_rate: Float, the initial (full) learning rate.
        lr_decay: Float in (0, 1], the factor applied per epoch after the full-rate epochs.
            Default: `1.0` (no decay).
        full_rate_epochs: Optional non-negative integer, the number of epochs at the full
            rate. Default: `None` (a constant rate).

    Example:

    >>> callback = EpochLearningRate(1.0, lr_decay=0.5, full_rate_epochs=1)
    >>> callback.schedule(2)
    0.25
    """

    def __init__(self, learning_rate, lr_decay=1.0, full_rate_epochs=None):
        if not 0 < lr_decay <= 1:
            raise ValueError(f"`lr_decay` must be in (0, 1], got {lr_decay!r}.")
        check_optional_int("full_rate_epochs", full_rate_epochs, 0)
        super().__init__(
            lambda epoch, _rate=None: epoch_learning_rate(
                epoch, learning_rate, lr_decay, full_rate_epochs
            )
        )


class ResumableReduceLROnPlateau(keras.callbacks.ReduceLROnPlateau):
    """`keras.callbacks.ReduceLROnPlateau` that keeps its best value and counters in a file.

    A restarted process would otherwise start from no best value, so the first check after a
    resume could never reduce the rate.

    Args:
        state_path: String or path, the JSON file that keeps ``best``, ``wait`` and
            ``cooldown_counter`` (a `RunBackup` state file).
        **kwargs: `keras.callbacks.ReduceLROnPlateau` arguments (``monitor``, ``factor``,
            ``patience``, ``min_delta``, ``mode``, ...).
    """

    STATE = ("best", "wait", "cooldown_counter")

    def __init__(self, state_path, **kwargs):
        super().__init__(**kwargs)
        self.state_path = state_path

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        state = read_json(self.state_path)
        if state is not None:
            for name in self.STATE:
                setattr(self, name, state[name])

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        write_json(self.state_path, {name: float(getattr(self, name)) for name in self.STATE})


def halve_learning_rate_callback(min_delta=1e-3, state_path=None):
    """Halves the learning rate when dev accuracy did not improve by ``min_delta``.

    The rule is checked after every epoch on ``val_accuracy`` (patience 0).

    Args:
        min_delta: Float, the smallest increase of ``val_accuracy`` that counts as an
            improvement. Default: `1e-3`.
        state_path: Optional string or path, a JSON file in which the rule's best accuracy
            survives a restart (`ResumableReduceLROnPlateau`). Default: `None` (a plain
            `keras.callbacks.ReduceLROnPlateau`).

    Returns:
        A `keras.callbacks.ReduceLROnPlateau` (or `ResumableReduceLROnPlateau`).

    Example:

    >>> halve_learning_rate_callback().factor
    0.5
    """
    kwargs = dict(
        monitor="val_accuracy", factor=0.5, patience=0, min_delta=min_delta, mode="max", verbose=1
    )
    if state_path is None:
        return keras.callbacks.ReduceLROnPlateau(**kwargs)
    return ResumableReduceLROnPlateau(state_path, **kwargs)
