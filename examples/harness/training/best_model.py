"""The best model of a run, kept across restarts."""

import os

import keras

from examples.harness.training.run_files import read_json, write_json


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves ``workdir/best.keras`` when ``monitor`` improves, remembering the best value.

    The best value so far is kept in ``workdir/best.json``, so a resumed run only replaces
    the saved model with a better one (a plain `keras.callbacks.ModelCheckpoint` starts from
    scratch in a new process and overwrites it after the first epoch). List ``state_path``
    among the ``state_files`` of a `RunBackup` to restore the best value with the run.

    Args:
        workdir: String or path, the run's directory (``best.keras`` and ``best.json`` are
            written there).
        monitor: String, the name of the logged quantity to monitor. Default: `"val_loss"`.
        mode: String, `"min"` or `"max"`: whether a lower or a higher ``monitor`` value is
            better. Default: `"min"`.
    """

    def __init__(self, workdir, monitor="val_loss", mode="min"):
        self.record_path = os.path.join(workdir, "best.json")
        super().__init__(
            os.path.join(workdir, "best.keras"),
            monitor=monitor,
            mode=mode,
            save_best_only=True,
            initial_value_threshold=self._saved_best(monitor),
        )

    @property
    def state_path(self):
        """The file holding the best value (a `RunBackup` state file)."""
        return self.record_path

    def _saved_best(self, monitor):
        record = read_json(self.record_path, {})
        return record["value"] if record.get("monitor") == monitor else None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        # The file may have been put back to the restored epoch's since this was made.
        self.best = self._saved_best(self.monitor)

    def on_epoch_end(self, epoch, logs=None):
        before = self.best
        super().on_epoch_end(epoch, logs)
        if self.best is not None and self.best != before:
            record = {"monitor": self.monitor, "value": float(self.best), "epoch": epoch + 1}
            write_json(self.record_path, record)
