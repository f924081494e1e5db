"""`StateResetCallback`: resetting the carried states of a stateful language model at the start
of every epoch and at document boundaries."""

import keras
import numpy as np

from tf_memlayers.callbacks.reset_language_model_states import reset_language_model_states


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

    Example:

    >>> import numpy as np
    >>> # Three batches of two rows; a new document starts in row 1 at the third batch.
    >>> resets = np.array([[True, True], [False, False], [False, True]])
    >>> callback = StateResetCallback(train_resets=resets)
    >>> callback.train_resets[2].tolist()
    [False, True]
    """

    def __init__(self, train_resets=None, eval_resets=None):
        super().__init__()
        self.train_resets = None if train_resets is None else np.asarray(train_resets, bool)
        self.eval_resets = None if eval_resets is None else np.asarray(eval_resets, bool)

    def _reset_rows(self, resets, batch):
        if resets is not None and 0 < batch < len(resets):
            reset_language_model_states(self.model, resets[batch])

    def on_epoch_begin(self, epoch, logs=None):
        reset_language_model_states(self.model)

    def on_train_batch_begin(self, batch, logs=None):
        self._reset_rows(self.train_resets, batch)

    def on_test_begin(self, logs=None):
        reset_language_model_states(self.model)

    def on_test_batch_begin(self, batch, logs=None):
        self._reset_rows(self.eval_resets, batch)

    def on_predict_begin(self, logs=None):
        reset_language_model_states(self.model)

    def on_predict_batch_begin(self, batch, logs=None):
        self._reset_rows(self.eval_resets, batch)
