"""One worker of a local multi-worker run (tests/test_multi_worker.py starts several).

    python tests/multi_worker_job.py OUT_DIR JOBS

``TF_CONFIG`` names the cluster and this worker's task. JOBS is a JSON object of jobs, run in
its order, each with its command-line arguments: ``ptb`` (the PTB example, which must refuse
several workers, tests/multi_worker_models.py) or ``fill`` (the last-word example). One launch
runs them all: each worker process and its cluster are set up once. The worker writes
``OUT_DIR/<job>-<task id>.npz`` (the model's weights after training, by variable path) and
``OUT_DIR/<job>-<task id>.json`` (its results).
"""

import importlib.util
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tests.support import turn_off_graph_optimizations  # noqa: E402

# Without TensorFlow's graph optimiser, as the test process that compares its one-process runs
# with this worker's (tests/conftest.py).
turn_off_graph_optimizations()

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_weights(model):
    """``{variable path: value}`` of every variable of ``model``'s layers."""
    return {w.path: np.asarray(w.numpy()) for w in model.weights}


class KeepWeights(keras.callbacks.Callback):
    """Keeps the model's weights at the end of training, and the epochs it ran."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(epoch)

    def on_train_end(self, logs=None):
        self.weights = model_weights(self.model)


def task_id():
    return json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0)


def save(out_dir, job, weights, results):
    name = os.path.join(out_dir, f"{job}-{task_id()}")
    np.savez(name + ".npz", **weights)
    with open(name + ".json", "w", encoding="utf-8") as handle:
        json.dump(results, handle)


def main(out_dir, jobs):
    for job, argv in json.loads(jobs).items():
        if job == "fill":
            # The last-word example with its heap cache and episodes (global batches as given).
            keep = KeepWeights()
            metrics = load_example("fill_last_word_cache").main(list(argv), extra_callbacks=[keep])
            save(out_dir, job, keep.weights, metrics)
        else:
            from tests.multi_worker_models import JOBS

            weights, results = JOBS[job](*argv)
            save(out_dir, job, weights, results)


if __name__ == "__main__":
    main(*sys.argv[1:])
