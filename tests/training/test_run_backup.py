import json
import random

import keras
import numpy as np
import pytest

from tf_memlayers.training import RunBackup


def tiny_model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    return model


def test_interrupted_fit_resumes_exactly_with_dropout_and_global_random_numbers(tmp_path):
    # Four batches per epoch; the dropout masks come from the layer's seed state, the kernel
    # moves by Python's and NumPy's random numbers after each epoch, and the plateau rule
    # halves the rate after each epoch but the first (its best value and counter must survive).
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(16, 4)

    def run(directory, interrupt=False):
        keras.utils.set_random_seed(7)
        dense = keras.layers.Dense(1)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.5), dense])
        model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")

        def jitter(epoch, logs):
            noise = np.random.normal(size=(4, 1)) * random.random()
            dense.kernel.assign_add(noise.astype("float32"))

        def kill(batch, logs):
            if interrupt and model.optimizer.iterations == 9:  # in epoch 2, at batch 1
                raise KeyboardInterrupt

        plateau = keras.callbacks.ReduceLROnPlateau("loss", 0.5, patience=1, min_delta=10)
        backup = RunBackup(tmp_path / directory, [plateau])
        lambdas = keras.callbacks.LambdaCallback(on_epoch_end=jitter, on_train_batch_begin=kill)
        fit = dict(batch_size=4, shuffle=False, verbose=0, callbacks=[lambdas, plateau, backup])
        model.fit(x, x.sum(axis=1), epochs=4, initial_epoch=backup.epoch, **fit)
        return model, backup

    straight, backup = run("straight")
    pytest.raises(KeyboardInterrupt, run, "resumed", interrupt=True)
    assert RunBackup(tmp_path / "resumed").epoch == 2
    resumed, resumed_backup = run("resumed")
    variables = [model.variables + model.optimizer.variables for model in (straight, resumed)]
    for want, have in zip(*variables):
        np.testing.assert_array_equal(have.numpy(), want.numpy(), err_msg=want.path)
    assert resumed_backup.history == backup.history
    np.testing.assert_allclose(backup.history["learning_rate"], [0.05, 0.05, 0.025, 0.0125])


def test_a_torn_write_is_ignored(tmp_path):
    model, backup = tiny_model(), RunBackup(tmp_path)
    backup.set_model(model)
    backup.on_epoch_end(0, {"loss": 2.0, "val_loss": 3.0})
    backup.on_epoch_end(1, {"loss": 1.0})
    saved = model.get_weights()
    # The process is killed while writing the third epoch's backup, and started again.
    (tmp_path / "variables-00003.npz").write_bytes(b"torn")
    (tmp_path / "run.json.partial").write_text('{"epoch": 3')
    model.set_weights([w + 1 for w in saved])
    restarted = RunBackup(tmp_path)
    assert restarted.epoch == 2
    assert restarted.history == {"loss": [2.0, 1.0], "val_loss": [3.0, None]}
    restarted.set_model(model)
    restarted.on_train_begin()
    for want, have in zip(saved, model.get_weights()):
        np.testing.assert_array_equal(have, want)
    restarted.on_epoch_end(1, {"loss": 0.5})  # an epoch run again replaces its record
    assert restarted.history == {"loss": [2.0, 0.5], "val_loss": [3.0, None]}


def test_other_runs_backups_and_callbacks_are_refused(tmp_path):
    RunBackup(tmp_path, settings={"units": 8, "kind": "gru", "path": tmp_path})
    assert json.loads((tmp_path / "settings.json").read_text())["units"] == 8
    RunBackup(tmp_path, settings={"kind": "gru", "units": 8, "path": tmp_path})  # resumes
    with pytest.raises(ValueError, match=r"\(kind: 'gru' there, 'lstm' now; units: 8 there, 9"):
        RunBackup(tmp_path, settings={"units": 9, "kind": "lstm", "path": tmp_path})
    with pytest.raises(ValueError, match="kind: 'gru' there, None now"):  # a setting dropped
        RunBackup(tmp_path, settings={"units": 8, "path": tmp_path})
    with pytest.raises(TypeError, match="`settings` must be a dict or None, got 3"):
        RunBackup(tmp_path, settings=3)
    with pytest.raises(TypeError, match="needs no backup"):
        RunBackup(tmp_path, [keras.callbacks.LearningRateScheduler(lambda epoch: 1.0)])
    model, x = tiny_model(), np.zeros((4, 2))
    model.fit(x, x[:, :1], epochs=2, verbose=0, callbacks=[RunBackup(tmp_path)])
    with pytest.raises(ValueError, match="holds 2 completed epochs: pass initial_epoch=2"):
        model.fit(x, x[:, :1], epochs=3, verbose=0, callbacks=[RunBackup(tmp_path)])
    stop = keras.callbacks.EarlyStopping()
    with pytest.raises(ValueError, match=r"callbacks \[\]; this RunBackup was given \['Early"):
        callbacks = [stop, RunBackup(tmp_path, [stop])]
        model.fit(x, x[:, :1], epochs=3, initial_epoch=2, verbose=0, callbacks=callbacks)
    (tmp_path / "run.json").write_text('{"format": 1, "epoch": 3}')
    with pytest.raises(ValueError, match="has format 1; .* reads format 2, so .*: delete that dir"):
        RunBackup(tmp_path)
    (tmp_path / "keras").mkdir()
    (tmp_path / "keras" / "training_metadata.json").write_text('{"epoch": 3, "batch": -1}')
    with pytest.raises(ValueError, match="BackupAndRestore, which lacks the random states"):
        RunBackup(tmp_path / "keras")


def test_callbacks_keep_their_state_across_a_restart(tmp_path):
    """The best model is not replaced by a worse one after a restart, and the plateau rule and
    early stopping remember their best value (new callbacks, restored by the backup)."""
    model = tiny_model()
    acc = dict(monitor="val_accuracy", mode="max")  # what the three callbacks watch

    def restarted():
        best = keras.callbacks.ModelCheckpoint(tmp_path / "best.keras", save_best_only=True, **acc)
        plateau = keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=0, **acc)
        stop = keras.callbacks.EarlyStopping(patience=5, restore_best_weights=True, **acc)
        callbacks = [best, plateau, stop, RunBackup(tmp_path / "backup", [best, plateau, stop])]
        callbacks = keras.callbacks.CallbackList(callbacks, model=model)
        callbacks.on_train_begin()
        return callbacks, stop

    callbacks, _ = restarted()
    callbacks.on_epoch_end(0, {"val_accuracy": 0.5})
    saved = model.get_weights()
    callbacks, stop = restarted()
    assert stop.best == 0.5 and stop.wait == 0
    for want, have in zip(saved + saved, stop.best_weights + model.get_weights()):
        np.testing.assert_array_equal(have, want)
    model.set_weights([w + 1 for w in saved])
    callbacks.on_epoch_end(1, {"val_accuracy": 0.4})  # worse: best.keras stays, rate halved
    for want, have in zip(saved, keras.saving.load_model(tmp_path / "best.keras").get_weights()):
        np.testing.assert_array_equal(have, want)
    assert float(model.optimizer.learning_rate) == 0.5
    callbacks.on_epoch_end(2, {"val_accuracy": 0.75})  # better: replaced
    replaced = keras.saving.load_model(tmp_path / "best.keras").get_weights()
    np.testing.assert_array_equal(replaced[1], saved[1] + 1)
