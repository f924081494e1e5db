"""Callbacks that make a `model.fit` run survive interruption."""

import os

import keras


def resumable_callbacks(workdir, monitor="val_loss", mode="min", save_freq="epoch"):
    """Returns callbacks that back up and restore a training run under ``workdir``.

    `keras.callbacks.BackupAndRestore` saves model weights (including non-trainable state such
    as caches and memories), the optimizer and the epoch counter, and restores them when the
    same command is run again after an interruption. A `ModelCheckpoint` keeps the best model
    as ``workdir/best.keras`` and the latest as ``workdir/last.keras``.

    Args:
        workdir: directory for the backup and the saved models.
        monitor: metric that decides the best model.
        mode: `"min"` or `"max"` for ``monitor``.
        save_freq: `"epoch"` or a number of batches between backups.
    """
    os.makedirs(workdir, exist_ok=True)
    return [
        keras.callbacks.BackupAndRestore(
            os.path.join(workdir, "backup"), save_freq=save_freq, delete_checkpoint=False
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(workdir, "best.keras"), monitor=monitor, mode=mode, save_best_only=True
        ),
        keras.callbacks.ModelCheckpoint(os.path.join(workdir, "last.keras")),
    ]
