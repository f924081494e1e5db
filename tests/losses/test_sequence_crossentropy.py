"""`SequenceCrossentropy`'s two reductions against NumPy from the log-softmax."""

import keras
import numpy as np
import pytest

from tests.support import assert_close
from tf_memlayers.losses import LOSS_REDUCTIONS, SequenceCrossentropy
from tf_memlayers.metrics import Perplexity


def _numpy_token_nll(targets, logits):
    logits = np.asarray(logits, np.float64)
    logits = logits - logits.max(axis=-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]


def _batch(seed, batch=3, time=5, vocabulary=7):
    rng = np.random.default_rng(seed)  # (a generator is used as it is)
    targets = rng.integers(0, vocabulary, (batch, time)).astype("int32")
    logits = rng.normal(size=(batch, time, vocabulary)).astype("float32")
    return targets, logits, (rng.uniform(size=(batch, time)) > 0.3).astype("float32")


def test_sequence_crossentropy_reductions_match_numpy():
    targets, logits, weights = _batch(3)
    nll = _numpy_token_nll(targets, logits)
    token_mean = SequenceCrossentropy("token_mean")(targets, logits, sample_weight=weights)
    summed = SequenceCrossentropy("sum_over_time")(targets, logits, sample_weight=weights)
    np.testing.assert_allclose(float(token_mean), (nll * weights).sum() / weights.sum(), rtol=1e-5)
    # Zaremba's cost: sum over the time steps of the per-step mean over the batch.
    np.testing.assert_allclose(float(summed), (nll * weights).mean(axis=0).sum(), rtol=1e-5)
    with pytest.raises(ValueError, match="`loss_reduction` must be one of .*'mean'"):
        SequenceCrossentropy("mean")
    # 0.2's name of the argument and the attribute: the same loss, with a DeprecationWarning.
    with pytest.warns(DeprecationWarning, match="`reduction_mode` is deprecated"):
        old = SequenceCrossentropy(reduction_mode="sum_over_time")
    with pytest.warns(DeprecationWarning, match="read `loss_reduction`"):
        assert old.reduction_mode == old.loss_reduction == "sum_over_time"
    assert "reduction_mode" not in dir(old)  # saving reads what `dir` lists: it must not warn


@pytest.mark.parametrize("mode", LOSS_REDUCTIONS)
def test_zero_weight_padding_changes_neither_reduction(mode):
    # The same sequences with three steps of padding (any targets and logits, weight 0): the
    # token mean is still over the real tokens, the time sum still over the real steps.
    targets, logits, weights = _batch(2)
    padding_targets, padding_logits, _ = _batch(3, time=3)
    padded = (
        np.concatenate([targets, padding_targets], axis=1),
        np.concatenate([logits, 10 * padding_logits], axis=1),
        np.concatenate([weights, np.zeros((3, 3), "float32")], axis=1),
    )
    loss, plain = SequenceCrossentropy(mode), [targets, logits, weights]
    np.testing.assert_allclose(float(loss(*padded)), float(loss(*plain)), rtol=1e-5)


@pytest.mark.parametrize("mode", LOSS_REDUCTIONS)
def test_the_logits_mask_counts_as_zero_weights_in_the_loss_and_the_perplexity(mode):
    # Keras hands an `Embedding(mask_zero=True)`'s mask, passed on to the logits, to the loss
    # and the weighted metrics: the padding counts in neither, as zero weights would.
    x, layers = np.array([[1, 2, 3, 4, 5, 0, 0], [6, 1, 0, 0, 0, 0, 0]]), keras.layers
    model = keras.Sequential([layers.Embedding(7, 4, mask_zero=True), layers.Dense(7)])
    model.compile("sgd", SequenceCrossentropy(mode), weighted_metrics=[Perplexity()])
    loss_and_perplexity = model.evaluate(x, x, batch_size=2, verbose=0)
    nll, valid = _numpy_token_nll(x, model.predict(x, verbose=0)), x != 0
    mean = (nll * valid).sum() / valid.sum()
    expected = mean if mode == "token_mean" else (nll * valid).sum() / 2
    assert_close(loss_and_perplexity, [expected, np.exp(mean)], 0, 1e-5)


@pytest.mark.parametrize("reduction", [None, "mean_with_sample_weight"])
def test_without_weights_the_plain_means_and_reduction_is_the_modes(reduction, recwarn):
    targets, logits, weights = _batch(4)
    nll = _numpy_token_nll(targets, logits)
    token_mean = SequenceCrossentropy(**({} if reduction is None else {"reduction": reduction}))
    assert token_mean.loss_reduction == LOSS_REDUCTIONS[0] == "token_mean"
    weighted = token_mean(targets, logits, sample_weight=weights)
    assert np.shape(weighted) == ()
    np.testing.assert_allclose(float(weighted), (nll * weights).sum() / weights.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(token_mean(targets, logits)), nll.mean(), rtol=1e-5)
    summed = SequenceCrossentropy("sum_over_time")(targets, logits)
    np.testing.assert_allclose(float(summed), nll.mean(axis=0).sum(), rtol=1e-5)
    for other in ("sum", "none", "bogus"):  # as Keras's losses refuse a reduction they lack
        with pytest.raises(ValueError, match=f"`reduction` is set by .* got reduction='{other}'"):
            SequenceCrossentropy(reduction=other)
    # A config of Keras's form, holding a reduction, loads; as does 0.2's (`reduction_mode`).
    for name in ("loss_reduction", "reduction_mode"):
        config = {name: "sum_over_time", "reduction": "sum_over_batch_size"}
        assert SequenceCrossentropy.from_config(config).loss_reduction == "sum_over_time"
    assert not [w for w in recwarn if "reduction_mode" in str(w.message)]  # loaded silently


@pytest.mark.parametrize("mode", LOSS_REDUCTIONS)
def test_a_compiled_model_reports_the_loss_of_its_weighted_batch(mode):
    # The model's output is its input: the logits reach the loss as they are.
    targets, logits, weights = _batch(5, batch=4)
    model = keras.Sequential([keras.Input((5, 7)), keras.layers.Identity()])
    model.compile(loss=SequenceCrossentropy(mode), jit_compile=False)
    loss = model.evaluate(logits, targets, sample_weight=weights, batch_size=4, verbose=0)
    weighted = _numpy_token_nll(targets, logits) * weights
    expected = weighted.sum() / weights.sum() if mode == "token_mean" else weighted.sum() / 4
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_the_loss_is_restored_by_its_registered_name():
    mode = "sum_over_time"
    config = keras.losses.serialize(SequenceCrossentropy(mode, name="cost", dtype="float16"))
    assert config["registered_name"] == "tf_memlayers>SequenceCrossentropy"
    restored = keras.losses.deserialize(config)
    assert isinstance(restored, SequenceCrossentropy) and restored.name == "cost"
    assert restored.loss_reduction == mode and restored.dtype == "float16"
    # The values, in float32 (the default dtype, restored as such).
    restored = keras.losses.deserialize(keras.losses.serialize(SequenceCrossentropy(mode)))
    assert restored.dtype == "float32"
    targets, logits, _ = _batch(6)
    expected = _numpy_token_nll(targets, logits).mean(axis=0).sum()
    np.testing.assert_allclose(float(restored(targets, logits)), expected, rtol=1e-5)
