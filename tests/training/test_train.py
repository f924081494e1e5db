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
from tf_memlayers.training import train

train_module = importlib.import_module("tf_memlayers.training.train")


def test_fit_is_chosen_except_under_multi_worker_until_keras_is_fixed(monkeypatch):
    assert train_module.fit_works_under(tf.distribute.get_strategy())
    # An uninitialized instance: the type decides (a real one would set up collectives).
    multi = object.__new__(tf.distribute.MultiWorkerMirroredStrategy)
    assert train_module.KERAS_FIT_FIXED_IN is None
    assert not train_module.fit_works_under(multi)
    monkeypatch.setattr(train_module, "KERAS_FIT_FIXED_IN", "3.16.0")
    assert not train_module.fit_works_under(multi, keras_version="3.15.1")
    assert train_module.fit_works_under(multi, keras_version="3.16.0")


def test_arguments_are_checked():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    data = tf.data.Dataset.from_tensor_slices((np.ones((2, 2)), np.ones((2, 1)))).batch(2)
    with pytest.raises(ValueError, match="`model` must be a compiled keras.Model"):
        train(model, data)
    model.compile("sgd", "mse")
    with pytest.raises(TypeError, match="`x` must be a tf.data.Dataset .* got ndarray"):
        train(model, np.ones((2, 2)))
    with pytest.raises(ValueError, match="`epochs` must be >= 1, got 0"):
        train(model, data, epochs=0)


def assert_same_weights(workers, single):
    """Every worker holds exactly the first one's weights, equal to float rounding to
    ``single``'s (in the order of ``model.weights``)."""
    for other in workers[1:]:
        for path, value in other.items():
            np.testing.assert_array_equal(value, workers[0][path], err_msg=path)
    assert len(workers[0]) == len(single)
    for (path, got), value in zip(workers[0].items(), single.values()):
        np.testing.assert_allclose(got, value, rtol=1e-5, atol=1e-6, err_msg=path)


def test_two_workers_train_as_one_process(tmp_path, subtests):
    """Two workers on local ports train the language model's step and a `HeapCacheModel`
    (stopped after an epoch and resumed) while this process trains them on the same global
    batches; they end with identical weights, equal to this process's."""
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("localhost", 0))
            ports.append(sock.getsockname()[1])
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    workers = [
        subprocess.Popen(
            [sys.executable, multi_worker_job.__file__, str(tmp_path)],
            env=dict(
                os.environ,
                TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                CUDA_VISIBLE_DEVICES="",
                TF_CPP_MIN_LOG_LEVEL="3",
                PYTHONPATH=str(REPO_ROOT),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    try:
        strategy = tf.distribute.get_strategy()
        language_model = multi_worker_job.train_language_model(strategy)
        keras.backend.clear_session()
        cache = multi_worker_job.train_cache_model(strategy, epochs=2)
    finally:
        outputs = [worker.communicate(timeout=900)[0] for worker in workers]
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-6000:]

    def results(job):
        found = []
        for i in range(2):
            with np.load(tmp_path / f"{job}-{i}.npz") as arrays:
                found.append((dict(arrays), json.loads((tmp_path / f"{job}-{i}.json").read_text())))
        return [w for w, _ in found], [r for _, r in found]

    with subtests.test("language model"):  # the workers clip the summed gradient as one process
        weights, logs = results("lm")
        assert_same_weights(weights, language_model[0])
        for got in logs:
            for name, values in language_model[1]["history"].items():
                np.testing.assert_allclose(got["history"][name], values, rtol=1e-5, err_msg=name)
    with subtests.test("cache model, resumed"):
        weights, logs = results("cache")
        assert_same_weights(weights, cache[0])
        assert "cache/cache" in cache[0] and np.abs(cache[0]["cache/cache"]).sum() > 0
        assert [got["chief"] for got in logs] == [True, False]
        for got in logs:
            assert got["fill"] == cache[1]["fill"] == 8
            assert [run["resumed_at"] for run in got["runs"]] == [0, 1]
            for name, values in cache[1]["history"].items():
                np.testing.assert_allclose(got["history"][name], values, rtol=1e-5, err_msg=name)
        # The chief writes the run directory; the other worker a temporary copy, removed after.
        assert {run["rundir"] for run in logs[0]["runs"]} == {str(tmp_path / "run")}
        for run in logs[1]["runs"]:
            assert run["rundir"] != str(tmp_path / "run") and not os.path.exists(run["rundir"])
