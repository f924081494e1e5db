"""Callbacks that make a `model.fit` run survive interruption, and the run's identity."""

import glob
import hashlib
import json
import os
import random

import keras
import numpy as np

# Options of the example scripts that say how long or how verbosely to run, or where to keep
# the run, but not what the run computes: a run resumed with other values is the same run.
RUN_OPTIONS = ("epochs", "verbose", "workdir", "strategy", "jit", "no_jit")
SETTINGS_FILE = "settings.json"


def _plain(value):
    """``value`` with JSON types only (paths and other objects as strings)."""
    return json.loads(json.dumps(value, default=str))


def _read_json(path, default=None):
    """The JSON value stored at ``path``, or ``default`` if there is no such file."""
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _replace_file(path, write, mode="w"):
    """Writes ``path`` through ``write(handle)`` all at once: a process killed at any moment
    leaves either the old file or the new one, never a partial one."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.partial"
    with open(temporary, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _write_json(path, value):
    _replace_file(path, lambda handle: json.dump(value, handle, indent=1, sort_keys=True))


def run_settings(args, run_options=RUN_OPTIONS):
    """The parsed command-line options that define a run (all but ``run_options``).

    Args:
        args: an `argparse.Namespace` (or a dict).
        run_options: option names left out.

    Returns:
        A dict with JSON values (paths and other objects as strings), sorted by name.
    """
    values = args if isinstance(args, dict) else vars(args)
    return _plain({k: v for k, v in sorted(values.items()) if k not in run_options})


def run_directory(root, settings, label=None):
    """``root/<label>-<digest of settings>``: one directory per distinct run.

    Running the same command again gives the same directory (so it resumes); changing any
    setting gives another one (so runs never mix).
    """
    text = json.dumps(_plain(settings), sort_keys=True)
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    return os.path.join(root, f"{label}-{digest}" if label else digest)


def run_workdir(args, default_root, label=None, run_options=RUN_OPTIONS):
    """``args.workdir`` if given, else `run_directory` of the run's settings (`run_settings`
    with ``run_options``) under ``default_root``."""
    if args.workdir:
        return str(args.workdir)
    return run_directory(default_root, run_settings(args, run_options), label)


def check_run_settings(workdir, settings):
    """Records ``settings`` in ``workdir``, or checks them against the run already there.

    Raises:
        ValueError: ``workdir`` holds a run with different settings (resuming it would
            restore that run's weights and epoch under the new settings).
    """
    settings = _plain(settings)
    path = os.path.join(workdir, SETTINGS_FILE)
    saved = _read_json(path)
    if saved is None:
        _write_json(path, settings)
        return
    differences = [
        f"{name}: {saved.get(name)!r} there, {settings.get(name)!r} now"
        for name in sorted(set(saved) | set(settings))
        if saved.get(name) != settings.get(name)
    ]
    if differences:
        raise ValueError(
            f"The workdir {workdir!r} holds a run with other settings ("
            + "; ".join(differences)
            + "). Resuming it would continue that run. Use another --workdir, or delete this "
            "one to start again."
        )


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves ``workdir/best.keras`` when ``monitor`` improves, remembering the best value.

    The best value so far is kept in ``workdir/best.json``, so a resumed run only replaces
    the saved model with a better one (a plain `keras.callbacks.ModelCheckpoint` starts from
    scratch in a new process and overwrites it after the first epoch).
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
        record = _read_json(self.record_path, {})
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
            _write_json(self.record_path, record)


BACKUP_DIR = "backup"
RECORD_FILE = "run.json"
RECORD_FORMAT = 1


def _read_record(directory):
    """The record of the last backup in ``directory`` (`None` if there is none)."""
    record = _read_json(os.path.join(directory, RECORD_FILE))
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


def resumed_epoch(workdir):
    """The number of epochs a backed-up run in ``workdir`` has completed (0 if none).

    Where a resumed run starts (``model.fit(..., initial_epoch=resumed_epoch(workdir))``); a
    script feeding an endless stream skips that many epochs' batches so that a resumed run
    continues the stream.
    """
    record = _read_record(os.path.join(workdir, BACKUP_DIR))
    return record["epoch"] if record else 0


def run_history(workdir):
    """The logs of every epoch a backed-up run in ``workdir`` has completed, restarts or not.

    Returns:
        A dict ``{name: [value at epoch 0, epoch 1, ...]}`` (`None` for an epoch without that
        value), like the ``history`` of one uninterrupted `model.fit`.
    """
    record = _read_record(os.path.join(workdir, BACKUP_DIR))
    epochs = record["history"] if record else []
    names = sorted({name for logs in epochs for name in logs})
    return {name: [logs.get(name) for logs in epochs] for name in names}


def _plain_logs(logs):
    plain = {}
    for name, value in (logs or {}).items():
        try:
            plain[name] = float(value)
        except (TypeError, ValueError):
            plain[name] = _plain(value)
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
        directory: where the backup is kept (used by nothing else).
        state_files: paths of the callbacks' state files.
    """

    def __init__(self, directory, state_files=()):
        super().__init__()
        self.directory = str(directory)
        self.state_files = [str(path) for path in state_files]
        self._record = _read_record(self.directory)
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
                _replace_file(path, lambda handle, text=text: handle.write(text))

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
        _replace_file(
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
                numpy_state[0], int(numpy_state[2]), int(numpy_state[3]), float(numpy_state[4])
            ],
        }
        # The record names its arrays file: replacing it commits the whole backup at once.
        _write_json(os.path.join(self.directory, RECORD_FILE), record)
        self._record = record
        for stale in glob.glob(os.path.join(glob.escape(self.directory), "variables-*.npz")):
            if os.path.basename(stale) != name:
                os.remove(stale)


class ResumableReduceLROnPlateau(keras.callbacks.ReduceLROnPlateau):
    """`keras.callbacks.ReduceLROnPlateau` that keeps its best value and counters in a file.

    A restarted process would otherwise start from no best value, so the first check after a
    resume could never reduce the rate.

    Args:
        state_path: JSON file for ``best``, ``wait`` and ``cooldown_counter``.
        **kwargs: `keras.callbacks.ReduceLROnPlateau` arguments.
    """

    STATE = ("best", "wait", "cooldown_counter")

    def __init__(self, state_path, **kwargs):
        super().__init__(**kwargs)
        self.state_path = state_path

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        state = _read_json(self.state_path)
        if state is not None:
            for name in self.STATE:
                setattr(self, name, state[name])

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        _write_json(self.state_path, {name: float(getattr(self, name)) for name in self.STATE})


def resumable_callbacks(workdir, monitor="val_loss", mode="min", settings=None, callbacks=()):
    """Returns the callbacks of a training run that resumes exactly after an interruption.

    In order: a `BestModelCheckpoint` (the best model as ``workdir/best.keras``, across
    restarts), ``callbacks``, a `keras.callbacks.ModelCheckpoint` of the latest model as the
    epoch left it (``workdir/last.keras``, a learning rate changed by ``callbacks`` included),
    and last a `RunBackup` in ``workdir/backup`` that records what all of them did at the end
    of each epoch, including the state files of callbacks that have a ``state_path``
    (`BestModelCheckpoint`, `ResumableReduceLROnPlateau`). Running the same command again
    after an interruption at any point continues the run and ends as an uninterrupted run
    would. Train with::

        callbacks = resumable_callbacks(workdir, callbacks=[...])
        model.fit(..., callbacks=callbacks, initial_epoch=resumed_epoch(workdir))
        history = run_history(workdir)  # every epoch of the run, restarts or not

    Args:
        workdir: directory for the backup and the saved models.
        monitor: metric that decides the best model.
        mode: `"min"` or `"max"` for ``monitor``.
        settings: optional dict of what defines the run (`run_settings`); recorded in
            ``workdir/settings.json``, and a run with other settings in ``workdir`` is an
            error instead of being resumed (`check_run_settings`).
        callbacks: the run's other callbacks.
    """
    workdir = str(workdir)
    os.makedirs(workdir, exist_ok=True)
    if settings is not None:
        check_run_settings(workdir, settings)
    callbacks = list(callbacks)
    best_path = os.path.join(workdir, "best.json")
    state_files = [best_path] + [c.state_path for c in callbacks if getattr(c, "state_path", None)]
    # Made first: it puts the state files back before the other callbacks read them.
    backup = RunBackup(os.path.join(workdir, BACKUP_DIR), state_files)
    return [
        BestModelCheckpoint(workdir, monitor=monitor, mode=mode),
        *callbacks,
        keras.callbacks.ModelCheckpoint(os.path.join(workdir, "last.keras")),
        backup,
    ]
