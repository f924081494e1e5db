"""`Perplexity` against the corpus perplexity computed in NumPy from the log-softmax."""

import keras
import numpy as np
import pytest

from tests.losses.test_sequence_crossentropy import _batch
from tests.losses.test_sequence_crossentropy import _numpy_token_nll as _numpy_nll
from tf_memlayers.metrics import Perplexity


def test_perplexity_metric_ignores_zero_weights_and_broadcasts_weights_to_the_targets():
    metric = Perplexity()
    logits = np.log(np.array([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]], "float32"))
    metric.update_state(np.array([[0, 1]]), logits, sample_weight=np.array([[1.0, 0.0]]))
    np.testing.assert_allclose(metric.result(), 2.0, rtol=1e-6)
    metric.update_state(np.array([[1, 1]]), logits, sample_weight=np.array([[1.0, 1.0]]))
    expected = np.exp(-(np.log(0.5) + np.log(0.25) + np.log(0.8)) / 3)
    np.testing.assert_allclose(metric.result(), expected, rtol=1e-6)
    targets, logits, _ = _batch(np.random.default_rng(1), 3, 4)
    per_row = np.array([[1.0], [0.0], [2.0]], "float32")  # [batch, 1]: one weight a sequence
    metric = Perplexity()
    metric.update_state(targets, logits, sample_weight=per_row)
    weights = np.broadcast_to(per_row, (3, 4))
    expected = np.exp((_numpy_nll(targets, logits) * weights).sum() / weights.sum())
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-5)


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("float64", 1e-13)])
def test_batches_of_different_shapes_give_the_corpus_perplexity_in_the_metrics_dtype(dtype, rtol):
    rng, metric = np.random.default_rng(0), Perplexity(dtype=dtype)
    batches = [(t, x.astype(dtype), w) for t, x, w in (_batch(rng, 2, 4), _batch(rng, 3, 2))]
    batches.append(_batch(rng, 1, 5))  # float32 logits, counted in the metric's dtype
    assert [keras.backend.standardize_dtype(v.dtype) for v in metric.variables] == [dtype] * 2
    total, count = 0.0, 0.0
    for targets, logits, weights in batches:
        metric.update_state(targets, logits, sample_weight=weights)
        total += (_numpy_nll(targets, logits) * weights).sum()
        count += weights.sum()
    assert keras.backend.standardize_dtype(metric.result().dtype) == dtype
    np.testing.assert_allclose(float(metric.result()), np.exp(total / count), rtol=rtol)
    # Without weights every token counts.
    metric = Perplexity()
    for targets, logits, _ in batches:
        metric.update_state(targets, logits)
    nll = np.concatenate([_numpy_nll(t, x).ravel() for t, x, _ in batches])
    np.testing.assert_allclose(float(metric.result()), np.exp(nll.mean()), rtol=1e-5)


def test_a_float64_result_where_keras_computes_in_float32_and_float16_reads_every_id(monkeypatch):
    # Keras's JAX and torch backends do so outside the tests, which keep float64 (conftest).
    if keras.backend.backend() != "tensorflow":
        from keras.src.backend.common import dtypes

        monkeypatch.setitem(dtypes.BIT64_TO_BIT32_DTYPE, "float64", "float32")
    metric = Perplexity(dtype="float64")
    metric.update_state(*_batch(2)[:2])
    assert keras.backend.standardize_dtype(metric.result().dtype) == "float64"
    # A float16 metric reads every target id.
    logits, metric = np.zeros((1, 1, 3000), "float32"), Perplexity(dtype="float16")
    logits[..., 2049] = 10.0  # 2049 is no float16: as one, the target would read 2048
    metric.update_state(np.array([[2049]]), logits)
    np.testing.assert_allclose(float(metric.result()), 1 + 2999 * np.exp(-10.0), rtol=1e-3)


def test_reset_state_forgets_every_batch_and_float16_logits_count_as_they_are():
    rng, metric = np.random.default_rng(3), Perplexity()
    metric.update_state(*_batch(rng, 2, 3)[:2])
    metric.reset_state()
    assert float(metric.result()) == 1.0  # no tokens yet: exp(0), not NaN
    targets, logits, weights = _batch(rng, 2, 5)
    logits = logits.astype("float16")
    metric.update_state(targets, logits, sample_weight=weights)
    expected = np.exp((_numpy_nll(targets, logits) * weights).sum() / weights.sum())
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-5)


def test_a_compiled_models_evaluation_sums_over_its_batches():
    # The model's output is its input: the logits reach the metric as they are. Three batches with
    # different numbers of real tokens (none in the first): exp of the mean batch loss would differ.
    # Keras passes sample weights to `weighted_metrics` only, as `compile_language_model` does.
    targets, logits, weights = _batch(np.random.default_rng(4), 6, 4)
    weights[:2] = 0.0
    weights[2, 0] = 1.0
    model = keras.Sequential([keras.Input((4, 6)), keras.layers.Identity()])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(loss=loss, weighted_metrics=[Perplexity()], jit_compile=False)
    logs = model.evaluate(logits, targets, sample_weight=weights, batch_size=2, return_dict=True)
    expected = np.exp((_numpy_nll(targets, logits) * weights).sum() / weights.sum())
    np.testing.assert_allclose(logs["perplexity"], expected, rtol=1e-5)


def test_the_metric_is_restored_by_its_registered_name():
    config = keras.metrics.serialize(Perplexity(name="ppl"))
    assert config["registered_name"] == "tf_memlayers>Perplexity"
    restored = keras.metrics.deserialize(config)
    assert isinstance(restored, Perplexity) and restored.name == "ppl"
    assert float(restored.result()) == pytest.approx(1.0)
    # The restored metric measures: exp of the mean negative log-likelihood of its batch.
    targets, logits, weights = _batch(np.random.default_rng(3), 3, 5)
    restored.update_state(targets, logits, sample_weight=weights)
    expected = np.exp((_numpy_nll(targets, logits) * weights).sum() / weights.sum())
    np.testing.assert_allclose(float(restored.result()), expected, rtol=1e-5)
