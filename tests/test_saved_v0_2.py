"""`.keras` files saved by tf-memlayers 0.2 (``tests/fixtures``) load and give the outputs
saved with them."""

import pathlib

import keras
import numpy as np
import pytest

import tf_memlayers  # noqa: F401  (registers the package's classes)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def saved():
    return np.load(FIXTURES / "v0.2_outputs.npz")


def _load(name):
    return keras.saving.load_model(FIXTURES / f"{name}_v0.2.keras")


def _same(actual, expected):
    np.testing.assert_allclose(keras.ops.convert_to_numpy(actual), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["key_value_predict_parallel", "ngram_cell"])
def test_language_models_from_0_2_load(saved, name):
    _same(_load(f"lm_{name}")(saved["lm_tokens"]), saved[f"lm_{name}_logits"])


def test_last_word_model_with_a_filled_cache_from_0_2_loads(saved):
    model = _load("fill_last_word_cache")
    _same(model(saved["cache_context"]), saved["cache_logits"])


def test_snli_dual_am_gru_saved_with_the_fused_loop_from_0_2_loads(saved):
    model = _load("snli_dual_am_gru_fused")
    assert model.get_layer("encoder").encoder_layers[0].fused_loop is True
    _same(model([saved["snli_premise"], saved["snli_hypothesis"]]), saved["snli_probabilities"])


def test_every_cell_from_0_2_loads(saved):
    _same(_load("cells")(saved["cells_sequences"]), saved["cells_outputs"])
