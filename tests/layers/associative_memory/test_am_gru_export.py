"""(Dual) AM-GRU models (``fused_loop="auto"``) convert to TFLite's built-in operators with the
Keras outputs, one step and fixed lengths; the fused loop's batch split as on 8 cores."""

import keras
import numpy as np
import pytest

from tests.memory_attention_reference import randomize
from tests.support import assert_close, tensorflow_only, tflite_runner
from tf_memlayers.layers import AssociativeGRU, DualAssociativeGRU, SlidingWindowAttention

pytestmark = tensorflow_only("converts with TensorFlow's TFLite converter")


@pytest.fixture(autouse=True)
def eight_shards(monkeypatch):
    from tf_memlayers.ops import associative_gru_loop

    monkeypatch.setattr(associative_gru_loop, "default_num_shards", lambda: 8)


def _check_converted(model, rng):
    """The converted model's outputs against the Keras model's, by position, with random
    weights and inputs."""
    import tensorflow as tf

    randomize(model, rng, scale=0.5)
    inputs = [rng.normal(size=tuple(t.shape)).astype("float32") for t in model.inputs]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    runner = tflite_runner(converter.convert())
    expected = [keras.ops.convert_to_numpy(y) for y in keras.tree.flatten(model(inputs))]
    got = runner(**dict(zip([spec.name for spec in model.inputs], inputs)))
    # Keras names the outputs output_0, output_1, ... in the model's order.
    got = [got[name] for name in sorted(got, key=lambda name: int(name.split("_")[-1]))]
    assert_close(got, expected, atol=1e-5)  # as many outputs, each close


@pytest.mark.parametrize("steps, batch", [(1, 1), (1, 3), (12, 4)])
def test_window_attention_then_the_am_gru_with_explicit_states(steps, batch):
    attention = SlidingWindowAttention(window=3, return_memory=True)
    am_gru = AssociativeGRU(8, num_copies=2, return_sequences=True, return_state=True)
    assert am_gru.uses_fused_loop  # the default chooses the fused loop
    x = keras.Input((steps, 6), batch_size=batch, name="x")
    memory_shape = attention.compute_output_spec(keras.KerasTensor((batch, steps, 6)))[1].shape
    memory = keras.Input(batch_shape=tuple(memory_shape), name="memory")
    attended, new_memory = attention(x, initial_memory=memory)
    memory_width, output_width = am_gru.cell.state_size  # n * C, n
    states = [
        keras.Input(batch_shape=(batch, memory_width), name="am_memory"),
        keras.Input(batch_shape=(batch, output_width), name="am_output"),
    ]
    outputs, *new_states = am_gru(attended, initial_state=states)
    model = keras.Model([x, memory, *states], [outputs, new_memory, *new_states])
    _check_converted(model, np.random.default_rng(steps + batch))


def test_a_fixed_length_dual_am_gru_reading_a_premise_memory():
    layer = DualAssociativeGRU(8, num_copies=2, return_sequences=True)
    assert layer.uses_fused_loop
    hypothesis = keras.Input((10, 6), batch_size=4, name="hypothesis")
    states = [
        keras.Input(batch_shape=(4, width), name=name)
        for name, width in zip(("memory", "output", "premise_memory"), layer.cell.state_size)
    ]
    model = keras.Model([hypothesis, *states], layer(hypothesis, initial_state=states))
    _check_converted(model, np.random.default_rng(7))
