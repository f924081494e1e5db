"""TiedEmbedding: a keras.layers.Embedding that also maps vectors back to logits."""

import keras
import numpy as np
import pytest
from keras.src import testing

from tests.layer_test_case import LayerTestCase
from tests.support import keras_lstm
from tf_memlayers import TiedEmbedding
from tf_memlayers.models._compiling import compile_and_build_optimizer


def _tied_language_model(tokens, masked, vocabulary):
    """Embedding, LSTM, and the embedding's transpose as the output layer (weight tying)."""
    embedding = TiedEmbedding(vocabulary, 4, mask_zero=masked)
    features = keras_lstm(4, return_sequences=True)(embedding(tokens))
    return keras.layers.Activation("linear", dtype="float32")(embedding(features, reverse=True))


class TiedEmbeddingTest(LayerTestCase):
    """The shared suites of `TiedEmbedding` (tests/layer_test_case.py)."""

    layer_cls = TiedEmbedding
    make = staticmethod(lambda **kw: TiedEmbedding(10, 4, **kw))
    not_in = {
        "empty": "keras.layers.Embedding's lookup of integer ids",
        "nan_padding": "reads integer ids, which cannot be NaN",
        "output_spec": "two calls (ids, and vectors with reverse=True): "
        "test_output_spec_is_what_the_symbolic_and_eager_calls_give",
        "flags": "has no boolean arguments of its own",
    }
    keras_checks = {
        "tied_embedding": (
            TiedEmbedding,
            {"input_dim": 10, "output_dim": 4, "mask_zero": True},
            dict(
                input_shape=(2, 3),
                input_dtype="int32",
                expected_output_shape=(2, 3, 4),
                expected_num_trainable_weights=2,
                supports_masking=True,
            ),
        ),
    }
    journeys = {
        "TiedEmbedding": ("token", _tied_language_model),
    }


class TiedEmbeddingLayerTest(testing.TestCase):
    def test_layer_protocol(self):
        self.run_layer_test(
            TiedEmbedding,
            init_kwargs={"input_dim": 7, "output_dim": 3, "mask_zero": True},
            input_data=np.array([[1, 2, 0], [3, 0, 0]], "int32"),
            expected_output_shape=(2, 3, 3),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=0,
            expected_output_dtype="float32",
            supports_masking=True,
            run_training_check=False,  # integer inputs
            run_mixed_precision_check=True,
        )


def test_reverse_uses_the_embedding_matrix_and_bias():
    layer = TiedEmbedding(6, 4, output_bias_initializer="ones")
    ids = np.array([[1, 5]])
    vectors = layer(ids)
    logits = layer(vectors, reverse=True)
    expected = np.asarray(vectors) @ np.asarray(layer.embeddings).T + 1.0
    np.testing.assert_allclose(np.asarray(logits), expected, rtol=1e-6)
    assert layer.compute_output_shape((2, 3, 4), reverse=True) == (2, 3, 6)


def test_mask_and_mixed_precision():
    keras.config.set_dtype_policy("mixed_float16")
    layer = TiedEmbedding(6, 4, mask_zero=True)
    ids = np.array([[1, 0]])
    vectors = layer(ids)
    assert vectors.dtype == "float16"
    assert layer(vectors, reverse=True).dtype == "float16"
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(ids)), [[True, False]])


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize("reverse", [False, True])
def test_output_spec_is_what_the_symbolic_and_eager_calls_give(policy, reverse):
    keras.config.set_dtype_policy(policy)
    layer = TiedEmbedding(6, 4)
    if reverse:
        data = np.ones((2, 3, 4), "float32")
        symbolic = keras.Input((3, 4), batch_size=2)
    else:
        data = np.ones((2, 3), "int32")
        symbolic = keras.Input((3,), batch_size=2, dtype="int32")
    spec = layer.compute_output_spec(symbolic, reverse=reverse)
    wanted = ((2, 3, 6 if reverse else 4), "float16" if policy == "mixed_float16" else "float32")
    for got in (spec, layer(symbolic, reverse=reverse), layer(data, reverse=reverse)):
        assert (tuple(got.shape), keras.backend.standardize_dtype(got.dtype)) == wanted


def test_config_round_trip_and_saving(tmp_path):
    layer = TiedEmbedding(6, 4, output_bias_initializer="ones", mask_zero=True, name="tied")
    clone = TiedEmbedding.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    inputs = keras.Input((None,), dtype="int32")
    embedding = TiedEmbedding(6, 4, name="tied")
    model = keras.Model(inputs, embedding(embedding(inputs), reverse=True))
    ids = np.array([[1, 2, 3]])
    path = tmp_path / "tied.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(restored.predict(ids, verbose=0), model.predict(ids, verbose=0))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"input_dim": 0, "output_dim": 2}, "input_dim"),
        ({"input_dim": 3, "output_dim": 2.0}, "output_dim"),
    ],
)
def test_bad_sizes_name_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        TiedEmbedding(**kwargs)


@pytest.mark.parametrize("weights", [np.ones((3, 4)), [np.ones((3, 4))]])
def test_weights_set_the_embedding_matrix_as_in_keras_embedding(weights):
    layer = TiedEmbedding(3, 4, output_bias_initializer="ones", weights=weights)
    np.testing.assert_array_equal(np.asarray(layer.embeddings), np.ones((3, 4)))
    np.testing.assert_array_equal(np.asarray(layer.output_bias), np.ones(3))
    with pytest.raises(ValueError):
        TiedEmbedding(3, 4, weights=np.ones((4, 3)))


@pytest.mark.parametrize(
    "reverse, width, error, fragment",
    [
        (
            True,
            5,
            ValueError,
            "`inputs` must have width 4 (the embedding's output_dim, for "
            "reverse=True); got shape (2, 3, 5)",
        ),
        ("yes", 4, TypeError, "`reverse` must be a bool, got 'yes'"),
    ],
)
def test_bad_reverse_calls_are_named(reverse, width, error, fragment):
    layer = TiedEmbedding(10, 4)
    vectors = np.ones((2, 3, width), "float32")
    with pytest.raises(error) as raised:
        layer(vectors, reverse=reverse)
    assert fragment in str(raised.value)
    with pytest.raises(error) as raised:
        layer.compute_output_shape(vectors.shape, reverse=reverse)
    assert fragment in str(raised.value)


def test_a_quantized_dtype_is_refused():
    # Keras would run its quantized call, which has no `reverse`.
    with pytest.raises(ValueError, match="TiedEmbedding: `dtype`.*int8_from_float32"):
        TiedEmbedding(10, 4, dtype="int8_from_float32")


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_journey_fit_on_a_partial_batch_with_a_mask(tmp_path, policy):
    keras.config.set_dtype_policy(policy)
    tokens = keras.Input((None,), dtype="int32")
    embedding = TiedEmbedding(9, 4, mask_zero=True, name="tied")
    hidden = keras.layers.GRU(4, return_sequences=True)(embedding(tokens))
    logits = keras.layers.Activation("linear", dtype="float32")(embedding(hidden, reverse=True))
    model = keras.Model(tokens, logits)
    compile_and_build_optimizer(
        model, "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    ids = np.array([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 1], [2, 2, 0, 0], [3, 0, 0, 0]])
    history = model.fit(ids, ids, batch_size=2, epochs=2, verbose=0)  # batches of 2, 2 and 1
    assert np.all(np.isfinite(history.history["loss"]))
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(restored.predict(ids, verbose=0), model.predict(ids, verbose=0))
