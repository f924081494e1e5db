import importlib
import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import REPO_ROOT
from tests.training import multi_worker_job
from tf_memlayers.training import RunBackup, evaluate, is_chief, train

train_module = importlib.import_module("tf_memlayers.training.train")


def test_fit_is_chosen_except_under_multi_worker_and_arguments_are_checked(monkeypatch, tmp_path):
    assert train_module.fit_works_under(tf.distribute.get_strategy())
    # An uninitialized instance: the type decides (a real one would set up collectives).
    multi = object.__new__(tf.distribute.MultiWorkerMirroredStrategy)
    assert train_module.KERAS_FIT_FIXED_IN is None and not train_module.fit_works_under(multi)
    monkeypatch.setattr(train_module, "KERAS_FIT_FIXED_IN", "3.16.0")
    assert not train_module.fit_works_under(multi, keras_version="3.15.1")
    assert train_module.fit_works_under(multi, keras_version="3.16.0")
    # The arguments are checked.
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    data = tf.data.Dataset.from_tensor_slices((np.ones((2, 2)), np.ones((2, 1)))).batch(2)
    pytest.raises(ValueError, train, model, data).match("`model` must be a compiled keras.Model")
    model.compile("sgd", "mse")
    with pytest.raises(TypeError, match="`x` must be a tf.data.Dataset .* got ndarray"):
        train(model, np.ones((2, 2)))
    pytest.raises(ValueError, train, model, data, epochs=0).match("`epochs` must be >= 1, got 0")
    pytest.raises(TypeError, train, "model", data).match("^train: `model` must be a compiled")
    for call in (train, evaluate):  # a name is make_strategy's; each names itself
        pytest.raises(TypeError, call, model, data, strategy="mirrored").match("`strategy` must")
        pytest.raises(ValueError, call, model, data, verbose=5).match(f"^{call.__name__}: `verb")
    pytest.raises(TypeError, is_chief, "mirrored").match("^is_chief: `strategy` must be a tf.dis")
    arrays = (np.ones((2, 2)), np.ones((2, 1)))  # fit's form, which the multi-worker loop lacks
    pytest.raises(TypeError, train, model, data, validation_data=arrays).match("got tuple")
    for bad, name in ((1, "`callbacks` must be a list"), ([1], r"`callbacks\[0\]` must be")):
        pytest.raises(TypeError, train, model, data, callbacks=bad).match(name)
    assert len(train(model, data, callbacks=None, verbose=0).history["loss"]) == 1  # as `fit`
    assert evaluate(model, data, callbacks=None) and RunBackup(tmp_path, None).callbacks == []


def test_a_run_an_early_stop_ended_trains_no_further_epoch_when_started_again(tmp_path):
    data = tf.data.Dataset.from_tensor_slices((np.ones((4, 2)), np.zeros((4, 1)))).batch(2)
    for start in range(2):  # the second start finds the stopped run in the backup
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        stop = keras.callbacks.EarlyStopping("loss", min_delta=1e9, patience=0)
        backup = RunBackup(tmp_path, [stop])
        train(model, data, epochs=5, initial_epoch=backup.epoch, callbacks=[stop, backup])
        if not start:
            first = backup.history
    assert backup.stopped and backup.epoch == 2 and backup.history == first


@pytest.mark.slow
def test_two_workers_train_as_one_process(tmp_path):
    """Two workers on local ports train the language model's step (stopped after an epoch and
    resumed) while this process trains it on the same global batches; they end with identical
    weights, equal to this process's. (A `HeapCacheModel` on two workers, its caches written
    alike: examples/fill_last_word/main_test.py.)"""
    sockets = [socket.socket() for _ in range(2)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    cluster = {"worker": [f"localhost:{sock.getsockname()[1]}" for sock in sockets]}
    for sock in sockets:
        sock.close()

    def start(index):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env = dict(os.environ, TF_CONFIG=config, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
        command = [sys.executable, multi_worker_job.__file__, str(tmp_path)]
        env["PYTHONPATH"] = str(REPO_ROOT)
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    workers = [start(0), start(1)]
    try:
        weights, history = multi_worker_job.train_language_model(tf.distribute.get_strategy())
    finally:
        outputs = [worker.communicate(timeout=900)[0] for worker in workers]
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-6000:].decode()
    found = []
    for i in range(2):
        with np.load(tmp_path / f"worker-{i}.npz") as arrays:
            found.append((dict(arrays), json.loads((tmp_path / f"worker-{i}.json").read_text())))
    # The workers clip the summed gradient as one process.
    assert len(found[0][0]) == len(weights)  # (the resumed run's layer names have suffixes)
    for (path, value), expected in zip(found[0][0].items(), weights.values()):
        np.testing.assert_array_equal(found[1][0][path], value, err_msg=path)
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=path)
    for _, logs in found:
        for name, values in history.items():
            np.testing.assert_allclose(logs["history"][name], values, rtol=1e-5, err_msg=name)
    # The chief, the other worker's directory, the resumed run.
    chief, other = (logs for _, logs in found)
    assert chief["chief"] and not other["chief"]
    assert [run["resumed_at"] for run in chief["runs"] + other["runs"]] == [0, 1, 0, 1]
    # The chief writes the run directory; the other worker a temporary copy, removed after.
    assert {run["rundir"] for run in chief["runs"]} == {str(tmp_path / "run")}
    for run in other["runs"]:
        assert run["rundir"] != str(tmp_path / "run") and not os.path.exists(run["rundir"])
