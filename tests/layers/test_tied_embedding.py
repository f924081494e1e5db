"""TiedEmbedding: a keras.layers.Embedding that also maps vectors back to logits."""

import re

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase, masking_checks
from tests.support import as_numpy, assert_close, keras_lstm
from tf_memlayers import TiedEmbedding


def _tied_language_model(tokens, masked, vocabulary):
    """Embedding, LSTM, and the embedding's transpose as the output layer (weight tying)."""
    embedding = TiedEmbedding(vocabulary, 4, mask_zero=masked)
    features = keras_lstm(4, return_sequences=True)(embedding(tokens))
    return keras.layers.Activation("linear", dtype="float32")(embedding(features, reverse=True))


class TiedEmbeddingTest(LayerTestCase):
    layer_cls = TiedEmbedding

    def test_layer_behaviors(self):
        checks = masking_checks((2, 3, 4), 2, (2, 3), input_dtype="int32")
        init = dict(input_dim=10, output_dim=4, mask_zero=True)
        self.run_layer_test(TiedEmbedding, init, **checks)

    def test_journey(self, tmp_path):
        self.run_journey_test("token", _tied_language_model, tmp_path)

    def test_config_and_output_spec(self):
        config = dict(input_dim=6, output_dim=4, output_bias_initializer="ones", mask_zero=True)
        self.run_config_test(TiedEmbedding, **config, reverse_dtype="float32", name="tied")
        for logits in (None, "float32"):  # float32 logits under mixed_float16 too
            make = lambda p, d=logits: TiedEmbedding(6, 4, dtype=p, reverse_dtype=d)  # noqa: E731
            self.run_output_spec_test(make, (2, 3), input_dtype="int32")
            self.run_output_spec_test(make, (2, 3, 4), reverse=True)
        msg = "TiedEmbedding: `reverse_dtype` must be one of 'float16', 'bfloat16', 'float32'"
        for bad in ("int32", "float31"):  # a dtype, and a name Keras does not know
            pytest.raises(ValueError, TiedEmbedding, 6, 4, reverse_dtype=bad).match(msg)


def test_reverse_uses_the_embedding_matrix_and_bias_and_ids_are_masked_as_keras_embeddings():
    layer, ids = TiedEmbedding(6, 4, output_bias_initializer="ones"), np.array([[1, 5]])
    mask = TiedEmbedding(6, 4, mask_zero=True).compute_mask(np.array([[1, 0, 2, 0]], "float32"))
    np.testing.assert_array_equal(as_numpy(mask), [[True, False, True, False]])
    vectors = layer(ids)
    logits = layer(vectors, reverse=True)
    expected = as_numpy(vectors) @ as_numpy(layer.embeddings).T + 1.0
    np.testing.assert_allclose(as_numpy(logits), expected, rtol=1e-6)
    # keras.Input's default dtype is float32: such ids are masked, and the GRU carries its
    # state over their padding, as behind `keras.layers.Embedding`; the vectors' logits keep
    # the mask the GRU passes on (the pooling averages the valid steps only).
    inputs, ids = keras.Input((4,)), np.array([[3, 5, 0, 0], [2, 0, 0, 0]], "float32")
    embedding = TiedEmbedding(10, 4, mask_zero=True)
    states = keras.layers.GRU(4, return_sequences=True)(embedding(inputs))
    pooled = keras.layers.GlobalAveragePooling1D()(embedding(states, reverse=True))
    states, pooled = map(as_numpy, keras.Model(inputs, [states, pooled])(ids))
    np.testing.assert_array_equal(states[0, 2:], states[0, [1, 1]])
    np.testing.assert_array_equal(states[1, 1:], states[1, [0, 0, 0]])
    logits = as_numpy(embedding(states, reverse=True))
    assert_close([*pooled], [logits[0, :2].mean(0), logits[1, 0]], 1e-7, 1e-5)


@pytest.mark.parametrize("enable", [False, True])
def test_lora_trains_the_matrix_of_both_directions_and_the_file_loads(enable, tmp_path):
    embedding = TiedEmbedding(10, 4, **({} if enable else dict(lora_rank=2, lora_alpha=3)))
    inputs = keras.Input((3,), dtype="int32")
    model = keras.Model(inputs, embedding(embedding(inputs), reverse=True))
    if enable:
        embedding.enable_lora(2, lora_alpha=3)
    trained = sorted(v.name.removeprefix("lora_embeddings_") for v in embedding.trainable_weights)
    assert trained == ["a", "b", "output_bias"] and embedding.lora_alpha == 3
    assert [v.name for v in embedding.non_trainable_weights] == ["embeddings"]
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    model.compile("sgd", "mse")
    model.fit(ids, np.ones((2, 3, 10)), verbose=0)
    assert np.abs(as_numpy(embedding.lora_embeddings_b)).max() > 0
    model.save(tmp_path / "lora.keras")
    restored = keras.models.load_model(tmp_path / "lora.keras")
    np.testing.assert_allclose(as_numpy(restored(ids)), as_numpy(model(ids)), rtol=1e-6)


@pytest.mark.parametrize("weights", [np.ones((3, 4)), [np.ones((3, 4))]])
def test_weights_set_the_embedding_matrix_as_in_keras_embedding(weights):
    layer = TiedEmbedding(3, 4, output_bias_initializer="ones", weights=weights)
    np.testing.assert_array_equal(as_numpy(layer.embeddings), np.ones((3, 4)))
    np.testing.assert_array_equal(as_numpy(layer.output_bias), np.ones(3))
    pytest.raises(ValueError, TiedEmbedding, 3, 4, weights=np.ones((4, 3)))


WIDTH_4 = "`inputs` must have width 4 (the embedding's output_dim, for reverse=True); got shape"


@pytest.mark.parametrize(
    "reverse, width, error, fragment",
    [
        (True, 5, ValueError, WIDTH_4 + " (2, 3, 5)"),
        ("yes", 4, TypeError, "`reverse` must be a bool, got 'yes'"),
    ],
)
def test_bad_reverse_calls_are_named(reverse, width, error, fragment):
    layer, vectors = TiedEmbedding(10, 4), np.ones((2, 3, width), "float32")
    for call, given in ((layer, vectors), (layer.compute_output_shape, vectors.shape)):
        pytest.raises(error, call, given, reverse=reverse).match(re.escape(fragment))
