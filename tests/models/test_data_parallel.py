"""Data-parallel training on JAX (``keras.distribution.DataParallel``): one step of ``fit`` over
two devices gives the loss, metrics and weights of one device trained on the same global batch.
A child process on two simulated CPU devices (JAX fixes its devices when it starts; this file
run as a script) trains each case both ways from the same weights and prints JSON."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="the data-parallel run needs JAX"
)

DEVICES, GLOBAL_BATCH, SEED = 2, 8, 1234
# float32, one SGD step: the runs differ only in the order of the sums over the batch (at most
# 3e-8 measured); a wrong gradient (a missing or doubled half) moves a weight by its update.
# Every trainable weight's update is checked to be at least 100 times the absolute tolerance.
RTOL, ATOL = 1e-5, 1e-6
RESULTS_PREFIX = "DATA_PARALLEL_RESULTS "

CASES = (
    "language_model_window_attention",  # SlidingWindowAttention on an LSTM (parallel form)
    "language_model_ngram",  # NGramConcat on an LSTM
    "snli_dual_am_gru",  # AssociativeGRU (premise) and DualAssociativeGRU (hypothesis), masked
    "pooling_and_cache",  # AttentionPooling over a masked GRU, a filled cache read and written
)


def _case(name, rng):
    """``(build, compile, x, y)`` of the case ``name``: no dropout, plain SGD, one global batch."""
    import keras

    from tests.language_models import language_model
    from tests.pair_encoders import snli_model
    from tf_memlayers import AttentionPooling, HeapCacheAttention
    from tf_memlayers.models import HeapCacheModel, compile_language_model

    vocabulary, steps = 30, 6
    tokens = lambda shape: rng.integers(1, vocabulary, shape).astype("int32")  # noqa: E731
    classes = rng.integers(0, 3, GLOBAL_BATCH).astype("int32")
    if name.startswith("language_model_"):
        kind = "ngram" if name.endswith("ngram") else "key_value"
        sizes = dict(units=12, embedding_dim=8, window=3, ngram=3, sequence_length=steps)
        options = dict(stateful=False, dropout=0.0, init_scale=1.0, **sizes)
        build = lambda: language_model(vocabulary, kind, **options)  # noqa: E731
        compile_ = lambda m: compile_language_model(m, 1.0, 5.0, optimizer="sgd")  # noqa: E731
        return build, compile_, tokens((GLOBAL_BATCH, steps)), tokens((GLOBAL_BATCH, steps))
    if name == "snli_dual_am_gru":
        sizes = dict(units=8, embedding_dim=6, num_copies=2)
        options = dict(dropout=0.0, seed=SEED, init_scale=0.5, **sizes)
        build = lambda: snli_model(vocabulary, "dual_am_gru", **options)  # noqa: E731
        premise, hypothesis = tokens((GLOBAL_BATCH, 7)), tokens((GLOBAL_BATCH, 4))
        premise[::2, 5:] = hypothesis[1::2, 3:] = 0  # padding, masked, on both devices' rows
        x = (premise, hypothesis)
    else:
        cached = rng.normal(size=(6, 10)).astype("float32")

        def build():
            ids = keras.Input((steps,), dtype="int32")
            # Word vectors larger than the default, so that the attention weights start far
            # from uniform (where the step would move the attention's own weights by 1e-9).
            init = keras.initializers.RandomNormal(stddev=1.0, seed=SEED)
            emb = keras.layers.Embedding(vocabulary, 8, mask_zero=True, embeddings_initializer=init)
            states = keras.layers.GRU(10, return_sequences=True)(emb(ids))
            cache = HeapCacheAttention(cache_size=4, attention_units=5, query="additive")
            # Its step writes the cache: the whole global batch's states on every device.
            model = HeapCacheModel(ids, keras.layers.Dense(3)(cache(AttentionPooling(5)(states))))
            cache.insert(cached)  # a filled cache (a weight, copied with the others)
            return model

        x = tokens((GLOBAL_BATCH, steps))
        x[::3, 4:] = 0  # padding, masked

    def compile_(model):
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=name != "snli_dual_am_gru")
        rate = 1.0 if name == "snli_dual_am_gru" else 0.5
        model.compile(keras.optimizers.SGD(rate), loss, metrics=["accuracy"])

    return build, compile_, x, classes


def _train_one_step(name, distribution, initial_weights):
    """The case's model, under ``distribution`` (or none), from ``initial_weights`` (or its
    own), after one step of one global batch: what the run showed, and the initial weights."""
    import jax
    import keras
    from keras.src.backend.jax import trainer as jax_trainer

    keras.backend.clear_session()
    keras.utils.set_random_seed(SEED)
    build, compile_, x, y = _case(name, np.random.default_rng(SEED))
    keras.distribution.set_distribution(distribution)
    # Each batch as Keras's JAX trainer shards it over the distribution's batch axis.
    laid_out, distribute_data = [], jax_trainer._distribute_data

    def recording(data, *args, **kwargs):
        placed = distribute_data(data, *args, **kwargs)
        for array in jax.tree_util.tree_leaves(placed):
            shards = [s.data.shape[0] for s in array.addressable_shards]
            laid_out.append((array.shape[0], len(array.sharding.device_set), shards))
        return placed

    jax_trainer._distribute_data = recording
    try:
        model = build()
        if initial_weights is not None:
            model.set_weights(initial_weights)
        initial = model.get_weights()
        compile_(model)
        history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
        active, after = keras.distribution.distribution(), model.get_weights()
        return {
            "distribution": type(active).__name__ if active is not None else None,
            "batches": laid_out,
            "variable_devices": sorted({len(v.value.sharding.device_set) for v in model.variables}),
            "logs": {key: [float(v) for v in values] for key, values in history.history.items()},
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
    results = {"backend": keras.backend.backend(), "devices": len(devices), "cases": {}}
    for name in CASES if len(devices) == DEVICES else ():
        single, initial = _train_one_step(name, None, None)
        data_parallel = keras.distribution.DataParallel(devices=devices)
        parallel, _ = _train_one_step(name, data_parallel, initial)
        results["cases"][name] = {"one_device": single, "data_parallel": parallel}
    print(RESULTS_PREFIX + json.dumps(results))


def _check(single, parallel):
    # Not vacuous: under DataParallel every array of the batch is split in halves over the two
    # devices and every variable is on both; without a distribution all is on one device.
    assert parallel["distribution"] == "DataParallel" and single["distribution"] is None
    assert parallel["variable_devices"] == [DEVICES] and single["variable_devices"] == [1]
    assert parallel["batches"], "the trainer laid out no batch"
    halves = [GLOBAL_BATCH // DEVICES] * DEVICES
    assert all(b == [GLOBAL_BATCH, DEVICES, halves] for b in parallel["batches"]), parallel
    assert all(b[1] == 1 and b[2] == [b[0]] for b in single["batches"]), single["batches"]
    # The same loss and metrics, and the same weights after the step, as one device.
    assert sorted(parallel["logs"]) == sorted(single["logs"])
    for key, value in single["logs"].items():
        assert len(value) == 1, key
        np.testing.assert_allclose(parallel["logs"][key], value, rtol=RTOL, atol=ATOL, err_msg=key)
    assert parallel["paths"] == single["paths"]
    for path, trainable, update in zip(single["paths"], single["trainable"], single["updates"]):
        assert not trainable or update >= 100 * ATOL, (path, update)
        assert not path.endswith("/cache") or update > 0, f"the step wrote no state to {path}"
    for path, got, expected in zip(single["paths"], parallel["weights"], single["weights"]):
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=path)


def test_one_step_on_two_devices_equals_one_device():
    # One test, so that one child process serves every case (not one per pytest-xdist worker).
    here = pathlib.Path(__file__).resolve()
    # The repository on the path: the child builds its models with tests/language_models.py.
    path = os.pathsep.join(p for p in (str(here.parents[2]), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=path)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={DEVICES}"])
    run = dict(env=env, cwd=here.parents[2], capture_output=True, text=True, timeout=300)
    done = subprocess.run([sys.executable, str(here)], **run)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULTS_PREFIX)]
    assert done.returncode == 0 and lines, f"exit {done.returncode}:\n{done.stderr[-6000:]}"
    results = json.loads(lines[-1][len(RESULTS_PREFIX) :])
    assert results["backend"] == "jax" and results["devices"] == DEVICES, results
    assert sorted(results["cases"]) == sorted(CASES)
    failures = []
    for case, runs in results["cases"].items():
        try:
            _check(runs["one_device"], runs["data_parallel"])
        except AssertionError as error:
            failures.append(f"{case}: {error}")
    assert not failures, "\n\n".join(failures)


if __name__ == "__main__":
    _child_main()
