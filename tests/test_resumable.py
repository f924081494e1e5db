"""Run directories, settings checks and callbacks whose state survives a restart."""

import argparse
import json

import keras
import numpy as np
import pytest

from tf_memlayers.training.resumable import (
    BestModelCheckpoint,
    ResumableReduceLROnPlateau,
    check_run_settings,
    resumed_epoch,
    run_directory,
    run_settings,
    run_workdir,
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


def test_a_run_with_other_settings_is_refused(tmp_path):
    check_run_settings(str(tmp_path), {"units": 8, "kind": "gru"})
    assert json.loads((tmp_path / "settings.json").read_text()) == {"kind": "gru", "units": 8}
    check_run_settings(str(tmp_path), {"kind": "gru", "units": 8})  # the same run: resumes
    with pytest.raises(ValueError, match="units: 8 there, 9 now"):
        check_run_settings(str(tmp_path), {"units": 9, "kind": "gru"})


def test_resumed_epoch(tmp_path):
    assert resumed_epoch(str(tmp_path)) == 0
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "training_metadata.json").write_text('{"epoch": 3, "batch": -1}')
    assert resumed_epoch(str(tmp_path)) == 3


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
