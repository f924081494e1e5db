"""Each example killed with SIGKILL inside its last epoch and run again ends exactly where an
uninterrupted run ends: the same weights, optimizer state and metrics (the whole run's history
included), with the examples' default options (dropout, shuffling, cache, carried states)."""

import importlib.util
import json
import os
import signal
import subprocess
import sys

import keras
import numpy as np

from tests.examples.test_fill_last_word_example import TINY as FILL_TINY
from tests.examples.test_fill_last_word_example import (
    CacheAtEpochBegin,
    assert_generated_run_reports,
)
from tests.examples.test_ptb_example import TINY as PTB_TINY
from tests.support import REPO_ROOT

# Values that describe the process rather than what the run computed.
PROCESS_FIELDS = {"seconds", "workdir", "epochs_run_now"}

# Runs an example in a new process and kills it with SIGKILL (no clean-up of any kind) at the
# end of the middle batch of its last epoch. argv[1]: the script, argv[2]: "main" or "run"
# (its function that takes extra callbacks), argv[3]: the script's arguments as JSON. Without
# TensorFlow's graph optimiser, as in the tests' own process (tests/conftest.py): the resumed
# run continues from this process's weights, and must end where the straight run ends.
KILLER = """
import importlib.util, json, os, signal, sys
import keras
from tests.support import turn_off_graph_optimizations

turn_off_graph_optimizations()

spec = importlib.util.spec_from_file_location("example", sys.argv[1])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


class KillInLastEpoch(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == self.params["epochs"] - 1 and batch == self.params["steps"] // 2:
            os.kill(os.getpid(), signal.SIGKILL)


argv = json.loads(sys.argv[3])
if sys.argv[2] == "run":
    example.run(example.parse_args(argv), extra_callbacks=[KillInLastEpoch()])
else:
    example.main(argv, extra_callbacks=[KillInLastEpoch()])
"""


def _load(script):
    spec = importlib.util.spec_from_file_location(script, REPO_ROOT / "examples" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _EpochCounter(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


def _straight_killed_resumed(
    tmp_path, script, entry, argv, straight_callbacks=(), resumed_callbacks=()
):
    """Runs ``argv`` uninterrupted (here, while a new process runs it in ``resumed`` until it
    is killed), then runs it again in ``resumed``, each run in this process with its extra
    callbacks. Returns both metrics and the epochs that the second run of ``resumed``
    trained."""
    example = _load(script)

    def call(workdir, callbacks=()):
        keras.backend.clear_session()
        args = [*argv, "--workdir", str(tmp_path / workdir)]
        if entry == "run":
            return example.run(example.parse_args(args), extra_callbacks=list(callbacks))
        return example.main(args, extra_callbacks=list(callbacks))

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    killed_args = [*argv, "--workdir", str(tmp_path / "resumed")]
    with open(tmp_path / "killed.log", "w") as log:
        killed = subprocess.Popen(
            [
                sys.executable,
                "-c",
                KILLER,
                str(REPO_ROOT / "examples" / f"{script}.py"),
                entry,
                json.dumps(killed_args),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            straight = call("straight", straight_callbacks)
        finally:
            returncode = killed.wait(timeout=900)
    assert returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    counter = _EpochCounter()
    resumed = call("resumed", [counter, *resumed_callbacks])
    return straight, resumed, counter.epochs


def _saved_state(path):
    """Weights and optimizer variables of a saved model, by position (the names of nested
    layers depend on what the process made before)."""
    model = keras.saving.load_model(path)
    state = {f"model/{i}/{v.name}": v.numpy() for i, v in enumerate(model.weights)}
    state.update({f"optimizer/{i}": v.numpy() for i, v in enumerate(model.optimizer.variables)})
    return state


def _assert_same_run(straight, resumed, tmp_path):
    def computed(metrics):
        plain = json.loads(json.dumps(metrics))
        return {k: v for k, v in plain.items() if k not in PROCESS_FIELDS}

    assert computed(resumed) == computed(straight)
    for name in ("last.keras", "best.keras"):
        expected = _saved_state(tmp_path / "straight" / name)
        got = _saved_state(tmp_path / "resumed" / name)
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name}: {key}")


def test_fill_last_word_killed_in_its_last_epoch_resumes_exactly(tmp_path):
    # A training set reshuffled every epoch and a heap cache written by every training step.
    argv = [*FILL_TINY, "--max-length", "12", "--epochs", "2"]
    straight_caches, resumed_caches = CacheAtEpochBegin(), CacheAtEpochBegin()
    straight, resumed, epochs = _straight_killed_resumed(
        tmp_path, "fill_last_word_cache", "main", argv, [straight_caches], [resumed_caches]
    )
    assert epochs == [1]
    assert resumed["epochs_run"] == [0, 1] and len(resumed["val_accuracy"]) == 2
    # The resumed run starts its epoch from the cache the first epoch left.
    assert np.any(resumed_caches.caches[1] != 0)
    np.testing.assert_array_equal(resumed_caches.caches[1], straight_caches.caches[1])
    _assert_same_run(straight, resumed, tmp_path)
    # What the run reports and logs, on the run that was never interrupted.
    assert_generated_run_reports(
        tmp_path / "straight", straight, _load("fill_last_word_cache").parse_args(argv)
    )


def test_ptb_killed_in_its_last_epoch_resumes_exactly(tmp_path):
    # The default attention model with dropout, carried states and document resets.
    argv = [*PTB_TINY, "--dropout", "0.3", "--epochs", "2"]
    straight, resumed, epochs = _straight_killed_resumed(tmp_path, "ptb_memory_lm", "run", argv)
    assert epochs == [1] and resumed["epochs_run_now"] == 1
    assert resumed["epochs_run"] == [0, 1] and len(resumed["history"]["val_loss"]) == 2
    _assert_same_run(straight, resumed, tmp_path)
