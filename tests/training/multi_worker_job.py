"""``python tests/training/multi_worker_job.py OUT_DIR``: a worker of the cluster ``TF_CONFIG``
names (tests/training/test_train.py starts two); writes its weights and results to
``OUT_DIR/worker-<task id>.npz`` and ``.json``."""

import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

from tf_memlayers import AttentionPooling, HeapCacheAttention, SlidingWindowAttention
from tf_memlayers.models import HeapCacheModel, build_language_model, compile_language_model
from tf_memlayers.training import RunBackup, is_chief, make_strategy, train, worker_directory


def weights_of(model):
    return {w.path: np.asarray(w.numpy()) for w in model.weights}


def train_language_model(strategy, train_function=train):
    """The window-attention language model's step (no carried states), with padding weights
    and a clipping threshold that the first steps' gradients exceed; 4 rows a global batch."""
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 30, (6, 4, 21)).astype("int32")
    weights = (rng.random((6, 4, 20)) > 0.2).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((tokens[..., :-1], tokens[..., 1:], weights))
    with strategy.scope():
        model = build_language_model(30, SlidingWindowAttention(window=3), 16, 8, stateful=False)
        compile_language_model(model, 0.01, 0.05, jit_compile=False)  # clipping at 0.05
    history = train_function(model, data.take(4), epochs=2, validation_data=data.skip(4), verbose=0)
    return weights_of(model), {"history": history.history}


def train_cache_model(strategy, train_function=train, epochs=1, backup=None):
    """A `HeapCacheModel` (GRU, `AttentionPooling`, `HeapCacheAttention`): its cache is written
    after every step with the global batch's states; resumed from ``backup`` if given."""
    keras.utils.set_random_seed(11)
    with strategy.scope():
        tokens = keras.Input((6,), dtype="int32")
        states = keras.layers.GRU(8, return_sequences=True)(keras.layers.Embedding(20, 8)(tokens))
        state = HeapCacheAttention(cache_size=8, attention_units=4, name="cache")(
            AttentionPooling(4)(states)
        )
        model = HeapCacheModel(tokens, keras.layers.Dense(20)(state))
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        # An object, not "accuracy": its variables exist before the train step is traced.
        accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        model.compile(keras.optimizers.Adam(0.01), loss, metrics=[accuracy], jit_compile=False)
    x = np.random.default_rng(3).integers(1, 20, (32, 6)).astype("int32")
    data = tf.data.Dataset.from_tensor_slices((x, x[:, -1])).batch(8)
    resume = {"initial_epoch": backup.epoch, "callbacks": [backup]} if backup else {}
    history = train_function(model, data, epochs=epochs, verbose=0, **resume)
    fill = int(np.asarray(model.get_layer("cache").fill_count()))
    return weights_of(model), {"history": history.history, "fill": fill}


def main(out_dir):
    from tests.support import turn_off_graph_optimizations

    turn_off_graph_optimizations()  # as the test process, whose runs are compared with these
    strategy = make_strategy("multi_worker")
    weights, results = {}, {}
    weights["lm"], results["lm"] = train_language_model(strategy)
    runs = []
    for epochs in (1, 2):  # a run stopped after one epoch, then the same run continued to two
        # Every worker waits here for the others, so the chief has written its backup.
        tf.function(lambda: strategy.reduce("SUM", strategy.run(lambda: tf.ones(())), None))()
        with worker_directory(os.path.join(out_dir, "run"), strategy) as rundir:
            backup = RunBackup(rundir)
            runs.append({"rundir": rundir, "resumed_at": backup.epoch})
            weights["cache"], results["cache"] = train_cache_model(
                strategy, epochs=epochs, backup=backup
            )
    results["cache"].update(history=backup.history, runs=runs, chief=is_chief(strategy))
    name = os.path.join(out_dir, f"worker-{json.loads(os.environ['TF_CONFIG'])['task']['index']}")
    np.savez(name, **{f"{job}|{path}": v for job in weights for path, v in weights[job].items()})
    with open(f"{name}.json", "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(*sys.argv[1:])
