"""``python tests/training/multi_worker_job.py OUT_DIR``: a worker of the cluster ``TF_CONFIG``
names (tests/training/test_train.py starts two); writes its weights and results to
``OUT_DIR/worker-<task id>.npz`` and ``.json``."""

import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

from tf_memlayers import SlidingWindowAttention
from tf_memlayers.models import build_language_model, compile_language_model
from tf_memlayers.training import RunBackup, is_chief, make_strategy, train, worker_directory


def train_language_model(strategy, epochs=2, backup=None):
    """The window-attention language model's step (no carried states), with padding weights
    and a clipping threshold that the first steps' gradients exceed; 4 rows a global batch;
    resumed from ``backup`` if given. Returns its weights and history."""
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 30, (6, 4, 21)).astype("int32")
    weights = (rng.random((6, 4, 20)) > 0.2).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((tokens[..., :-1], tokens[..., 1:], weights))
    with strategy.scope():
        model = build_language_model(30, SlidingWindowAttention(window=3), 16, 8, stateful=False)
        compile_language_model(model, 0.01, 0.05, jit_compile=False)  # clipping at 0.05
    resume = {"initial_epoch": backup.epoch, "callbacks": [backup]} if backup else {}
    options = dict(epochs=epochs, validation_data=data.skip(4), verbose=0, **resume)
    history = train(model, data.take(4), **options).history
    return {w.path: np.asarray(w.numpy()) for w in model.weights}, history


def main(out_dir):
    from tests.support import turn_off_graph_optimizations

    turn_off_graph_optimizations()  # as the test process, whose run is compared with these
    strategy, runs = make_strategy("multi_worker"), []
    for epochs in (1, 2):  # a run stopped after one epoch, then the same run continued to two
        # Every worker waits here for the others, so the chief has written its backup.
        tf.function(lambda: strategy.reduce("SUM", strategy.run(lambda: tf.ones(())), None))()
        with worker_directory(os.path.join(out_dir, "run"), strategy) as rundir:
            backup = RunBackup(rundir)
            runs.append({"rundir": rundir, "resumed_at": backup.epoch})
            weights, _ = train_language_model(strategy, epochs=epochs, backup=backup)
    results = dict(history=backup.history, runs=runs, chief=is_chief(strategy))
    name = os.path.join(out_dir, f"worker-{json.loads(os.environ['TF_CONFIG'])['task']['index']}")
    np.savez(name, **weights)
    with open(f"{name}.json", "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(*sys.argv[1:])
