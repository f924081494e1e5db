"""Callbacks that make a `model.fit` run survive interruption, and the run's identity."""

import hashlib
import json
import os

import keras

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


def _write_json(path, value):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1, sort_keys=True)


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
        record = _read_json(self.record_path, {})
        best = record["value"] if record.get("monitor") == monitor else None
        super().__init__(
            os.path.join(workdir, "best.keras"),
            monitor=monitor,
            mode=mode,
            save_best_only=True,
            initial_value_threshold=best,
        )

    def on_epoch_end(self, epoch, logs=None):
        before = self.best
        super().on_epoch_end(epoch, logs)
        if self.best is not None and self.best != before:
            record = {"monitor": self.monitor, "value": float(self.best), "epoch": epoch + 1}
            _write_json(self.record_path, record)


def resumed_epoch(workdir):
    """The number of epochs a backed-up run in ``workdir`` has completed (0 if none).

    What `keras.callbacks.BackupAndRestore` will restore; a script feeding an endless stream
    skips that many epochs' batches so that a resumed run continues the stream.
    """
    metadata = _read_json(os.path.join(workdir, "backup", "training_metadata.json"), {})
    return int(metadata.get("epoch", 0))


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


def resumable_callbacks(workdir, monitor="val_loss", mode="min", save_freq="epoch", settings=None):
    """Returns callbacks that back up and restore a training run under ``workdir``.

    `keras.callbacks.BackupAndRestore` saves model weights (including non-trainable state such
    as caches and memories), the optimizer and the epoch counter, and restores them when the
    same command is run again after an interruption. `BestModelCheckpoint` keeps the best
    model as ``workdir/best.keras`` (across restarts) and a `keras.callbacks.ModelCheckpoint`
    the latest as ``workdir/last.keras``.

    Args:
        workdir: directory for the backup and the saved models.
        monitor: metric that decides the best model.
        mode: `"min"` or `"max"` for ``monitor``.
        save_freq: `"epoch"` or a number of batches between backups.
        settings: optional dict of what defines the run (`run_settings`); recorded in
            ``workdir/settings.json``, and a run with other settings in ``workdir`` is an
            error instead of being resumed (`check_run_settings`).
    """
    os.makedirs(workdir, exist_ok=True)
    if settings is not None:
        check_run_settings(workdir, settings)
    return [
        keras.callbacks.BackupAndRestore(
            os.path.join(workdir, "backup"), save_freq=save_freq, delete_checkpoint=False
        ),
        BestModelCheckpoint(workdir, monitor=monitor, mode=mode),
        keras.callbacks.ModelCheckpoint(os.path.join(workdir, "last.keras")),
    ]
