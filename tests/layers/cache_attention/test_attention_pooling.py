"""AttentionPooling against a NumPy restatement of Gaffney §3.2."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import EmptyInputTests, LayerTestCase
from tests.support import BACKEND, keras_lstm
from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling
from tf_memlayers.models._compiling import compile_and_build_optimizer


class AttentionPoolingTest(EmptyInputTests, LayerTestCase):
    """The shared suites of `AttentionPooling` (tests/layer_test_case.py)."""

    layer_cls = AttentionPooling
    make = staticmethod(lambda **kw: AttentionPooling(3, **kw))
    not_in = {"flags": "has no boolean arguments"}
    # Pooling has no memory: its one output is the pooled vector.
    last_output_is_memory = False
    keras_checks = {
        "pooling": (
            AttentionPooling,
            {"attention_units": 3},
            dict(
                input_shape=(2, 3, 4),
                expected_output_shape=(2, 4),
                expected_num_trainable_weights=2,
                supports_masking=True,
            ),
        ),
    }
    journeys = {
        "AttentionPooling": (
            "pooled",
            lambda e: AttentionPooling(4)(keras_lstm(8, return_sequences=True)(e)),
        ),
    }
    nan_padding = {
        "pooling": lambda: AttentionPooling(3),
    }
    output_spec = {
        "pooling": (lambda dtype: AttentionPooling(3, dtype=dtype), (2, 5, 4), {}),
        "pooling_scores": (
            lambda dtype: AttentionPooling(3, dtype=dtype),
            (2, 5, 4),
            {"return_attention_scores": True},
        ),
    }
    empty = {
        "pooling": lambda: AttentionPooling(3),
    }


def reference(inputs, mask, kernel, score_vector):
    logits = np.tanh(inputs @ kernel) @ score_vector  # [B, T]
    pooled = np.zeros((inputs.shape[0], inputs.shape[2]))
    weights = np.zeros(logits.shape)
    for b in range(len(inputs)):
        keep = mask[b]
        if keep.any():
            e = np.exp(logits[b, keep] - logits[b, keep].max())
            weights[b, keep] = e / e.sum()
        pooled[b] = weights[b] @ inputs[b]
    return pooled, weights


def test_matches_reference_with_mask(float64_policy):
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(3, 7, 5))
    mask = np.ones((3, 7), bool)
    mask[0, :3] = False  # left padding
    mask[2] = False  # nothing to pool
    layer = AttentionPooling(4)
    pooled, weights = layer(inputs, mask=mask, return_attention_scores=True)
    expected, expected_weights = reference(
        inputs, mask, np.asarray(layer.kernel), np.asarray(layer.score)
    )
    np.testing.assert_allclose(np.asarray(pooled), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(weights), expected_weights, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(pooled)[2], 0.0)
    changed = inputs.copy()
    changed[0, :3] = 100.0  # masked steps have no influence
    np.testing.assert_allclose(
        np.asarray(layer(changed, mask=mask)), np.asarray(pooled), atol=1e-12
    )


def test_float32_matches_reference_without_mask():
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(2, 6, 3)).astype("float32")
    layer = AttentionPooling(8)
    pooled = np.asarray(layer(inputs))
    expected, _ = reference(
        inputs.astype(np.float64),
        np.ones((2, 6), bool),
        np.asarray(layer.kernel).astype(np.float64),
        np.asarray(layer.score).astype(np.float64),
    )
    np.testing.assert_allclose(pooled, expected, rtol=0, atol=1e-5)


def sequence_model(jit_compile=False):
    tokens = keras.Input((9,), dtype="int32")
    embedded = keras.layers.Embedding(12, 4, mask_zero=True)(tokens)
    # A per-step Dense keeps the Embedding's mask (and compiles fast under XLA).
    states = keras.layers.Dense(6, activation="tanh", name="states")(embedded)
    pooled = AttentionPooling(3, name="pool")(states)
    model = keras.Model(tokens, keras.layers.Dense(12, dtype="float32")(pooled))
    compile_and_build_optimizer(
        model,
        "adam",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def tokens(rng):
    x = rng.integers(1, 12, (8, 9))
    x[:, :4] = 0  # left padding
    return x


def pooling_probe(model, jit_compile=False):
    """tokens -> (pooled, weights) of ``model``'s "pool" layer, masked by the Embedding.

    A copy of the layer with the same weights: a Keras functional graph cannot reuse a layer
    with a different number of outputs.
    """
    pool = model.get_layer("pool")
    copy = AttentionPooling.from_config(pool.get_config())
    states = model.get_layer("states").output  # carries the Embedding's mask
    probe = keras.Model(model.input, copy(states, return_attention_scores=True))
    copy.set_weights(pool.get_weights())
    probe.compile(jit_compile=jit_compile)
    return probe


@pytest.mark.parametrize("jit_compile", [False, True])
def test_trains_under_xla_and_masks_padding(jit_compile):
    if BACKEND == "jax" and not jit_compile:
        pytest.skip(
            "on JAX, jit_compile=False runs the training step operation by operation, "
            "not in a graph: the step that Keras compiles there is the XLA variant"
        )
    rng = np.random.default_rng(2)
    model = sequence_model(jit_compile)
    x = tokens(rng)
    before = np.asarray(model.get_layer("pool").kernel).copy()
    model.fit(x, x[:, -1], epochs=2, verbose=0)
    assert not np.array_equal(before, np.asarray(model.get_layer("pool").kernel))
    probe = pooling_probe(model, jit_compile)
    pooled, weights = probe.predict(x, verbose=0)  # compiled with XLA when jit_compile
    np.testing.assert_array_equal(weights[:, :4], 0.0)  # the left padding
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    eager_pooled, eager_weights = probe(x)
    np.testing.assert_allclose(weights, np.asarray(eager_weights), atol=1e-6)
    np.testing.assert_allclose(pooled, np.asarray(eager_pooled), atol=1e-6)


def uniform_weights(model, rng, limit=0.8):
    """Sets every weight to U(-limit, limit): at the Glorot init the pooling is almost uniform."""
    for variable in model.weights:
        variable.assign(rng.uniform(-limit, limit, variable.shape))


def test_mixed_float16_matches_float32():
    rng = np.random.default_rng(3)
    model = sequence_model()
    uniform_weights(model, rng)
    x = tokens(rng)
    pooled, weights = pooling_probe(model).predict(x, verbose=0)
    keras.config.set_dtype_policy("mixed_float16")
    half = sequence_model(jit_compile=True)
    half.set_weights(model.get_weights())
    got_pooled, got_weights = pooling_probe(half, jit_compile=True).predict(x, verbose=0)
    # Documented: pooled in the compute dtype, the softmax weights in float32.
    assert got_pooled.dtype == np.float16 and got_weights.dtype == np.float32
    assert np.abs(weights[:, 4:] - 1 / 5).max() > 0.025  # not uniform: 5x the tolerance
    np.testing.assert_allclose(got_weights, weights, atol=5e-3)
    np.testing.assert_allclose(got_pooled, pooled, atol=5e-3 * max(1.0, np.abs(pooled).max()))
    loss = half.fit(x, x[:, -1], epochs=1, verbose=0).history["loss"][-1]
    assert np.isfinite(loss)


def test_config_round_trip():
    # Trained, saved and loaded in a model: the journeys of AttentionPoolingTest.
    layer = AttentionPooling(5, kernel_initializer="ones", name="p")
    clone = AttentionPooling.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config() and clone.attention_units == 5


def test_a_config_saved_with_units_loads():
    """Versions 0.1 and 0.2 named the attention width `units` in the config."""
    config = AttentionPooling(5, name="p").get_config()
    config["units"] = config.pop("attention_units")
    assert AttentionPooling.from_config(config).attention_units == 5


def test_bad_arguments():
    with pytest.raises(ValueError, match="`attention_units`"):
        AttentionPooling(0)
    with pytest.raises(TypeError, match="units"):
        AttentionPooling("8")
    with pytest.raises(ValueError, match="rank 3"):
        AttentionPooling(4)(np.ones((2, 5), "float32"))
    inputs = np.ones((2, 5, 6), "float32")
    for call in (AttentionPooling(4), AttentionPooling(4).compute_output_spec):
        with pytest.raises(TypeError, match="`return_attention_scores` must be a bool, got 'x'"):
            call(inputs, return_attention_scores="x")


def test_attention_scores_in_a_functional_model():
    layer = AttentionPooling(4)
    inputs = keras.Input((5, 6))
    probe = keras.Model(inputs, layer(inputs, return_attention_scores=True))
    x = np.random.default_rng(3).normal(size=(2, 5, 6)).astype("float32")
    pooled, weights = probe(x)
    expected_pooled, expected_weights = layer(x, return_attention_scores=True)
    assert tuple(weights.shape) == (2, 5)
    np.testing.assert_allclose(pooled, expected_pooled, rtol=1e-6)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-6)
