"""Training on several workers: `--strategy multi_worker` (tf.distribute.MultiWorkerMirroredStrategy
from TF_CONFIG) through the custom loop of examples.harness.training.distributed.

Two worker processes on localhost ports, on CPU, train tiny models; both must end with the same
weights, equal to float rounding to one process trained on the same global batches.
"""

import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from examples.harness import options
from examples.harness.training import distributed
from examples.harness.training.strategy import STRATEGIES
from tests import multi_worker_models as models
from tests.examples.test_ptb_example import TINY as PTB_TINY
from tests.multi_worker_job import load_example
from tests.support import REPO_ROOT

JOB = REPO_ROOT / "tests" / "multi_worker_job.py"
WORKERS = 2


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def start_workers(out_dir, jobs, count=WORKERS):
    """Starts ``tests/multi_worker_job.py out_dir jobs`` on ``count`` local workers (``jobs``
    maps each job to its arguments), and returns their processes."""
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(count)]}
    processes = []
    for index in range(count):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(
            os.environ,
            TF_CONFIG=json.dumps(config),
            CUDA_VISIBLE_DEVICES="",
            TF_CPP_MIN_LOG_LEVEL="3",
            PYTHONPATH=str(REPO_ROOT),
        )
        processes.append(
            subprocess.Popen(
                [sys.executable, str(JOB), str(out_dir), json.dumps(jobs)],
                env=env,
                cwd=str(out_dir),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return processes


def wait_for_workers(processes, timeout=900):
    """Waits for the workers of `start_workers`, and fails with a worker's output if it failed
    (it kills those still running after ``timeout`` seconds)."""
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=timeout)[0])
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    for index, (process, output) in enumerate(zip(processes, outputs)):
        assert process.returncode == 0, f"worker {index} failed:\n{output[-6000:]}"


def worker_results(out_dir, job, count=WORKERS):
    """Each worker's ``(weights, results)``."""
    found = []
    for index in range(count):
        with np.load(os.path.join(out_dir, f"{job}-{index}.npz")) as arrays:
            weights = dict(arrays)
        with open(os.path.join(out_dir, f"{job}-{index}.json"), encoding="utf-8") as handle:
            found.append((weights, json.load(handle)))
    return found


def assert_same_weights(workers, single, rtol=1e-5, atol=1e-6):
    """Every worker holds exactly the first one's weights, which match ``single``'s (in the
    order of ``model.weights``: a process that built several models numbers their layers on)."""
    first = list(workers[0].values())
    for other in workers[1:]:
        assert len(other) == len(first)
        for path, got, value in zip(other, other.values(), first):
            np.testing.assert_array_equal(got, value, err_msg=path)
    assert len(first) == len(single)
    for (path, value), got in zip(single.items(), first):
        assert got.shape == value.shape, path
        np.testing.assert_allclose(got, value, rtol=rtol, atol=atol, err_msg=path)


# -- the choice between fit and the custom loop (no workers needed) -----------------------------


def test_multi_worker_is_a_strategy_option():
    assert "multi_worker" in STRATEGIES
    parser = options.ArgumentParser(prog="train.py")
    options.add_option(parser, "strategy", default="auto")
    assert parser.parse_args(["--strategy", "multi_worker"]).strategy == "multi_worker"
    assert "multi_worker" in parser.format_help() and "TF_CONFIG" in parser.format_help()


def test_fit_is_chosen_except_under_multi_worker_until_keras_is_fixed(monkeypatch):
    assert distributed.fit_works_under(tf.distribute.get_strategy())
    assert distributed.is_chief(tf.distribute.get_strategy())
    # An uninitialized instance: the type is what decides (a real one would set up collectives).
    multi = object.__new__(tf.distribute.MultiWorkerMirroredStrategy)
    assert distributed.is_multi_worker(multi)
    assert distributed.KERAS_FIT_FIXED_IN is None
    assert not distributed.fit_works_under(multi)
    monkeypatch.setattr(distributed, "KERAS_FIT_FIXED_IN", "3.16.0")
    assert not distributed.fit_works_under(multi, keras_version="3.15.1")
    assert distributed.fit_works_under(multi, keras_version="3.16.0")


def test_custom_loop_in_one_process_matches_fit():
    """The loop's logs and weights equal fit's (a HeapCacheModel: sparse embedding
    gradients, the cache write after each update, an accuracy metric)."""
    strategy = tf.distribute.get_strategy()
    expected, expected_results = models.train_cache_model(strategy)
    keras.backend.clear_session()
    original = models.train
    try:
        models.train = distributed.train_with_custom_loop
        got, results = models.train_cache_model(strategy)
    finally:
        models.train = original
    assert_same_weights([got], expected)
    for name, values in expected_results["history"].items():
        np.testing.assert_allclose(results["history"][name], values, rtol=1e-6, err_msg=name)


def test_worker_directory_is_the_workdir_on_the_chief(tmp_path):
    with distributed.worker_directory(tmp_path / "run") as rundir:
        assert rundir == str(tmp_path / "run")


# -- two workers --------------------------------------------------------------------------------


def _temporary_worker_dirs():
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "tf_memlayers-worker-*")))


FILL_TINY = [
    "--epochs",
    "1",
    "--embedding-dim",
    "6",
    "--units",
    "8",
    "--attention-units",
    "4",
    "--cache-size",
    "16",
    "--episodes",
    "2",
    "--houses",
    "4",
    "--max-length",
    "12",
    "--verbose",
    "0",
    "--no-jit",
]


class _KeepWeights(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        self.weights = models.weights_of(self.model)


def _one_process_example(script, argv, workdir):
    """``script``'s example run in this process: its metrics and the weights it ended with."""
    keras.backend.clear_session()
    keep = _KeepWeights()
    metrics = load_example(script).main([*argv, "--workdir", str(workdir)], extra_callbacks=[keep])
    return metrics, keep.weights


def test_two_workers_train_as_one_process(tmp_path, subtests):
    """One launch of two workers runs every job: the last-word example and the PTB example
    (refused). While they train, this process trains the same models on the same global
    batches; then each job is checked against them. (The package's models on two workers:
    tests/training/test_train.py.)"""
    out_dir = tmp_path / "two_workers"
    out_dir.mkdir()
    before = _temporary_worker_dirs()
    jobs = {
        "fill": [*FILL_TINY, "--strategy", "multi_worker", "--workdir", str(out_dir / "fill")],
        "ptb": [*PTB_TINY, "--strategy", "multi_worker", "--workdir", str(out_dir / "ptb")],
    }
    processes = start_workers(out_dir, jobs)
    try:
        fill = _one_process_example(
            "fill_last_word_cache", [*FILL_TINY, "--strategy", "default"], tmp_path / "fill"
        )
    finally:
        wait_for_workers(processes)
    left_behind = _temporary_worker_dirs() - before

    with subtests.test("the workers leave no temporary folders"):
        _check_no_temporary_folders(left_behind)
    with subtests.test("the language-model example refuses several workers"):
        for _, results in worker_results(out_dir, "ptb"):
            refusal = results["refusal"]
            assert refusal and "per-row states" in refusal and "2 replicas" in refusal
    with subtests.test("fill"):
        _check_fill(out_dir, *fill)


def _check_no_temporary_folders(left_behind):
    # The other workers write their checkpoints and logs to temporary copies, then delete them.
    # On a loaded machine such a folder was once still listed right after the workers exited
    # and gone moments later; a folder that is still there after a grace period is a leak.
    deadline = time.monotonic() + 30
    while any(os.path.exists(folder) for folder in left_behind) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [folder for folder in left_behind if os.path.exists(folder)]


def _check_fill(out_dir, single, single_weights):
    """Episodes of facts then questions: each global batch split between the workers, the
    caches written with the whole batch's states, validation with the facts written first."""
    assert (out_dir / "fill" / "metrics.json").is_file()
    workers = worker_results(out_dir, "fill")
    assert_same_weights([w for w, _ in workers], single_weights)
    assert any(
        "cache" in path and np.abs(value).sum() > 0 for path, value in single_weights.items()
    )
    for _, metrics in workers:
        for name, values in single["history"].items():
            np.testing.assert_allclose(metrics["history"][name], values, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(metrics["eval_accuracy"], single["eval_accuracy"], rtol=1e-6)
        np.testing.assert_allclose(metrics["eval_loss"], single["eval_loss"], rtol=1e-5)
