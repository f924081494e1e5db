"""`AttentionMechanism` and `monotonic_alignments` against the NumPy references of Bahdanau et al.
and Luong et al. (2015) and Raffel et al. (2017)."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase
from tests.layers.memory_attention.test_attention_wrapper import (
    BATCH,
    LENGTH,
    MEMORY_DIM,
    MONOTONIC,
    _data,
    options_of,
    sharpened,
)
from tests.memory_attention_reference import attention_reference, monotonic_reference, named_weights
from tests.support import as_numpy, assert_close, gradients
from tf_memlayers.layers import AttentionMechanism
from tf_memlayers.layers.memory_attention.attention_mechanism import (
    MONOTONIC_MODES,
    monotonic_alignments,
)


def _mechanism(dtype=None, **kwargs):
    return AttentionMechanism(score="general", scale=True, dtype=dtype, **kwargs)


def _attend_with_a_mechanism(premise, hypothesis):
    """A ``"pair"`` journey: the hypothesis's mean attends over the premise."""
    query = keras.layers.GlobalAveragePooling1D()(hypothesis)
    context, _ = AttentionMechanism(monotonic_mode="parallel", sigmoid_noise=1.0)(query, premise)
    return context


class AttentionMechanismTest(LayerTestCase):
    layer_cls = AttentionMechanism

    def test_journey(self, tmp_path):
        self.run_journey_test("pair", _attend_with_a_mechanism, tmp_path)

    def test_layer_behaviors_specs_config_and_flags(self):
        shapes = {"query_shape": (2, 4), "memory_shape": (2, 6, 8)}
        checks = dict(expected_output_shape=((2, 8), (2, 6)), expected_num_trainable_weights=2)
        self.run_layer_test(_mechanism, input_shape=shapes, run_training_check=False, **checks)
        memory = np.random.default_rng(3).normal(size=(BATCH, LENGTH, 8)).astype("float32")
        self.run_output_spec_test(_mechanism, (BATCH, 5), memory=memory)
        assert _mechanism().compute_output_shape((None, 4), (2, 6, 8)) == ((2, 8), (2, 6))
        pytest.raises(ValueError, _mechanism().compute_output_shape, (2, 4), (2, 6)).match("^Att")
        query, dot = np.ones((BATCH, 5), "float32"), AttentionMechanism(score="dot")
        pytest.raises(ValueError, _mechanism(), query, memory[0]).match("`memory` must be a 3D")
        pytest.raises(ValueError, dot, query, memory).match(r"the query \(5 wide\) as wide as")
        self.run_config_test(AttentionMechanism, score="additive", normalize=True, **MONOTONIC)
        self.run_config_test(AttentionMechanism, probability_fn=sharpened, attention_units=3)
        self.run_flags_test(lambda **kw: AttentionMechanism(score="dot", **kw), ["scale"])
        self.run_flags_test(AttentionMechanism, ["normalize"])


@pytest.mark.parametrize("dtype, atol", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("mode", MONOTONIC_MODES)
def test_monotonic_alignments_and_their_gradients_are_the_papers(mode, dtype, atol):
    rng = np.random.default_rng(6)
    p = rng.uniform(0.05, 0.95, size=(3, 7))
    p[1, 4:] = 0.0  # padding
    previous = np.stack([np.eye(7)[0], rng.dirichlet(np.ones(7)), np.eye(7)[2]])
    previous[1, 4:] = 0.0
    seen = rng.normal(size=p.shape)

    def loss(p, previous):
        return keras.ops.sum(keras.ops.multiply(monotonic_alignments(p, previous, mode), seen))

    got, _, grads = gradients(loss, inputs=[p.astype(dtype), previous.astype(dtype)])
    assert_close(got, np.sum(monotonic_reference(p, previous, mode) * seen), atol, 1e-7)
    for index, grad in enumerate(grads):  # complex steps, as above; hard: no gradient
        want = np.zeros_like(p)
        for at in np.ndindex(*p.shape):
            moved = [p.astype(complex), previous.astype(complex)]
            moved[index][at] += 1e-30j
            want[at] = np.sum(monotonic_reference(*moved, mode) * seen).imag / 1e-30
        np.testing.assert_allclose(grad, 0 * want if mode == "hard" else want, atol=atol, rtol=0)


@pytest.mark.parametrize(
    "kind",
    [
        dict(normalize=True),
        dict(score="general", scale=True, probability_fn="hardmax"),
        dict(score="dot", probability_fn=sharpened),
        dict(monotonic_mode="parallel"),
        dict(score="general", monotonic_mode="hard"),
    ],
    ids=["additive_normalized", "general_scaled_hardmax", "dot_sharpened", "parallel", "hard"],
)
def test_a_mechanism_on_its_own_matches_the_reference_and_saves(float64_policy, tmp_path, kind):
    rng = np.random.default_rng(12)
    _, memory, mask = _data(rng)
    query = rng.normal(size=(BATCH, MEMORY_DIM))
    padded = np.where(mask[..., None], memory, np.nan)  # padding is never read
    mechanism = AttentionMechanism(**kind)
    mechanism(query, memory)
    mechanism.set_weights([rng.uniform(-1.5, 1.5, np.shape(v)) for v in mechanism.get_weights()])
    previous = np.eye(LENGTH)[[1, 0, 2]]  # monotonic attention's, at positions 1, 0 and 2
    got = mechanism(query, padded, memory_mask=mask, previous=previous)
    weights = named_weights(mechanism.weights)
    want = attention_reference(query, memory, mask, weights, *options_of(kind), previous)
    assert_close(got, want, atol=1e-10)
    inputs = [keras.Input((MEMORY_DIM,)), keras.Input((LENGTH, MEMORY_DIM))]
    model = keras.Model(inputs, mechanism(*inputs))
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    for g, w in zip(loaded([query, memory]), model([query, memory])):
        np.testing.assert_array_equal(as_numpy(g), as_numpy(w))


@pytest.mark.parametrize("monotonic_mode", [None, "hard"])
def test_additive_float64_under_keras_promotion(monkeypatch, float64_policy, monotonic_mode):
    layer = AttentionMechanism(monotonic_mode=monotonic_mode)
    memory = _data(np.random.default_rng(7))[1]
    expected = as_numpy(layer(memory[:, 0], memory)[1])
    # Off TensorFlow Keras makes float64 products float32 (the tests keep float64 elsewhere).
    from keras.src.backend.common import dtypes

    monkeypatch.setitem(dtypes.BIT64_TO_BIT32_DTYPE, "float64", "float32")
    np.testing.assert_allclose(as_numpy(layer(memory[:, 0], memory)[1]), expected, atol=1e-5)
