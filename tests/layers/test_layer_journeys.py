"""A user's journey with every public layer and cell: a functional model trained with `fit`
on data whose last batch is partial, with and without a Keras mask and under
``mixed_float16``, then saved to ``.keras`` and loaded back with the same predictions."""

import keras
import numpy as np
import pytest
from support import BACKEND, FUSED_LOOP, tensorflow_only
from layer_registry import suite_cases

from tf_memlayers.layers import (
    HeapCacheAttention,
)

VOCAB, STEPS, SAMPLES, BATCH, CLASSES = 11, 6, 5, 2, 3  # 5 samples: the last batch has 1


def _tokens(rng, masked, steps=STEPS):
    """``[SAMPLES, steps]`` token ids; with ``masked`` some rows are padded with 0 (the
    Embedding's mask value), at the end and in a hole."""
    tokens = rng.integers(1, VOCAB, size=(SAMPLES, steps))
    if masked:
        tokens[1, steps - 2 :] = 0
        tokens[3, 1] = 0
        tokens[4, steps - 1 :] = 0
    return tokens


def _embedded(inputs, masked):
    return keras.layers.Embedding(VOCAB, 4, mask_zero=masked)(inputs)

# The declared layers' journeys, by role (tests/layer_registry.py).
JOURNEYS = suite_cases("journeys")
STEP_LAYERS, POOLED_LAYERS, PAIR_LAYERS, TOKEN_LAYERS = (
    {name: build for name, (kind, build) in JOURNEYS.items() if kind == role}
    for role in ("step", "pooled", "pair", "token")
)


def _model(name, masked, rng):
    """``(model, inputs, targets)`` for the layer ``name``."""
    if name in PAIR_LAYERS:
        # A sentence pair, both sentences through one embedding (conditional encoding).
        premise = keras.Input((STEPS,), dtype="int32")
        hypothesis = keras.Input((STEPS - 2,), dtype="int32")
        embedding = keras.layers.Embedding(VOCAB, 4, mask_zero=masked)
        encoded = PAIR_LAYERS[name](embedding(premise), embedding(hypothesis))
        logits = keras.layers.Dense(CLASSES, dtype="float32")(encoded)
        inputs = [_tokens(rng, masked), _tokens(rng, masked, STEPS - 2)]
        model = keras.Model([premise, hypothesis], logits)
        return model, inputs, rng.integers(0, CLASSES, size=SAMPLES)
    tokens = keras.Input((STEPS,), dtype="int32")
    embedded = _embedded(tokens, masked)
    if name in TOKEN_LAYERS:
        targets = rng.integers(0, VOCAB, size=(SAMPLES, STEPS))
        logits = TOKEN_LAYERS[name](tokens, masked, VOCAB)
    elif name in STEP_LAYERS:
        features = STEP_LAYERS[name](embedded)
        targets = rng.integers(0, VOCAB, size=(SAMPLES, STEPS))
        logits = keras.layers.Dense(VOCAB, dtype="float32")(features)
    else:
        features = POOLED_LAYERS[name](embedded)
        targets = rng.integers(0, CLASSES, size=SAMPLES)
        logits = keras.layers.Dense(CLASSES, dtype="float32")(features)
    return keras.Model(tokens, logits), _tokens(rng, masked), targets


NAMES = [
    pytest.param(name, marks=tensorflow_only(FUSED_LOOP)) if "fused_loop" in name else name
    for name in sorted([*STEP_LAYERS, *POOLED_LAYERS, *PAIR_LAYERS, *TOKEN_LAYERS])
]
# Without a mask in float32; with a mask under mixed precision (and XLA, the default path).
VARIANTS = [("float32", False), ("mixed_float16", True)]


@pytest.mark.parametrize("policy, masked", VARIANTS, ids=["no_mask", "mask_mixed_float16"])
@pytest.mark.parametrize("name", NAMES)
def test_fit_on_a_partial_batch_then_save_and_load(name, policy, masked, tmp_path):
    keras.config.set_dtype_policy(policy)  # restored by the autouse fixture
    rng = np.random.default_rng(7)
    model, inputs, targets = _model(name, masked, rng)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # XLA (the default) in one variant; on TensorFlow the other skips its compile time.
        # On JAX both compile: there the step run op by op takes longer than its compilation
        # (about 1.6x over these layers). The partial batch retraces `fit` with an unknown
        # batch size either way.
        jit_compile="auto" if masked or BACKEND == "jax" else False,
    )
    history = model.fit(inputs, targets, batch_size=BATCH, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    if name == "HeapCacheAttention":
        # Fill the cache, so that the saved model has something to read.
        cache = next(layer for layer in model.layers if isinstance(layer, HeapCacheAttention))
        cache.insert(rng.normal(size=(4, cache.width)).astype("float32"))
        assert int(cache.fill_count()) > 0

    predictions = keras.ops.convert_to_numpy(model(inputs))
    assert np.isfinite(predictions).all()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(inputs)), predictions, rtol=0, atol=1e-6
    )
