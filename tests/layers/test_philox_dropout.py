"""PhiloxDropout: keras.layers.Dropout with its TensorFlow masks drawn by a named algorithm."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase, masking_checks
from tests.support import TF_FUNCTION, tensorflow_only
from tf_memlayers import ConditionalEncoder, PhiloxDropout


class PhiloxDropoutTest(LayerTestCase):
    layer_cls = PhiloxDropout

    @pytest.mark.parametrize(
        "init_kwargs", [dict(rate=0.5, seed=1), dict(rate=0.3, noise_shape=(None, 1, 4))]
    )
    def test_layer_behaviors(self, init_kwargs):
        checks = masking_checks((2, 3, 4), 0, expected_num_seed_generators=1)
        self.run_layer_test(PhiloxDropout, init_kwargs, **checks)

    def test_journey(self, tmp_path):
        build = lambda e: keras.layers.GRU(8, return_sequences=True)(PhiloxDropout(0.3)(e))  # noqa: E731
        # XLA on TensorFlow: test_compiled_masks_are_philox_at_the_rate_and_new_every_step.
        self.run_journey_test("step", build, tmp_path, xla_on_tensorflow=False)

    def test_config_output_spec_and_empty_input(self):
        self.run_config_test(PhiloxDropout, rate=0.3, noise_shape=(None, 1, 4), seed=5)
        self.run_output_spec_test(lambda dtype: PhiloxDropout(0.5, dtype=dtype), (2, 5, 4))
        # Its output is the input, dropped out: no memory.
        self.run_empty_input_test(lambda: PhiloxDropout(0.5), last_output_is_memory=False)


X = np.random.default_rng(0).normal(size=(6, 7, 5)).astype("float32")


def _dropped(outputs, rate, inputs=X):
    """The mask of ``outputs``, after checking that every kept unit is ``inputs / (1 - rate)``."""
    outputs = keras.ops.convert_to_numpy(outputs)
    kept = outputs != 0
    np.testing.assert_allclose(outputs[kept], (inputs / (1 - rate))[kept], rtol=1e-6)
    return ~kept


@pytest.mark.parametrize("noise_shape", [None, (None, 1, 5), (6, 7, 1)])
def test_drops_what_keras_dropout_drops_with_the_same_seed(noise_shape):
    # Eagerly on CPU Keras's TensorFlow dropout uses Philox too (elsewhere the layer is Keras's).
    ours = PhiloxDropout(0.4, noise_shape=noise_shape, seed=3)
    theirs, masks = keras.layers.Dropout(0.4, noise_shape=noise_shape, seed=3), []
    for _ in range(2):
        got = keras.ops.convert_to_numpy(ours(X, training=True))
        np.testing.assert_array_equal(got, keras.ops.convert_to_numpy(theirs(X, training=True)))
        masks.append(_dropped(got, 0.4))
    assert not np.array_equal(masks[0], masks[1])  # a new mask at every call
    for mask in masks:  # a broadcast mask is shared along the dimensions of size 1
        for axis, size in enumerate(noise_shape or ()):
            if size == 1:
                assert (mask == mask.take([0], axis=axis)).all()


@tensorflow_only(TF_FUNCTION)
def test_compiled_masks_are_philox_at_the_rate_and_new_every_step():
    import tensorflow as tf

    layer = PhiloxDropout(0.3, seed=5)
    inputs = np.random.default_rng(1).normal(size=(64, 20, 50)).astype("float32")
    step = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    first, second = (_dropped(step(inputs), 0.3, inputs) for _ in range(2))
    for mask in (first, second):
        assert abs(mask.mean() - 0.3) < 0.01  # 64,000 units
    assert 0.05 < (first != second).mean()
    graph = step.get_concrete_function(tf.TensorSpec((2, 5), tf.float32)).graph
    algorithms = [
        int(tf.get_static_value(op.inputs[-1]))
        for op in graph.get_operations()
        if op.type.startswith("StatelessRandom") and op.inputs[-1].op.name.endswith("/alg")
    ]
    # TensorFlow's default ("auto_select", 3) may change with the device; Philox is 1.
    assert algorithms and set(algorithms) == {tf.random.Algorithm.PHILOX.value}


def test_inference_and_rate_zero_pass_the_input_through_rate_one_drops_all_and_float16_stays():
    for layer, training, want in [(PhiloxDropout(0.5), False, X), (PhiloxDropout(0.0), True, X)]:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(X, training=training)), want)
    dropped = keras.ops.convert_to_numpy(PhiloxDropout(1.0)(X, training=True))
    np.testing.assert_array_equal(dropped, np.zeros_like(X))
    # Under mixed_float16 the outputs keep the input dtype.
    outputs = PhiloxDropout(0.5, seed=2, dtype="mixed_float16")(X, training=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == "float16"
    _dropped(keras.ops.cast(outputs, "float32"), 0.5, X.astype("float16").astype("float32"))


@tensorflow_only("the builders' models are tested on TensorFlow (tests/models)")
def test_the_builders_use_it():
    from tf_memlayers.models import build_language_model
    from tf_memlayers.models.snli import build_snli_model

    model = build_language_model(30, units=4, embedding_dim=4, dropout=0.2, stateful=False)
    first = keras.layers.GRU(4, return_sequences=True, return_state=True)
    encoder = ConditionalEncoder([first, keras.layers.GRU(4, return_state=True)])
    snli = build_snli_model(30, encoder=encoder, embedding_dim=4)
    for built in (model, snli):
        dropouts = [layer for layer in built.layers if isinstance(layer, keras.layers.Dropout)]
        assert dropouts and all(type(layer) is PhiloxDropout for layer in dropouts)
