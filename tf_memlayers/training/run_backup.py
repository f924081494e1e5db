"""`RunBackup`: a training run backed up at every epoch's end and resumed exactly."""

import collections.abc
import glob
import json
import os
import random
import shutil

import keras
import numpy as np

from tf_memlayers._validation import check_callbacks, check_path

RECORD_FILE = "run.json"
SETTINGS_FILE = "settings.json"
RECORD_FORMAT = 2

# What each Keras callback keeps from one epoch to the next, which a new process (and, for
# most of them, ``on_train_begin``) would reset: its public attributes (Keras 3.15's sources).
# A callback of a class listed here has its attributes of these names saved and restored; those
# it lacks are skipped. `keras.callbacks.TensorBoard` keeps no public state: logging once per
# epoch (its default), its steps are the epochs, which a resumed run continues.
CALLBACK_STATE = (
    (keras.callbacks.ModelCheckpoint, ("best",)),
    (keras.callbacks.ReduceLROnPlateau, ("best", "wait", "cooldown_counter")),
    (
        keras.callbacks.EarlyStopping,
        ("best", "wait", "stopped_epoch", "best_epoch", "best_weights"),
    ),
)


def _state_names(callback):
    for kind, names in CALLBACK_STATE:
        if isinstance(callback, kind):
            return [name for name in names if hasattr(callback, name)]
    return None


def _plain(value):
    """``value`` as JSON types (NumPy and backend scalars as Python numbers)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return np.asarray(value).tolist()


def _replace_file(path, write, mode="w"):
    """Writes ``path`` through ``write(handle)`` into ``path + ".partial"``, flushed to disk,
    then renamed over ``path``: a process killed at any moment leaves the old file or the new
    one, never a part."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.partial"
    with open(temporary, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _write_json(path, value):
    _replace_file(path, lambda handle: json.dump(value, handle, indent=1, sort_keys=True))


def _read_json(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _copy_backups(source, target):
    """Copies the backups of every `RunBackup` under ``source`` (their record, settings and
    arrays) to the same places under ``target``."""
    for folder, _, files in os.walk(source):
        record = _read_json(os.path.join(folder, RECORD_FILE)) or {}
        names = {RECORD_FILE, SETTINGS_FILE, record.get("arrays")} & set(files)
        for name in names:
            destination = os.path.join(target, os.path.relpath(folder, source), name)
            os.makedirs(os.path.dirname(destination), exist_ok=True)
            shutil.copy2(os.path.join(folder, name), destination)


class RunBackup(keras.callbacks.Callback):
    """Backs a training run up at the end of every epoch, and resumes it exactly.

    `keras.callbacks.BackupAndRestore` keeps the weights, the optimizer and the epoch; a run
    it restores still differs from one never interrupted, since the random states of layers
    such as `keras.layers.Dropout` and the global generators start again, the other callbacks
    forget their state (the best value of `keras.callbacks.ModelCheckpoint`), and the logs of
    the epochs before the restart are lost. `RunBackup` keeps them all. At the end of every
    epoch it writes, in one atomic commit (a process killed at any moment leaves the previous
    backup or the new one):

    - every variable of the model (`keras.Model.variables`: weights, non-trainable state such
      as caches, and the layers' seed-generator states) and of its optimizer (the step counter
      and the learning rate included);
    - Python's and NumPy's global random states;
    - the logs of every epoch so far (`history`);
    - the state of the callbacks in ``callbacks``: the best value of
      `keras.callbacks.ModelCheckpoint`, `keras.callbacks.ReduceLROnPlateau` and
      `keras.callbacks.EarlyStopping`, their counters (patience, cooldown) and
      EarlyStopping's best weights.

    Pass it last in ``fit``'s callbacks: it then backs up what the others did at the epoch's
    end, and restores everything in ``on_train_begin`` after the others have reset
    themselves. A resumed run repeats the interrupted epoch from its start with the same
    state and ends with the same weights and logs as an uninterrupted one, provided that
    ``fit`` starts at ``initial_epoch=backup.epoch`` (checked) and that an epoch's data do not
    depend on the process having run the epochs before it (a fixed sequence per epoch, or an
    endless stream that a resumed run skips by the completed epochs' batches).

    Args:
        directory: String or path, the folder of the backup (used by nothing else).
        callbacks: Sequence of the run's Keras callbacks whose state to keep:
            `keras.callbacks.ModelCheckpoint`, `keras.callbacks.ReduceLROnPlateau`,
            `keras.callbacks.EarlyStopping` (or subclasses).
            Default: `()`.
        settings: Optional dict of what defines the run (its JSON form is kept in
            ``directory``); a directory that holds other settings is refused instead of being
            resumed. Default: `None` (not recorded nor checked).

    Raises:
        TypeError: If ``callbacks`` holds a callback of another class, or ``settings`` is not
            a dict.
        ValueError: If ``directory`` holds a run with other settings (naming each one that
            differs), a `keras.callbacks.BackupAndRestore` backup, or a record of another
            format. When training begins: if ``fit`` starts at another epoch than `epoch`, or
            the backup was made by another model, optimizer or list of callbacks.

    Example:

    >>> import tempfile
    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers.training import RunBackup
    >>> directory = tempfile.mkdtemp()
    >>> def run(epochs):  # the same script, run again after an interruption
    ...     model = keras.Sequential(
    ...         [keras.Input((2,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    ...     model.compile("sgd", "mse")
    ...     plateau = keras.callbacks.ReduceLROnPlateau("loss", patience=1)
    ...     backup = RunBackup(directory, [plateau], settings={"dropout": 0.5})
    ...     model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=epochs, verbose=0,
    ...               initial_epoch=backup.epoch, callbacks=[plateau, backup])
    ...     return backup
    >>> run(epochs=1).epoch  # stopped after one epoch ...
    1
    >>> backup = run(epochs=3)  # ... and continued to three
    >>> backup.epoch, len(backup.history["loss"])
    (3, 3)
    """

    def __init__(self, directory, callbacks=(), settings=None):
        super().__init__()
        self.directory = check_path("directory", directory, "RunBackup")
        self.callbacks = check_callbacks(callbacks, type(self).__name__)
        for callback in self.callbacks:
            if _state_names(callback) is None:
                kinds = ", ".join(f"keras.callbacks.{kind.__name__}" for kind, _ in CALLBACK_STATE)
                raise TypeError(
                    f"RunBackup: `callbacks` must hold callbacks whose state it keeps ({kinds}); "
                    f"got {callback!r}. A callback without state between epochs (such as "
                    "keras.callbacks.LearningRateScheduler) needs no backup."
                )
        if settings is not None:
            self._check_settings(settings)
        self._record = self._read_record()
        self._first_epoch = None

    def _check_settings(self, settings):
        if not isinstance(settings, collections.abc.Mapping):
            raise TypeError(f"RunBackup: `settings` must be a dict or None, got {settings!r}.")
        settings = json.loads(json.dumps(dict(settings), default=str))
        path = os.path.join(self.directory, SETTINGS_FILE)
        saved = _read_json(path)
        if saved is None:
            _write_json(path, settings)
            return
        differences = sorted(
            f"{name}: {saved.get(name)!r} there, {settings.get(name)!r} now"
            for name in set(saved) | set(settings)
            if saved.get(name) != settings.get(name)
        )
        if differences:
            raise ValueError(
                f"`settings`: the directory {self.directory!r} holds a run with other settings "
                f"({'; '.join(differences)}). Resuming it would continue that run: use another "
                "directory, or delete this one to start again."
            )

    def _read_record(self):
        record = _read_json(os.path.join(self.directory, RECORD_FILE))
        if record is None and os.path.exists(
            os.path.join(self.directory, "training_metadata.json")
        ):
            raise ValueError(
                f"`directory` {self.directory!r} holds a backup written by "
                "keras.callbacks.BackupAndRestore, which lacks the random states and the "
                "callbacks' state needed to resume the run exactly. Delete that directory to "
                "start the run again."
            )
        if record is not None and record.get("format") != RECORD_FORMAT:
            raise ValueError(
                f"The backup in {self.directory!r} has format {record.get('format')!r}; this "
                f"version of tf_memlayers reads format {RECORD_FORMAT}, so the run cannot resume "
                "from it: delete that directory, or give another, to start the run again."
            )
        return record

    @property
    def epoch(self):
        """The number of completed epochs in the backup: where a resumed `fit` starts."""
        return self._record["epoch"] if self._record else 0

    @property
    def stopped(self):
        """Whether a callback (`keras.callbacks.EarlyStopping`, say) stopped the run at the
        backup's last epoch: the run is over. `tf_memlayers.training.train` then trains no
        further epoch, only restores the run; with ``fit``, pass ``epochs=backup.epoch``."""
        return bool(self._record and self._record.get("stopped"))

    @property
    def history(self):
        """The logs of every completed epoch, before and after any restart, as
        `keras.callbacks.History.history` holds them: ``{name: [value of each epoch]}``
        (`None` for an epoch without that value)."""
        epochs = self._record["history"] if self._record else []
        names = sorted({name for logs in epochs for name in logs})
        return {name: [logs.get(name) for logs in epochs] for name in names}

    def _variable_groups(self):
        optimizer = self.model.optimizer
        return {
            "model": list(self.model.variables),
            "optimizer": list(optimizer.variables) if optimizer is not None else [],
        }

    def _callback_classes(self):
        return [type(callback).__name__ for callback in self.callbacks]

    def on_train_begin(self, logs=None):
        self._first_epoch = self.epoch
        record = self._record
        if record is None:
            return
        if record["callbacks"] != self._callback_classes():
            raise ValueError(
                f"The backup in {self.directory!r} holds the state of the callbacks "
                f"{record['callbacks']}; this RunBackup was given {self._callback_classes()}."
            )
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        with np.load(os.path.join(self.directory, record["arrays"])) as arrays:
            for group, variables in self._variable_groups().items():
                saved = [(shape, dtype) for _, shape, dtype in record["variables"][group]]
                shapes = [(list(v.shape), str(np.dtype(v.dtype))) for v in variables]
                if shapes != saved:
                    raise ValueError(
                        f"The backup in {self.directory!r} was made by another {group}: it "
                        f"holds {len(saved)} variables of shapes and dtypes {saved}, this one "
                        f"{len(variables)} of {shapes}."
                    )
                for i, variable in enumerate(variables):
                    variable.assign(arrays[f"{group}_{i}"])
            for i, (callback, state) in enumerate(zip(self.callbacks, record["callback_state"])):
                for name, value in state.items():
                    if isinstance(value, dict):  # a list of arrays (best weights)
                        value = [arrays[f"callback{i}_{name}_{j}"] for j in range(value["arrays"])]
                    setattr(callback, name, value)
            numpy_keys = arrays["numpy_random_keys"]
        version, internal, gauss = record["python_random"]
        random.setstate((version, tuple(internal), gauss))
        name, position, has_gauss, cached = record["numpy_random"]
        np.random.set_state((name, numpy_keys, position, has_gauss, cached))

    def on_epoch_begin(self, epoch, logs=None):
        if self._first_epoch is not None and epoch != self._first_epoch:
            raise ValueError(
                f"Training started at epoch {epoch}, but the backup in {self.directory!r} "
                f"holds {self._first_epoch} completed epochs: pass "
                f"initial_epoch={self._first_epoch} to fit (RunBackup.epoch)."
            )
        self._first_epoch = None

    def on_epoch_end(self, epoch, logs=None):
        history = list(self._record["history"]) if self._record else []
        history = history[:epoch] + [{k: _plain(v) for k, v in (logs or {}).items()}]
        arrays, descriptions = {}, {}
        for group, variables in self._variable_groups().items():
            values = [np.asarray(variable.numpy()) for variable in variables]
            arrays.update({f"{group}_{i}": value for i, value in enumerate(values)})
            descriptions[group] = [
                [variable.path, list(value.shape), str(value.dtype)]
                for variable, value in zip(variables, values)
            ]
        callback_state = []
        for i, callback in enumerate(self.callbacks):
            state = {}
            for name in _state_names(callback):
                value = getattr(callback, name)
                if isinstance(value, list):  # weights (EarlyStopping's best_weights)
                    arrays.update({f"callback{i}_{name}_{j}": w for j, w in enumerate(value)})
                    value = {"arrays": len(value)}
                state[name] = _plain(value)
            callback_state.append(state)
        numpy_state = np.random.get_state()
        arrays["numpy_random_keys"] = numpy_state[1]
        name = f"variables-{epoch + 1:05d}.npz"
        path = os.path.join(self.directory, name)
        _replace_file(path, lambda handle: np.savez(handle, **arrays), "wb")
        version, internal, gauss = random.getstate()
        record = {
            "format": RECORD_FORMAT,
            "epoch": epoch + 1,
            # A callback (EarlyStopping) ended the run at this epoch: nothing remains to train.
            "stopped": bool(getattr(self.model, "stop_training", False)),
            "arrays": name,
            "variables": descriptions,
            "history": history,
            "callbacks": self._callback_classes(),
            "callback_state": callback_state,
            "python_random": [version, list(internal), gauss],
            "numpy_random": [numpy_state[0], *map(_plain, numpy_state[2:])],
        }
        # The record names its arrays file: replacing the record commits the whole backup.
        _write_json(os.path.join(self.directory, RECORD_FILE), record)
        self._record = record
        for stale in glob.glob(os.path.join(glob.escape(self.directory), "variables-*.npz")):
            if os.path.basename(stale) != name:
                os.remove(stale)
