"""Data-parallel training on JAX (``keras.distribution.DataParallel``): one step of ``fit`` over
two devices gives the loss and the weights of one device trained on the same global batch.

JAX fixes its devices when it starts, so the comparison runs in a child Python process on the
JAX backend with two simulated CPU devices (``--xla_force_host_platform_device_count=2``),
whichever backend runs the tests. The child (this file run as a script) trains each model
twice from the same initial weights, once under ``DataParallel`` over both devices and once
without a distribution, records how the training batch was laid out on the devices, and
prints the results as JSON; the test below checks them. Skipped where JAX is not installed.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="JAX is not installed (pip install -e '.[jax]'): the data-parallel run needs Keras's "
    "JAX backend",
)

DEVICES = 2
GLOBAL_BATCH = 8  # divisible by DEVICES: each device trains on 4 rows
SEED = 1234
# float32, one SGD step: the two runs differ only in the order of the sums over the batch
# (each device sums its half, then the halves are added), which moves the results by float
# rounding (at most 3e-8 measured); a wrong gradient (a missing or doubled half, a wrong
# scale) would move a weight by the size of its update. Every trainable weight's update is
# checked to be at least 100 times the absolute tolerance, so that equal weights mean equal
# updates, weight by weight.
RTOL, ATOL = 1e-5, 1e-6
SMALLEST_UPDATE = 100 * ATOL
CHILD_TIMEOUT_S = 300
RESULTS_PREFIX = "DATA_PARALLEL_RESULTS "

CASES = (
    "language_model_window_attention",  # SlidingWindowAttention on an LSTM (parallel form)
    "language_model_ngram",  # NGramConcat on an LSTM
    "snli_dual_am_gru",  # AssociativeGRU (premise) and DualAssociativeGRU (hypothesis), masked
    "heap_cache_attention_read",  # HeapCacheAttention's read of a filled cache
    "attention_pooling",  # AttentionPooling over a masked GRU
)


# --- The child process: the JAX backend on two simulated CPU devices -------------------------


def _case(name, rng):
    """``(build, compile, x, y)`` of the case ``name``: ``build()`` makes the model (no
    dropout), ``compile(model)`` compiles it with plain SGD, and ``x, y`` is one global batch."""
    import keras

    from tests.language_models import language_model
    from tests.pair_encoders import snli_model
    from tf_memlayers import AttentionPooling, HeapCacheAttention
    from tf_memlayers.models import compile_language_model

    vocabulary, steps = 30, 6
    tokens = lambda shape: rng.integers(1, vocabulary, shape).astype("int32")  # noqa: E731
    classes = lambda: rng.integers(0, 3, GLOBAL_BATCH).astype("int32")  # noqa: E731
    # Initial weights and word vectors larger than the defaults, so that the attention weights
    # start far from uniform: from the defaults (a near-uniform start, where the scores'
    # gradients nearly vanish) the step moves the attention's own weights by 1e-9 to 1e-5,
    # below the tolerance, and equal weights would show nothing about them.
    word_vectors = lambda: keras.initializers.RandomNormal(stddev=1.0, seed=SEED)  # noqa: E731

    def classifier_compile(model):
        model.compile(
            keras.optimizers.SGD(0.5),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )

    if name.startswith("language_model_"):
        kind = "ngram" if name.endswith("ngram") else "key_value"

        def build():
            return language_model(
                vocabulary,
                kind=kind,
                units=12,
                embedding_dim=8,
                window=3,
                ngram=3,
                stateful=False,
                sequence_length=steps,
                dropout=0.0,
                init_scale=1.0,
            )

        def compile_(model):
            compile_language_model(model, learning_rate=1.0, optimizer="sgd", clip_norm=5.0)

        x = tokens((GLOBAL_BATCH, steps))
        return build, compile_, x, tokens((GLOBAL_BATCH, steps))

    if name == "snli_dual_am_gru":

        def build():
            return snli_model(
                vocabulary,
                kind="dual_am_gru",
                units=8,
                embedding_dim=6,
                num_copies=2,
                dropout=0.0,
                seed=SEED,
                init_scale=0.5,
            )

        def compile_(model):
            model.compile(
                keras.optimizers.SGD(1.0), "sparse_categorical_crossentropy", metrics=["accuracy"]
            )

        premise, hypothesis = tokens((GLOBAL_BATCH, 7)), tokens((GLOBAL_BATCH, 4))
        premise[::2, 5:] = 0  # padding, masked by the embedding, on both devices' rows
        hypothesis[1::2, 3:] = 0
        return build, compile_, (premise, hypothesis), classes()

    if name == "heap_cache_attention_read":
        cached = rng.normal(size=(6, 10)).astype("float32")

        def build():
            ids = keras.Input((steps,), dtype="int32")
            embedded = keras.layers.Embedding(vocabulary, 8, embeddings_initializer=word_vectors())
            states = keras.layers.LSTM(10)(embedded(ids))
            cache = HeapCacheAttention(cache_size=4, attention_units=5, query="additive")
            logits = keras.layers.Dense(3)(cache(states))
            model = keras.Model(ids, logits)
            cache.insert(cached)  # a filled cache (a weight, copied with the others)
            return model

        return build, classifier_compile, tokens((GLOBAL_BATCH, steps)), classes()

    if name == "attention_pooling":

        def build():
            ids = keras.Input((steps,), dtype="int32")
            embedded = keras.layers.Embedding(
                vocabulary, 8, mask_zero=True, embeddings_initializer=word_vectors()
            )(ids)
            states = keras.layers.GRU(10, return_sequences=True)(embedded)
            logits = keras.layers.Dense(3)(AttentionPooling(attention_units=5)(states))
            return keras.Model(ids, logits)

        x = tokens((GLOBAL_BATCH, steps))
        x[::3, 4:] = 0  # padding, masked
        return build, classifier_compile, x, classes()

    raise ValueError(f"unknown case {name!r}")


def _train_one_step(name, distribution, initial_weights):
    """Builds the case's model (under ``distribution``, or none), sets ``initial_weights``
    (or keeps its own) and fits one step of one global batch. Returns what the run showed
    and the initial weights."""
    import jax
    import keras
    from keras.src.backend.jax import trainer as jax_trainer

    keras.backend.clear_session()
    keras.utils.set_random_seed(SEED)
    build, compile_, x, y = _case(name, np.random.default_rng(SEED))
    keras.distribution.set_distribution(distribution)
    laid_out = []  # each batch as the trainer put it on the devices
    # The step's data goes through this function of Keras's JAX trainer (fit, evaluate,
    # train_on_batch): it shards each array over the distribution's batch axis.
    distribute_data = jax_trainer._distribute_data

    def recording(data, *args, **kwargs):
        placed = distribute_data(data, *args, **kwargs)
        laid_out.append(
            [
                {
                    "shape": list(array.shape),
                    "devices": len(array.sharding.device_set),
                    "shards": [list(shard.data.shape) for shard in array.addressable_shards],
                }
                for array in jax.tree_util.tree_leaves(placed)
            ]
        )
        return placed

    jax_trainer._distribute_data = recording
    try:
        model = build()
        if initial_weights is not None:
            model.set_weights(initial_weights)
        initial = model.get_weights()
        compile_(model)
        history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
        active = keras.distribution.distribution()
        layout = None
        if active is not None:
            data_layout = active.get_data_layout(np.shape(keras.tree.flatten(x)[0]))
            layout = {
                "axes": list(data_layout.axes),
                "mesh_shape": list(data_layout.device_mesh.shape),
            }
        after = model.get_weights()
        return {
            "distribution": type(active).__name__ if active is not None else None,
            "data_layout": layout,
            "batches": laid_out,
            "variable_devices": sorted({len(v.value.sharding.device_set) for v in model.variables}),
            "logs": {key: float(values[-1]) for key, values in history.history.items()},
            "steps": len(history.history["loss"]),
            "paths": [w.path for w in model.weights],
            "trainable": [w.trainable for w in model.weights],
            "weights": [w.tolist() for w in after],
            "updates": [float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(after, initial)],
        }, initial
    finally:
        jax_trainer._distribute_data = distribute_data
        keras.distribution.set_distribution(None)


def _child_main():
    import jax
    import keras

    devices = jax.devices()
    results = {
        "backend": keras.backend.backend(),
        "devices": [str(device) for device in devices],
        "cases": {},
    }
    if len(devices) != DEVICES:
        print(RESULTS_PREFIX + json.dumps(results))
        return
    for name in CASES:
        start = time.perf_counter()
        single, initial = _train_one_step(name, None, None)
        parallel, _ = _train_one_step(
            name, keras.distribution.DataParallel(devices=devices), initial
        )
        seconds = round(time.perf_counter() - start, 1)
        results["cases"][name] = {"one_device": single, "data_parallel": parallel, "s": seconds}
    print(RESULTS_PREFIX + json.dumps(results))


# --- The test, in the process that runs pytest --------------------------------------------


def _child_environment():
    # The repository root on the path: the child builds its language models with
    # tests/language_models.py.
    root = str(pathlib.Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=path)
    flags = [
        flag
        for flag in env.get("XLA_FLAGS", "").split()
        if not flag.startswith("--xla_force_host_platform_device_count")
    ]
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={DEVICES}"])
    return env


def _run_child():
    """The child's results: two CPU devices, each case trained with and without the
    distribution."""
    here = pathlib.Path(__file__).resolve()
    done = subprocess.run(
        [sys.executable, str(here)],
        env=_child_environment(),
        cwd=here.parents[2],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULTS_PREFIX)]
    assert done.returncode == 0 and lines, (
        f"the child process failed (exit {done.returncode}):\n{done.stderr[-6000:]}"
    )
    return json.loads(lines[-1][len(RESULTS_PREFIX) :])


def _check_the_batch_was_split(single, parallel):
    """Not vacuous: under DataParallel every array of the step's batch is split in halves
    over the two devices and every variable is on both, while without a distribution the
    batch stays whole on one device."""
    assert parallel["distribution"] == "DataParallel"
    assert parallel["data_layout"]["mesh_shape"] == [DEVICES], parallel["data_layout"]
    assert parallel["data_layout"]["axes"][0] == "batch", parallel["data_layout"]
    assert parallel["variable_devices"] == [DEVICES], parallel["variable_devices"]
    assert parallel["batches"], "the trainer laid out no batch"
    for array in (array for batch in parallel["batches"] for array in batch):
        assert array["shape"][0] == GLOBAL_BATCH, array
        assert array["devices"] == DEVICES, array
        assert [shard[0] for shard in array["shards"]] == [GLOBAL_BATCH // DEVICES] * DEVICES
    assert single["distribution"] is None
    assert single["variable_devices"] == [1], single["variable_devices"]
    for array in (array for batch in single["batches"] for array in batch):
        assert array["devices"] == 1 and array["shards"] == [array["shape"]], array


def _check_the_step_equals_one_device(single, parallel):
    """The same loss and metrics, and the same weights after the step, as one device trained
    on the same global batch from the same weights."""
    assert single["steps"] == parallel["steps"] == 1
    assert sorted(parallel["logs"]) == sorted(single["logs"])
    for key, value in single["logs"].items():
        np.testing.assert_allclose(parallel["logs"][key], value, rtol=RTOL, atol=ATOL, err_msg=key)
    assert parallel["paths"] == single["paths"]
    # Not vacuous: the step moved every trainable weight by far more than the tolerance.
    for path, trainable, update in zip(single["paths"], single["trainable"], single["updates"]):
        assert not trainable or update >= SMALLEST_UPDATE, (path, update)
    for path, got, expected in zip(single["paths"], parallel["weights"], single["weights"]):
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=path)


def test_one_step_on_two_devices_equals_one_device():
    """Each case: the batch really split over two devices, and the step's loss, metrics and
    weights those of one device. One test, so that one child process serves every case (a
    module fixture shared by several tests runs once in each pytest-xdist worker that runs
    one of them)."""
    results = _run_child()
    assert results["backend"] == "jax"
    assert len(results["devices"]) == DEVICES, results["devices"]
    assert sorted(results["cases"]) == sorted(CASES)
    failures = []
    for case in CASES:
        single = results["cases"][case]["one_device"]
        parallel = results["cases"][case]["data_parallel"]
        for check in (_check_the_batch_was_split, _check_the_step_equals_one_device):
            try:
                check(single, parallel)
            except AssertionError as error:
                failures.append(f"{case}, {check.__name__}: {error}")
    assert not failures, "\n\n".join(failures)


if __name__ == "__main__":
    _child_main()
