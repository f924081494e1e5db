"""`.keras` files saved by tf-memlayers 0.1 and 0.2 (``tests/fixtures``, written by those
versions' model builders and layers) load in this version and give the outputs saved with them."""

import pathlib

import keras
import numpy as np
import pytest

import tf_memlayers  # registers the package's classes

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
# {file: (the inputs' names, the outputs' name)}, both in the outputs' file of its version
SAVED = {
    "tied_key_value_lm_v0.1": (["lm_tokens"], "lm_logits"),
    "snli_am_gru_v0.1": (["am_gru_premise", "am_gru_hypothesis"], "am_gru_probabilities"),
    "snli_dual_am_gru_v0.1": (
        ["dual_am_gru_premise", "dual_am_gru_hypothesis"],
        "dual_am_gru_probabilities",
    ),
    "lm_key_value_predict_parallel_v0.2": (["lm_tokens"], "lm_key_value_predict_parallel_logits"),
    "lm_ngram_cell_v0.2": (["lm_tokens"], "lm_ngram_cell_logits"),
    # The last-word model with attention pooling and a filled heap cache.
    "fill_last_word_cache_v0.2": (["cache_context"], "cache_logits"),
    "snli_dual_am_gru_fused_v0.2": (["snli_premise", "snli_hypothesis"], "snli_probabilities"),
    # A stack of every cell inside keras.layers.RNN.
    "cells_v0.2": (["cells_sequences"], "cells_outputs"),
}


@pytest.mark.parametrize("name", list(SAVED))
def test_a_saved_model_loads_and_gives_the_saved_outputs(name):
    (input_names, output_name), version = SAVED[name], name.rsplit("_", 1)[1]
    saved = np.load(FIXTURES / f"{version}_outputs.npz")
    model = keras.saving.load_model(FIXTURES / f"{name}.keras")
    inputs = [saved[key] for key in input_names]
    inputs = inputs if len(inputs) > 1 else inputs[0]
    if version == "v0.1":
        got, atol = model.predict(inputs, verbose=0), 1e-6
    else:
        got, atol = keras.ops.convert_to_numpy(model(inputs)), 1e-5
    np.testing.assert_allclose(got, saved[output_name], rtol=0, atol=atol)
    if name == "tied_key_value_lm_v0.1":
        embedding = model.get_layer("embedding")
        assert isinstance(embedding, tf_memlayers.TiedEmbedding)
        assert isinstance(embedding, keras.layers.Embedding)
    if name == "snli_dual_am_gru_fused_v0.2":  # saved with the fused loop, which torch lacks
        fused_loop = True if keras.backend.backend() in ("tensorflow", "jax") else "auto"
        assert model.get_layer("encoder").encoder_layers[0].fused_loop == fused_loop
