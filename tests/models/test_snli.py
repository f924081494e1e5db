"""The SNLI model builder: the paper's model, the fused loop, export and TFLite. (Every
backend: test_builders_on_every_backend.py; bad arguments: test_bad_arguments.py.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.memory_attention_reference import randomize
from tests.pair_encoders import snli_model
from tests.support import assert_close, tflite_runner
from tf_memlayers.layers import DualAssociativeEncoder
from tf_memlayers.models.snli import (
    build_fixed_length_snli_model,
    build_snli_model,
    compile_snli_model,
)


def test_the_default_encoder_and_the_optimizer_are_the_papers():
    model = build_snli_model(20, embedding_dim=6)
    first, top = model.get_layer("encoder").encoder_layers
    assert isinstance(first, DualAssociativeEncoder) and isinstance(top, keras.layers.GRU)
    assert (first.units, first.num_copies, top.units) == (100, 8, 100)
    assert model.get_layer("relu_0").units == model.get_layer("relu_1").units == 100
    assert model.name == "snli"
    features = keras.Model(model.inputs, model.get_layer("features").output)
    p, h, distance = np.split(features.predict([np.array([[3, 4]]), np.array([[5, 0]])]), 3, -1)
    np.testing.assert_allclose(distance, np.abs(p - h))  # the paper's |p - h| beside p and h
    assert not build_snli_model(20, train_embeddings=False).get_layer("embedding").trainable
    # Adam without momentum, with the clip norm given.
    for clip_norm, expected in [(5.0, 5.0), (0.5, 0.5), (0, None), (None, None)]:
        optimizer = compile_snli_model(model, clip_norm=clip_norm).optimizer
        assert optimizer.global_clipnorm == expected and optimizer.clipnorm is None
        assert float(optimizer.beta_1) == 0.0 and float(optimizer.learning_rate) == np.float32(1e-3)


def _builtin_tflite(model):
    """``model`` converted with TFLite's built-in operators only (no Flex)."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


# The Dual AM-GRU with each loop (the fixed-length copy runs Keras's loop either way).
@pytest.mark.parametrize(
    "kind, fused_loop, unroll, batch_size",
    [("gru", "auto", True, None), ("am_gru", "auto", True, None), ("dual_am_gru", True, True, None)]
    + [("dual_am_gru", False, False, 3), ("word_by_word", "auto", True, None)],
)
def test_exported_model_and_fixed_length_copy_in_tflite_with_builtin_operators_only(
    kind, fused_loop, unroll, batch_size, tmp_path
):
    rng = np.random.default_rng(5)
    model = snli_model(30, kind=kind, units=8, embedding_dim=6, num_copies=2, fused_loop=fused_loop)
    # Weights far from the ±0.05 init, so that every layer shows in the probabilities.
    randomize(model, rng, scale=0.8)
    # Sentences shorter than the fixed lengths, padded with id 0 (masked).
    premise = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 2, 11], [12, 13, 0, 0, 0, 0]], "int32")
    hypothesis = np.array([[1, 2, 3, 4], [5, 6, 0, 0], [14, 0, 0, 0]], "int32")
    expected = keras.ops.convert_to_numpy(model([premise, hypothesis]))
    # Not vacuous: the rows differ by far more than the tolerance; the padding is ignored.
    assert np.ptp(expected, axis=0).max() > 100 * 1e-5
    assert_close(model([premise[:1, :3], hypothesis[:1]]), expected[:1], atol=1e-6)

    if kind == "dual_am_gru":
        # The exported model's time loops over sentences of any length convert to TFLite with
        # TensorFlow's own list ops (SELECT_TF_OPS), which an interpreter runs with the Flex
        # delegate only; built-in operators alone are refused (one conversion is enough).
        model.export(str(tmp_path / "saved"), verbose=False)
        saved = tf.saved_model.load(str(tmp_path / "saved"))  # (kept: its variables with it)
        np.testing.assert_allclose(saved.serve([premise, hypothesis]), expected, atol=1e-6)
        converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved"))
        ops = tf.lite.OpsSet
        converter.target_spec.supported_ops = [ops.TFLITE_BUILTINS, ops.SELECT_TF_OPS]
        converter._experimental_lower_tensor_list_ops = False
        assert len(converter.convert()) > 0
        if batch_size is None:
            with pytest.raises(Exception, match="TensorList"):
                _builtin_tflite(model)
    fixed = build_fixed_length_snli_model(
        model, premise_length=6, hypothesis_length=4, batch_size=batch_size, unroll=unroll
    )
    assert [tuple(i.shape) for i in fixed.inputs] == [(batch_size, 6), (batch_size, 4)]
    np.testing.assert_allclose(fixed([premise, hypothesis]), expected, rtol=0, atol=1e-6)

    runner = tflite_runner(_builtin_tflite(fixed))
    (output_name,) = runner.get_output_details()
    got = runner(premise=premise, hypothesis=hypothesis)[output_name]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    if batch_size is None:  # the batch size stays free
        got = runner(premise=premise[1:], hypothesis=hypothesis[1:])[output_name]
        np.testing.assert_allclose(got, expected[1:], rtol=0, atol=1e-5)
