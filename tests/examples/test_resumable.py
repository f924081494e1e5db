"""Run directories, settings checks and callbacks whose state survives a restart."""

import argparse
import json
import random

import keras
import numpy as np
import pytest

from examples.harness import options
from examples.harness.run_directory import run_directory, run_settings, run_workdir
from examples.harness.training.backup import RunBackup
from examples.harness.training.best_model import BestModelCheckpoint
from examples.harness.training.learning_rate import ResumableReduceLROnPlateau
from examples.harness.training.reporting import write_metrics
from examples.harness.training.resumable import (
    check_run_settings,
    resumable_callbacks,
    resumed_epoch,
    run_history,
)


def tiny_model(learning_rate=1.0):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="mse")
    return model


def test_run_settings_leave_out_run_options():
    args = argparse.Namespace(units=8, epochs=3, verbose=0, workdir=None, data_dir=None)
    assert run_settings(args) == {"data_dir": None, "units": 8}


def test_run_directory_is_one_per_configuration():
    a = run_directory("runs", {"units": 8, "kind": "gru"}, "gru")
    assert a == run_directory("runs", {"kind": "gru", "units": 8}, "gru")
    assert a != run_directory("runs", {"kind": "gru", "units": 9}, "gru")
    assert a.startswith("runs/gru-") and len(a) == len("runs/gru-") + 8


def test_explicit_workdir_wins():
    args = argparse.Namespace(units=8, workdir="mine")
    assert run_workdir(args, "runs", "x") == "mine"
    args.workdir = None
    assert run_workdir(args, "runs", "x") == run_directory("runs", {"units": 8}, "x")


def _parser():
    parser = options.ArgumentParser()
    parser.add_argument("--units", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    return parser


def test_run_names_show_the_changed_options_and_a_digest_of_the_resolved_settings():
    parser = _parser()
    default = run_workdir(parser.parse_args([]), "runs", "gru", resolved={"learning_rate": 1e-3})
    assert len(default) == len("runs/gru-") + 8  # nothing changed: label and digest only
    argv = ["--units", "16", "--data-dir", "/data/snli_1.0/", "--epochs", "9"]
    changed = parser.parse_args(argv)
    assert vars(changed) == {
        "units": 16,
        "learning_rate": None,
        "data_dir": "/data/snli_1.0/",
        "epochs": 9,
        "workdir": None,
    }  # the defaults stay out of vars()
    fast = run_workdir(changed, "runs", "gru", resolved={"learning_rate": 3e-3})
    slow = run_workdir(changed, "runs", "gru", resolved={"learning_rate": 1e-3})
    # Readable: the options set to other values than their defaults (run options such as
    # --epochs do not define a run); the digest tells apart what an unset option resolved to.
    assert fast.startswith("runs/gru-data_dir=snli_1.0_units=16-")
    assert slow.startswith("runs/gru-data_dir=snli_1.0_units=16-") and slow != fast
    assert fast == run_workdir(
        parser.parse_args(argv), "runs", "gru", resolved={"learning_rate": 3e-3}
    )


def test_an_added_option_defines_a_run_only_when_given():
    parser = _parser()
    parser.add_argument("--pack", action="store_true")
    before = run_workdir(_parser().parse_args([]), "runs", "gru")  # the script without --pack
    args = parser.parse_args([])
    assert run_settings(args, added_options=("pack",)) == run_settings(_parser().parse_args([]))
    assert run_workdir(args, "runs", "gru", added_options=("pack",)) == before
    assert run_workdir(args, "runs", "gru") != before  # counted as any option, it would move
    given = parser.parse_args(["--pack"])
    assert run_settings(given, added_options=("pack",))["pack"] is True
    packed = run_workdir(given, "runs", "gru", added_options=("pack",))
    assert packed.startswith("runs/gru-pack=True-") and packed != before


def test_a_run_with_other_settings_is_refused(tmp_path):
    check_run_settings(str(tmp_path), {"units": 8, "kind": "gru"})
    assert json.loads((tmp_path / "settings.json").read_text()) == {"kind": "gru", "units": 8}
    check_run_settings(str(tmp_path), {"kind": "gru", "units": 8})  # the same run: resumes
    with pytest.raises(ValueError, match="units: 8 there, 9 now"):
        check_run_settings(str(tmp_path), {"units": 9, "kind": "gru"})
    # A setting recorded under another name than its option's is named as the user types it.
    with pytest.raises(
        ValueError, match="settings \\(--model: 'gru' there, 'lstm' now; --units: 8 there, 9 now\\)"
    ):
        check_run_settings(
            str(tmp_path), {"units": 9, "kind": "lstm"}, {"kind": "--model", "units": "--units"}
        )


def test_resumed_epoch(tmp_path):
    assert resumed_epoch(str(tmp_path)) == 0 and run_history(str(tmp_path)) == {}
    backup = RunBackup(tmp_path / "backup")
    backup.set_model(tiny_model())
    backup.on_epoch_end(0, {"loss": 2.0, "val_loss": 3.0})
    backup.on_epoch_end(1, {"loss": 1.0})
    assert resumed_epoch(str(tmp_path)) == 2
    assert run_history(str(tmp_path)) == {"loss": [2.0, 1.0], "val_loss": [3.0, None]}


def test_a_backup_without_random_state_is_refused(tmp_path):
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "training_metadata.json").write_text('{"epoch": 3, "batch": -1}')
    with pytest.raises(ValueError, match="BackupAndRestore, which lacks the random state"):
        resumed_epoch(str(tmp_path))


def noisy_model():
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dropout(0.5), keras.layers.Dense(3), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model


class Jitter(keras.callbacks.Callback):
    """Moves the last kernel by Python and NumPy random numbers after every epoch."""

    def on_epoch_end(self, epoch, logs=None):
        kernel = self.model.layers[-1].kernel
        noise = np.random.normal(size=kernel.shape) * random.random()
        kernel.assign(kernel.numpy() + noise.astype("float32"))


class Interrupt(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if self.model.optimizer.iterations.numpy() == 9:  # epoch 2, batch 1
            raise KeyboardInterrupt("interrupted")


def test_interrupted_fit_resumes_exactly_with_dropout_and_global_random_numbers(tmp_path):
    # Four batches per epoch; dropout masks come from the layer's seed state, and Jitter draws
    # from the global Python and NumPy generators between epochs.
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(16, 4)
    y = x.sum(axis=1, keepdims=True)

    def train(directory, callbacks=(), restart=False):
        keras.utils.set_random_seed(7)
        model = noisy_model()
        backup = RunBackup(tmp_path / directory)
        model.fit(
            x,
            y,
            batch_size=4,
            epochs=4,
            shuffle=False,
            verbose=0,
            initial_epoch=backup.epoch,
            callbacks=[Jitter(), *callbacks, backup],
        )
        return model

    straight = train("straight")
    with pytest.raises(KeyboardInterrupt):
        train("resumed", [Interrupt()])
    assert RunBackup(tmp_path / "resumed").epoch == 2
    resumed = train("resumed")
    for want, have in zip(straight.variables, resumed.variables):  # seed states included
        np.testing.assert_array_equal(have.numpy(), want.numpy(), err_msg=want.path)
    for want, have in zip(straight.optimizer.variables, resumed.optimizer.variables):
        np.testing.assert_array_equal(have.numpy(), want.numpy())
    history = json.loads((tmp_path / "straight" / "run.json").read_text())["history"]
    assert json.loads((tmp_path / "resumed" / "run.json").read_text())["history"] == history
    assert len(history) == 4


def test_fit_must_start_at_the_restored_epoch(tmp_path):
    x, y = np.zeros((4, 2), "float32"), np.zeros((4, 1), "float32")
    model = tiny_model()
    model.fit(x, y, epochs=2, verbose=0, callbacks=[RunBackup(tmp_path)])
    with pytest.raises(ValueError, match="holds 2 completed epochs: pass initial_epoch=2"):
        model.fit(x, y, epochs=3, verbose=0, callbacks=[RunBackup(tmp_path)])


def test_state_files_follow_the_backup_and_a_torn_write_is_ignored(tmp_path):
    state = tmp_path / "state.json"
    state.write_text("left over")
    backup = RunBackup(tmp_path / "backup", [state])
    assert not state.exists()  # no backup: a new run starts without callback state
    model = tiny_model()
    backup.set_model(model)
    state.write_text("after epoch 1")
    backup.on_epoch_end(0, {"loss": 1.0})
    saved = [v.numpy() for v in model.variables]
    state.write_text("after epoch 2")  # the process is killed before the epoch's backup ...
    (tmp_path / "backup" / "variables-00002.npz").write_bytes(b"torn")
    (tmp_path / "backup" / "run.json.partial").write_text('{"epoch": 2')
    model.set_weights([w + 1 for w in model.get_weights()])

    restarted = RunBackup(tmp_path / "backup", [state])  # ... and started again
    assert restarted.epoch == 1 and state.read_text() == "after epoch 1"
    restarted.set_model(model)
    restarted.on_train_begin()
    for want, have in zip(saved, model.variables):
        np.testing.assert_array_equal(have.numpy(), want)


def test_resumable_callbacks_back_up_last_with_the_callbacks_state_files(tmp_path):
    plateau = ResumableReduceLROnPlateau(str(tmp_path / "plateau.json"), monitor="loss")
    callbacks = resumable_callbacks(str(tmp_path), callbacks=[plateau])
    assert isinstance(callbacks[0], BestModelCheckpoint) and callbacks[1] is plateau
    assert isinstance(callbacks[-1], RunBackup)
    assert callbacks[-2].filepath == str(tmp_path / "last.keras")  # after the rate change
    assert callbacks[-1].state_files == [str(tmp_path / "best.json"), plateau.state_path]


def test_best_model_is_not_replaced_by_a_worse_one_after_a_restart(tmp_path):
    model = tiny_model()
    first = BestModelCheckpoint(str(tmp_path), monitor="val_accuracy", mode="max")
    first.set_model(model)
    first.on_epoch_end(0, {"val_accuracy": 0.5})
    saved = [w.numpy() for w in keras.saving.load_model(tmp_path / "best.keras").weights]

    model.set_weights([w + 1 for w in model.get_weights()])
    restarted = BestModelCheckpoint(str(tmp_path), monitor="val_accuracy", mode="max")
    restarted.set_model(model)
    restarted.on_epoch_end(1, {"val_accuracy": 0.25})  # worse: best.keras stays
    kept = [w.numpy() for w in keras.saving.load_model(tmp_path / "best.keras").weights]
    for want, have in zip(saved, kept):
        np.testing.assert_array_equal(have, want)
    restarted.on_epoch_end(2, {"val_accuracy": 0.75})  # better: replaced
    replaced = keras.saving.load_model(tmp_path / "best.keras").get_weights()
    np.testing.assert_array_equal(replaced[1], saved[1] + 1)
    assert json.loads((tmp_path / "best.json").read_text())["value"] == 0.75


def test_plateau_rule_keeps_its_best_value_across_a_restart(tmp_path):
    state = str(tmp_path / "plateau.json")
    options = dict(monitor="val_accuracy", factor=0.5, patience=0, min_delta=1e-3, mode="max")
    model = tiny_model(learning_rate=1.0)
    first = ResumableReduceLROnPlateau(state, **options)
    first.set_model(model)
    first.on_train_begin()
    first.on_epoch_end(0, {"val_accuracy": 0.5})
    restarted = ResumableReduceLROnPlateau(state, **options)
    restarted.set_model(model)
    restarted.on_train_begin()
    restarted.on_epoch_end(1, {"val_accuracy": 0.4})  # no better than before the restart
    assert float(model.optimizer.learning_rate) == 0.5


def test_metrics_file_is_replaced_whole(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    write_metrics({"epochs_run": [0]}, str(path))

    class FailingWrite:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, text):
            self.handle.write(text[:5])
            raise OSError("disk full")

    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: FailingWrite(real_open(*a, **k)))
    with pytest.raises(OSError, match="disk full"):
        write_metrics({"epochs_run": [0, 1]}, str(path))
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"epochs_run": [0]}  # the previous file, whole
