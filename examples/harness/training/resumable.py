"""The callbacks that make a training run resumable, and the run's recorded settings."""

import os

import keras

from examples.harness.training.backup import BACKUP_DIR, RunBackup, read_backup_record
from examples.harness.training.best_model import BestModelCheckpoint
from examples.harness.training.run_files import plain_json, read_json, write_json

SETTINGS_FILE = "settings.json"


def check_run_settings(workdir, settings, spellings=None):
    """Records ``settings`` in ``workdir``, or checks them against the run already there.

    Args:
        workdir: the run directory.
        settings: dict of what defines the run.
        spellings: optional dict, a setting's name -> how the error names it (the option a
            user types, for a setting recorded under another name:
            `examples.harness.run_directory.recorded_spellings`).

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
    spellings = spellings or {}
    differences = sorted(
        f"{spellings.get(name, name)}: {saved.get(name)!r} there, {settings.get(name)!r} now"
        for name in set(saved) | set(settings)
        if saved.get(name) != settings.get(name)
    )
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


def resumable_callbacks(
    workdir, monitor="val_loss", mode="min", settings=None, callbacks=(), spellings=None
):
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
        settings: optional dict of what defines the run; recorded in
            ``workdir/settings.json``, and a run with other settings in ``workdir`` is an
            error instead of being resumed (`check_run_settings`).
        callbacks: the run's other callbacks.
        spellings: optional dict, how `check_run_settings` names a setting in its error.
    """
    workdir = str(workdir)
    os.makedirs(workdir, exist_ok=True)
    if settings is not None:
        check_run_settings(workdir, settings, spellings)
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
