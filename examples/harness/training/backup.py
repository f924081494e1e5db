"""`RunBackup`: the state of a training run after every epoch, restored exactly on restart."""

import glob
import os
import random

import keras
import numpy as np

from examples.harness.training.run_files import plain_json, read_json, replace_file, write_json

BACKUP_DIR = "backup"
RECORD_FILE = "run.json"
RECORD_FORMAT = 1


def read_backup_record(directory):
    """The record of the last backup in ``directory`` (`None` if there is none).

    Args:
        directory: String or path, the backup directory of a `RunBackup`.

    Returns:
        Dict, the JSON record of the last backup (epoch, arrays file, variables, history,
        state files, random states), or `None`.

    Raises:
        ValueError: If the directory holds a `keras.callbacks.BackupAndRestore` backup, or a
            record of another format.
    """
    record = read_json(os.path.join(directory, RECORD_FILE))
    if record is None and os.path.exists(os.path.join(directory, "training_metadata.json")):
        raise ValueError(
            f"{directory!r} holds a backup written by keras.callbacks.BackupAndRestore, which "
            "lacks the random state needed to resume the run exactly. Delete that directory "
            "to start the run again."
        )
    if record is not None and record.get("format") != RECORD_FORMAT:
        raise ValueError(
            f"The backup in {directory!r} has format {record.get('format')!r}; this version "
            f"of tf_memlayers reads format {RECORD_FORMAT}."
        )
    return record


def _plain_logs(logs):
    plain = {}
    for name, value in (logs or {}).items():
        try:
            plain[name] = float(value)
        except (TypeError, ValueError):
            plain[name] = plain_json(value)
    return plain


class RunBackup(keras.callbacks.Callback):
    """Backs up a training run after every epoch, and restores it exactly after a restart.

    `keras.callbacks.BackupAndRestore` keeps the model's weights, the optimizer and the epoch.
    A run restored from those still differs from one that was never interrupted: the random
    seed states of layers such as `Dropout` start again from their initial values, the logs of
    the epochs before the restart are lost, and what a callback did at the end of an epoch
    after the backup was written (a learning rate halved) is undone. `RunBackup` writes, at the
    end of every epoch and after the callbacks listed before it, in one step (a process killed
    at any moment leaves either the previous backup or the new one):

    - every variable of the model (`model.variables`: weights, non-trainable state such as
      caches and carried memories, and the layers' random seed states) and of its optimizer
      (step counter and learning rate included);
    - Python's and NumPy's global random states;
    - the logs of every epoch so far (`run_history`);
    - the contents of ``state_files``, in which callbacks keep their state across restarts
      (`BestModelCheckpoint`, `ResumableReduceLROnPlateau`).

    When the callback is made, the state files are put back as the backup recorded them
    (removed if it did not record them, or if there is no backup), so that callbacks read the
    state of the restored epoch; when training begins, the variables and random states are
    restored. A resumed run then repeats the interrupted epoch from its start with the same
    state, and ends with the same weights and logs as an uninterrupted run, provided that

    - ``model.fit`` starts at the restored epoch: ``initial_epoch=resumed_epoch(workdir)``
      (checked: another start is a `ValueError`);
    - the training data of an epoch do not depend on the process having run the epochs before
      it: a fixed sequence per epoch, or an endless stream that a resumed run skips by the
      completed epochs' batches (a `tf.data` dataset reshuffled on each iteration starts again
      from its first order in a new process).

    Args:
        directory: String or path, the directory where the backup is kept (used by nothing
            else).
        state_files: Sequence of strings or paths, the callbacks' state files. Default:
            `()` (none).
    """

    def __init__(self, directory, state_files=()):
        super().__init__()
        self.directory = str(directory)
        self.state_files = [str(path) for path in state_files]
        self._record = read_backup_record(self.directory)
        self._first_epoch = None
        self._restore_state_files()

    @property
    def epoch(self):
        """The number of completed epochs in the backup: where a resumed `fit` starts."""
        return self._record["epoch"] if self._record else 0

    def _file_key(self, path):
        return os.path.relpath(os.path.abspath(path), os.path.abspath(self.directory))

    def _restore_state_files(self):
        saved = self._record["files"] if self._record else {}
        for path in self.state_files:
            text = saved.get(self._file_key(path))
            if text is None:
                if os.path.exists(path):
                    os.remove(path)
                continue
            current = None
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    current = handle.read()
            if current != text:
                replace_file(path, lambda handle, text=text: handle.write(text))

    def _variable_groups(self):
        optimizer = self.model.optimizer
        return {
            "model": list(self.model.variables),
            "optimizer": list(optimizer.variables) if optimizer is not None else [],
        }

    def on_train_begin(self, logs=None):
        self._first_epoch = self.epoch
        if self._record is None:
            return
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        groups = self._variable_groups()
        with np.load(os.path.join(self.directory, self._record["arrays"])) as arrays:
            for group, variables in groups.items():
                saved = self._record["variables"][group]
                shapes = [(list(v.shape), str(np.dtype(v.dtype))) for v in variables]
                if shapes != [(shape, dtype) for _, shape, dtype in saved]:
                    raise ValueError(
                        f"The backup in {self.directory!r} was made by another {group}: it "
                        f"holds {len(saved)} variables of shapes and dtypes "
                        f"{[(shape, dtype) for _, shape, dtype in saved]}, this one "
                        f"{len(variables)} of {shapes}."
                    )
                for i, variable in enumerate(variables):
                    variable.assign(arrays[f"{group}_{i}"])
            numpy_keys = arrays["numpy_random_keys"]
        version, internal, gauss = self._record["python_random"]
        random.setstate((version, tuple(internal), gauss))
        name, position, has_gauss, cached = self._record["numpy_random"]
        np.random.set_state((name, numpy_keys, position, has_gauss, cached))

    def on_epoch_begin(self, epoch, logs=None):
        if self._first_epoch is not None and epoch != self._first_epoch:
            raise ValueError(
                f"Training started at epoch {epoch}, but the backup in {self.directory!r} "
                f"holds {self._first_epoch} completed epochs: pass "
                f"initial_epoch={self._first_epoch} to fit (`resumed_epoch`)."
            )
        self._first_epoch = None

    def on_epoch_end(self, epoch, logs=None):
        history = list(self._record["history"]) if self._record else []
        history = history[:epoch] + [_plain_logs(logs)]
        name = f"variables-{epoch + 1:05d}.npz"
        arrays, descriptions = {}, {}
        for group, variables in self._variable_groups().items():
            values = [np.asarray(variable.numpy()) for variable in variables]
            arrays.update({f"{group}_{i}": value for i, value in enumerate(values)})
            descriptions[group] = [
                [variable.path, list(value.shape), str(value.dtype)]
                for variable, value in zip(variables, values)
            ]
        numpy_state = np.random.get_state()
        arrays["numpy_random_keys"] = numpy_state[1]
        replace_file(
            os.path.join(self.directory, name), lambda handle: np.savez(handle, **arrays), "wb"
        )
        files = {}
        for path in self.state_files:
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    files[self._file_key(path)] = handle.read()
        version, internal, gauss = random.getstate()
        record = {
            "format": RECORD_FORMAT,
            "epoch": epoch + 1,
            "arrays": name,
            "variables": descriptions,
            "history": history,
            "files": files,
            "python_random": [version, list(internal), gauss],
            "numpy_random": [
                numpy_state[0],
                int(numpy_state[2]),
                int(numpy_state[3]),
                float(numpy_state[4]),
            ],
        }
        # The record names its arrays file: replacing it commits the whole backup at once.
        write_json(os.path.join(self.directory, RECORD_FILE), record)
        self._record = record
        for stale in glob.glob(os.path.join(glob.escape(self.directory), "variables-*.npz")):
            if os.path.basename(stale) != name:
                os.remove(stale)
