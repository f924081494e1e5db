"""`StateResetCallback`: resetting the carried states of a stateful language model at the start
of every epoch and at document boundaries."""

import keras
import numpy as np

from tf_memlayers._validation import check_one_batch_per_call
from tf_memlayers.callbacks.reset_language_model_states import reset_language_model_states

# Undecorated: its errors are reported as this callback's (`_reset_rows`), not in its name.
_reset_states = reset_language_model_states.__wrapped__


class StateResetCallback(keras.callbacks.Callback):
    """Resets a stateful language model at the start of every epoch / evaluation and at
    document boundaries.

    Args:
        train_resets: Optional boolean array ``[num_batches, batch]`` (e.g. the ``resets`` of the
            PTB example's truncated-BPTT batches): the rows to clear before each training batch.
            Default: `None` (reset only at the start of each epoch).
        eval_resets: Optional boolean array ``[num_batches, batch]``, the same for the data
            of `evaluate` / `predict` (and validation). Default: `None` (reset only at the
            start of each evaluation or prediction).

    Raises:
        TypeError: If a table is not boolean.
        ValueError: If a table is not 2-D.

    Example:

    >>> import numpy as np
    >>> # Three batches of two rows; a new document starts in row 1 at the third batch.
    >>> from tf_memlayers.callbacks import StateResetCallback
    >>> resets = np.array([[True, True], [False, False], [False, True]])
    >>> callback = StateResetCallback(train_resets=resets)
    >>> callback.train_resets[2].tolist()
    [False, True]
    """

    def __init__(self, train_resets=None, eval_resets=None):
        super().__init__()
        self.train_resets = self._checked("train_resets", train_resets)
        self.eval_resets = self._checked("eval_resets", eval_resets)

    @staticmethod
    def _checked(name, resets):
        if resets is None:
            return None
        resets = np.asarray(resets)
        if resets.dtype != bool:  # as `reset_language_model_states`: not a mask of 0s and 1s
            raise TypeError(
                f"StateResetCallback: `{name}` must be a boolean array [num_batches, batch], "
                f"got dtype {resets.dtype}."
            )
        if resets.ndim != 2:
            raise ValueError(
                f"StateResetCallback: `{name}` must be a boolean array [num_batches, batch], "
                f"got shape {resets.shape}."
            )
        return resets

    def _check_steps(self, name):
        if getattr(self, name) is not None:
            what = "clears rows before given batches"
            check_one_batch_per_call(self.model, name, what, "StateResetCallback")

    def _reset_rows(self, name, batch):
        resets = getattr(self, name)
        if resets is None or batch == 0:
            return
        if batch >= len(resets):
            raise ValueError(
                f"StateResetCallback: `{name}` has resets for {len(resets)} batches; batch "
                f"{batch} has none (give one row of resets per batch of the data)."
            )
        try:
            _reset_states(self.model, resets[batch])
        except ValueError as error:
            raise ValueError(f"StateResetCallback: `{name}[{batch}]`: {error}") from error

    def on_train_begin(self, logs=None):
        self._check_steps("train_resets")
        # Keras counts an epoch's batches from 0, and with `steps_per_epoch` it goes on reading
        # the data where the last epoch stopped: each epoch must read the data whole.
        steps, resets = (self.params or {}).get("steps"), self.train_resets
        if steps and resets is not None and steps != len(resets):
            raise ValueError(
                f"StateResetCallback: `train_resets` has resets for {len(resets)} batches, "
                f"but an epoch runs {steps} (`steps_per_epoch`, or the data's length): give "
                "one row of resets per batch of an epoch, each epoch reading the data from its "
                "first batch (on repeated data, steps_per_epoch equal to its number of batches)."
            )

    def on_epoch_begin(self, epoch, logs=None):
        _reset_states(self.model)

    def on_train_batch_begin(self, batch, logs=None):
        self._reset_rows("train_resets", batch)

    def on_test_begin(self, logs=None):
        self._check_steps("eval_resets")
        _reset_states(self.model)

    def on_test_batch_begin(self, batch, logs=None):
        self._reset_rows("eval_resets", batch)

    def on_predict_begin(self, logs=None):
        self._check_steps("eval_resets")
        _reset_states(self.model)

    def on_predict_batch_begin(self, batch, logs=None):
        self._reset_rows("eval_resets", batch)
