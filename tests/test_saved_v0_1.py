"""`.keras` files saved by tf-memlayers 0.1 (``tests/fixtures``) load and give the outputs
saved with them."""

import pathlib

import keras
import numpy as np
import pytest

import tf_memlayers  # noqa: F401  (registers the package's classes)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def saved_outputs():
    return np.load(FIXTURES / "v0.1_outputs.npz")


def test_tied_language_model_from_0_1_loads(saved_outputs):
    model = keras.saving.load_model(FIXTURES / "tied_key_value_lm_v0.1.keras")
    embedding = model.get_layer("embedding")
    assert isinstance(embedding, tf_memlayers.TiedEmbedding)
    assert isinstance(embedding, keras.layers.Embedding)
    logits = model.predict(saved_outputs["lm_tokens"], verbose=0)
    np.testing.assert_allclose(logits, saved_outputs["lm_logits"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_snli_model_from_0_1_loads(saved_outputs, kind):
    model = keras.saving.load_model(FIXTURES / f"snli_{kind}_v0.1.keras")
    inputs = [saved_outputs[f"{kind}_premise"], saved_outputs[f"{kind}_hypothesis"]]
    probabilities = model.predict(inputs, verbose=0)
    np.testing.assert_allclose(
        probabilities, saved_outputs[f"{kind}_probabilities"], rtol=0, atol=1e-6
    )
