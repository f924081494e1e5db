"""Run directories: one per set of options, and the callbacks that make a run resumable."""

import hashlib
import json
import os
import re

import keras

from tf_memlayers.callbacks.backup import BACKUP_DIR, RunBackup, read_backup_record
from tf_memlayers.callbacks.best_model import BestModelCheckpoint
from tf_memlayers.callbacks.run_files import plain_json, read_json, write_json

# Options of the example scripts that say how long or how verbosely to run, or where to keep
# the run, but not what the run computes: a run resumed with other values is the same run.
RUN_OPTIONS = ("epochs", "verbose", "workdir", "strategy", "jit", "no_jit")
SETTINGS_FILE = "settings.json"


def run_settings(args, run_options=RUN_OPTIONS):
    """The parsed command-line options that define a run (all but ``run_options``).

    Args:
        args: an `argparse.Namespace` (or a dict).
        run_options: option names left out.

    Returns:
        A dict with JSON values (paths and other objects as strings), sorted by name.
    """
    values = args if isinstance(args, dict) else vars(args)
    return plain_json({k: v for k, v in sorted(values.items()) if k not in run_options})


def _readable(value):
    """A short, file-name-safe spelling of an option's value."""
    if isinstance(value, (list, tuple)):
        return "+".join(_readable(v) for v in value)
    text = os.path.basename(str(value).rstrip("/\\")) or str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text)[:24]


def run_name(settings, label=None, changed=None):
    """``<label>-<option=value>_..._<option=value>-<digest>`` for a run.

    Args:
        settings: the run's resolved settings (what it computes with, after presets and
            defaults that depend on the data are applied); the digest is taken over them.
        label: optional leading word, e.g. the model kind.
        changed: optional dict of the options the user set to other values than their
            defaults; they make the name readable (at most about 80 characters of them).

    Returns:
        The directory name. Equal settings give equal names, other settings other digests.
    """
    text = json.dumps(plain_json(settings), sort_keys=True)
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    readable = "_".join(f"{name}={_readable(v)}" for name, v in sorted((changed or {}).items()))
    if len(readable) > 80:
        readable = readable[:80].rsplit("_", 1)[0]
    return "-".join(part for part in (label, readable, digest) if part)


def run_directory(root, settings, label=None, changed=None):
    """``root/`` `run_name`: one directory per distinct run.

    Running the same command again gives the same directory (so it resumes); changing any
    setting gives another one (so runs never mix).
    """
    return os.path.join(root, run_name(settings, label, changed))


def changed_options(args, run_options=RUN_OPTIONS):
    """The options of ``args`` (`run_settings`) whose values differ from the parser's
    defaults (known when ``args`` is a `tf_memlayers.training.options.ParsedOptions`)."""
    defaults = getattr(args, "defaults", None) or {}
    return {
        name: value
        for name, value in run_settings(args, run_options).items()
        if name in defaults and value != plain_json(defaults[name])
    }


def resolved_settings(args, resolved=None, run_options=RUN_OPTIONS):
    """`run_settings` with the values options resolved to (e.g. ``source="auto"`` →
    ``"generated"``, ``learning_rate=None`` → ``0.003``) put in their place."""
    return dict(run_settings(args, run_options), **plain_json(dict(resolved or {})))


def run_workdir(args, default_root, label=None, run_options=RUN_OPTIONS, resolved=None):
    """``args.workdir`` if given, else `run_directory` under ``default_root``: named after
    ``label`` and the options changed from their defaults, with a digest of the resolved
    settings (`resolved_settings`)."""
    if args.workdir:
        return str(args.workdir)
    settings = resolved_settings(args, resolved, run_options)
    return run_directory(default_root, settings, label, changed_options(args, run_options))


def check_run_settings(workdir, settings):
    """Records ``settings`` in ``workdir``, or checks them against the run already there.

    Raises:
        ValueError: ``workdir`` holds a run with different settings (resuming it would
            restore that run's weights and epoch under the new settings).
    """
    settings = plain_json(settings)
    path = os.path.join(workdir, SETTINGS_FILE)
    saved = read_json(path)
    if saved is None:
        write_json(path, settings)
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


def resumed_epoch(workdir):
    """The number of epochs a backed-up run in ``workdir`` has completed (0 if none).

    Where a resumed run starts (``model.fit(..., initial_epoch=resumed_epoch(workdir))``); a
    script feeding an endless stream skips that many epochs' batches so that a resumed run
    continues the stream.
    """
    record = read_backup_record(os.path.join(workdir, BACKUP_DIR))
    return record["epoch"] if record else 0


def run_history(workdir):
    """The logs of every epoch a backed-up run in ``workdir`` has completed, restarts or not.

    Returns:
        A dict ``{name: [value at epoch 0, epoch 1, ...]}`` (`None` for an epoch without that
        value), like the ``history`` of one uninterrupted `model.fit`.
    """
    record = read_backup_record(os.path.join(workdir, BACKUP_DIR))
    epochs = record["history"] if record else []
    names = sorted({name for logs in epochs for name in logs})
    return {name: [logs.get(name) for logs in epochs] for name in names}


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
