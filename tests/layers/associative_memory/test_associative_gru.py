"""`AssociativeGRU` (input projections before the loop) against `RNN(AssociativeGRUCell)`."""

import os

import keras
import numpy as np
import pytest
from keras import ops

from tests.am_gru_reference import permutations
from tests.layer_test_case import (
    REFUSES_EMPTY,
    RNN_LAYER_FLAGS,
    LayerTestCase,
    ResetSequenceTests,
)
from tests.layers.associative_memory.test_associative_gru_cell import (
    random_weights,
    reference_run,
    set_cell_weights,
)
from tests.support import (
    BACKEND,
    FUSED_LOOP,
    TF_DISTRIBUTE,
    gradients,
    json_report_of_script,
    masked_rnn,
    tensorflow_only,
)
from tf_memlayers.compat import load_original_weights, original_variable_names
from tf_memlayers.layers import AssociativeGRU, AssociativeGRUCell, DualAssociativeGRU
from tf_memlayers.models._compiling import compile_and_build_optimizer


class AssociativeGRUTest(ResetSequenceTests, LayerTestCase):
    """The shared suites of `AssociativeGRU` (tests/layer_test_case.py)."""

    layer_cls = AssociativeGRU
    make = staticmethod(lambda **kw: AssociativeGRU(4, **kw))
    not_in = {"empty": REFUSES_EMPTY}
    flags = RNN_LAYER_FLAGS
    reference = "am_gru_reference"
    keras_checks = {
        **{
            f"am_gru_{loop}": (
                AssociativeGRU,
                {"units": 4, "num_copies": 2, "return_sequences": True, "fused_loop": fused},
                dict(
                    input_shape=(2, 3, 4),
                    expected_output_shape=(2, 3, 4),
                    expected_num_trainable_weights=5,
                    supports_masking=True,
                ),
            )
            for loop, fused in (("keras_loop", False), ("fused_loop", True))
        },
    }
    journeys = {
        "AssociativeGRU": (
            "step",
            lambda e: AssociativeGRU(8, num_copies=2, return_sequences=True)(e),
        ),
        "AssociativeGRU_fused_loop": (
            "step",
            lambda e: AssociativeGRU(8, num_copies=2, return_sequences=True, fused_loop=True)(e),
        ),
    }
    nan_padding = {
        "am_gru_keras_loop": lambda: AssociativeGRU(
            4, num_copies=2, return_sequences=True, zero_output_for_mask=True
        ),
        "am_gru_fused_loop": lambda: AssociativeGRU(
            4, num_copies=2, return_sequences=True, zero_output_for_mask=True, fused_loop=True
        ),
    }
    output_spec = {
        "am_gru_states": (
            lambda dtype: AssociativeGRU(
                4, num_copies=2, return_sequences=True, return_state=True, dtype=dtype
            ),
            (2, 5, 4),
            {},
        ),
        "am_gru_fused_last": (
            lambda dtype: AssociativeGRU(4, num_copies=3, fused_loop=True, dtype=dtype),
            (2, 5, 4),
            {},
        ),
        "am_gru_retrievals": (
            lambda dtype: AssociativeGRU(
                4, num_copies=1, return_retrievals=True, return_sequences=True, dtype=dtype
            ),
            (2, 5, 4),
            {},
        ),
    }


# Both time loops of `AssociativeGRU`: Keras's (autodiff backward) and the fused one.
FUSED = pytest.mark.parametrize(
    "fused_loop",
    [False, pytest.param(True, marks=tensorflow_only(FUSED_LOOP))],
    ids=["keras_loop", "fused_loop"],
)


def _pair(units, copies, input_dim, weights=None, fused_loop=False, **rnn_kwargs):
    """A cell-form RNN and an `AssociativeGRU` with the same weights, both built."""
    cell_form = keras.layers.RNN(AssociativeGRUCell(units, num_copies=copies), **rnn_kwargs)
    layer = AssociativeGRU(units, num_copies=copies, fused_loop=fused_loop, **rnn_kwargs)
    cell_form.build((None, None, input_dim))
    layer.build((None, None, input_dim))
    if weights is not None:
        set_cell_weights(cell_form.cell, weights)
    layer.cell.set_weights(cell_form.cell.get_weights())
    return cell_form, layer


def _mask_with_holes(batch, steps):
    mask = np.ones((batch, steps), bool)
    mask[1, steps - 2 :] = False  # right padding
    mask[2, 1] = False  # a hole
    return mask


@FUSED
@pytest.mark.parametrize("copies", [1, 3, 8])
def test_layer_matches_the_original_step_in_float64(float64_policy, copies, fused_loop):
    rng = np.random.default_rng(copies)
    units, batch, steps = 12, 3, 5
    xs = rng.normal(size=(batch, steps, 4))
    w = random_weights(rng, 4, units)
    _, layer = _pair(
        units, copies, 4, w, fused_loop=fused_loop, return_sequences=True, return_state=True
    )
    outputs, memory, last = layer(xs)
    zeros = np.zeros((batch, units * copies)), np.zeros((batch, units))
    perms = permutations(units // 2, copies)
    ref_outputs, ref_memory = reference_run(xs, *zeros, w, perms)
    np.testing.assert_allclose(np.asarray(outputs), ref_outputs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(memory), ref_memory, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(last), ref_outputs[:, -1], atol=1e-10, rtol=0)


@FUSED
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("zero_output_for_mask", [False, True])
def test_layer_equals_the_cell_form_with_masks_and_initial_state(
    float64_policy, go_backwards, zero_output_for_mask, fused_loop
):
    rng = np.random.default_rng(20)
    units, copies, batch, steps = 8, 3, 3, 6
    xs = rng.normal(size=(batch, steps, 5))
    kwargs = dict(
        return_sequences=True,
        return_state=True,
        go_backwards=go_backwards,
        zero_output_for_mask=zero_output_for_mask,
    )
    cell_form, layer = _pair(
        units, copies, 5, random_weights(rng, 5, units), fused_loop=fused_loop, **kwargs
    )
    mask = _mask_with_holes(batch, steps)
    initial = [rng.normal(size=(batch, units * copies)), rng.normal(size=(batch, units))]
    for init in (None, initial):
        expected = masked_rnn(cell_form, xs, mask, initial_state=init)
        got = layer(xs, mask=mask, initial_state=init)
        for e, g in zip(expected, got):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), atol=1e-12, rtol=0)


@FUSED
@pytest.mark.parametrize("go_backwards", [False, True])
def test_layer_gradients_equal_the_cell_form(float64_policy, fused_loop, go_backwards):
    rng = np.random.default_rng(21)
    units, copies, batch, steps = 8, 4, 3, 6
    xs = rng.normal(size=(batch, steps, 5))
    mask = _mask_with_holes(batch, steps)
    initial = [rng.normal(size=(batch, units * s)) for s in (copies, 1)]
    cell_form, layer = _pair(
        units,
        copies,
        5,
        random_weights(rng, 5, units),
        fused_loop=fused_loop,
        return_sequences=True,
        return_state=True,
        go_backwards=go_backwards,
        # The cell form's masked outputs are wrong on JAX otherwise (KERAS_MASKED_OUTPUT).
        zero_output_for_mask=BACKEND != "tensorflow",
    )
    grads = []
    for rnn in (cell_form, layer):

        def loss(xs, *initial, rnn=rnn):
            outputs, memory, last = rnn(xs, mask=mask, initial_state=list(initial))
            return ops.sum(ops.sin(outputs)) + ops.sum(ops.square(memory)) + ops.sum(ops.cos(last))

        _, weight_grads, input_grads = gradients(loss, rnn.cell.trainable_weights, [xs, *initial])
        grads.append(input_grads + weight_grads)
    for e, g in zip(*grads):
        assert np.abs(np.asarray(e)).max() > 0
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), atol=1e-11, rtol=1e-11)


def test_return_retrievals_matches_the_cell_form():
    rng = np.random.default_rng(22)
    xs = rng.normal(size=(2, 4, 5)).astype("float32")
    cell_form = keras.layers.RNN(
        AssociativeGRUCell(8, num_copies=2, return_retrievals=True), return_sequences=True
    )
    layer = AssociativeGRU(8, num_copies=2, return_retrievals=True, return_sequences=True)
    cell_form.build(xs.shape)
    layer.build(xs.shape)
    layer.cell.set_weights(cell_form.cell.get_weights())
    got = np.asarray(layer(xs))
    assert got.shape == (2, 4, 24)
    np.testing.assert_allclose(got, np.asarray(cell_form(xs)), atol=1e-6)


def test_weights_are_the_cell_weights_and_load_from_the_original_names():
    rng = np.random.default_rng(23)
    layer = AssociativeGRU(8, num_copies=2)
    layer.build((None, None, 5))
    names = [v.path.split("/")[-1] for v in layer.weights]
    assert names == ["key_kernel", "gate_kernel", "gate_bias", "candidate_kernel", "candidate_bias"]
    w = random_weights(rng, 5, 8)
    arrays = {
        "AssociativeGRUCell/Keys/fully_connected/weights": w["key"],
        "AssociativeGRUCell/Gates/fully_connected/weights": w["gate"],
        "AssociativeGRUCell/Gates/fully_connected/biases": w["gate_bias"],
        "AssociativeGRUCell/Candidate/fully_connected/weights": w["candidate"],
        "AssociativeGRUCell/Candidate/fully_connected/biases": w["candidate_bias"],
    }
    assert len(load_original_weights(layer.cell, arrays)) == 5
    assert set(original_variable_names(layer.cell)) == set(arrays)
    xs = rng.normal(size=(2, 3, 5)).astype("float32")
    ref, _ = reference_run(
        xs.astype(float), np.zeros((2, 16)), np.zeros((2, 8)), w, permutations(4, 2)
    )
    np.testing.assert_allclose(np.asarray(layer(xs)), ref[:, -1], atol=2e-5)


@FUSED
def test_keras_round_trip_gives_identical_outputs(tmp_path, fused_loop):
    rng = np.random.default_rng(24)
    xs = rng.normal(size=(2, 5, 4)).astype("float32")
    layer = AssociativeGRU(
        8,
        num_copies=3,
        seed=99,
        kernel_initializer="random_normal",
        return_sequences=True,
        go_backwards=True,
        fused_loop=fused_loop,
        name="am_gru",
    )
    inputs = keras.Input((None, 4))
    model = keras.Model(inputs, layer(keras.layers.Masking(0.0)(inputs)))
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    xs[1, 3:] = 0.0  # masked steps
    np.testing.assert_array_equal(np.asarray(loaded(xs)), np.asarray(model(xs)))
    rebuilt = AssociativeGRU.from_config(layer.get_config())
    assert rebuilt.get_config() == layer.get_config()
    assert rebuilt.cell.permutations == layer.cell.permutations
    assert rebuilt.fused_loop is fused_loop


@FUSED
def test_jit_compiled_training_step_matches_eager(fused_loop):
    rng = np.random.default_rng(25)
    xs = rng.normal(size=(4, 6, 5)).astype("float32")
    ys = rng.normal(size=(4, 8)).astype("float32")

    def build():
        keras.utils.set_random_seed(5)
        inputs = keras.Input((6, 5))
        return keras.Model(inputs, AssociativeGRU(8, num_copies=4, fused_loop=fused_loop)(inputs))

    results = []
    for jit in (False, True):
        model = build()
        compile_and_build_optimizer(
            model, optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=jit
        )
        model.train_on_batch(xs, ys)
        results.append(model.predict_on_batch(xs))
    np.testing.assert_allclose(results[0], results[1], atol=1e-5)


@FUSED
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_matches_float32_and_trains(policy, fused_loop):
    rng = np.random.default_rng(26)
    xs = rng.normal(size=(4, 6, 5)).astype("float32")
    reference = AssociativeGRU(8, num_copies=4, return_sequences=True)
    reference.build((None, 6, 5))
    for weight in reference.weights:  # large enough that a lost memory write would show
        weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
    expected = np.asarray(reference(xs))
    keras.config.set_dtype_policy(policy)
    try:
        inputs = keras.Input((6, 5))
        layer = AssociativeGRU(8, num_copies=4, return_sequences=True, fused_loop=fused_loop)
        seq = layer(inputs)
        assert seq.dtype == policy.split("_")[1]
        layer.set_weights(reference.get_weights())
        got = keras.ops.convert_to_numpy(keras.ops.cast(layer(xs), "float32"))
        out = keras.layers.Dense(1, dtype="float32")(keras.layers.GlobalAveragePooling1D()(seq))
        model = keras.Model(inputs, out)
        compile_and_build_optimizer(model, optimizer="adam", loss="mse")
        loss = model.train_on_batch(xs, np.ones((4, 1), "float32"))
    finally:
        keras.config.set_dtype_policy("float32")
    tolerance = 3e-2 if policy == "mixed_bfloat16" else 5e-3
    np.testing.assert_allclose(got, expected, atol=tolerance * max(1.0, np.abs(expected).max()))
    assert np.isfinite(loss)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="units.*even"):
        AssociativeGRU(7)
    with pytest.raises(TypeError, match="fused_loop.*bool.*'yes'"):
        AssociativeGRU(8, fused_loop="yes")
    # On another backend the fused loop is refused first, whatever it is combined with.
    other_backend = "fused_loop=True.*needs the TensorFlow backend"
    with pytest.raises(
        ValueError,
        match=(
            "fused_loop=True.*return_retrievals=True" if BACKEND == "tensorflow" else other_backend
        ),
    ):
        AssociativeGRU(8, fused_loop=True, return_retrievals=True)
    with pytest.raises(
        ValueError,
        match=("fused_loop=True.*unroll=True" if BACKEND == "tensorflow" else other_backend),
    ):
        AssociativeGRU(8, fused_loop=True, unroll=True)
    with pytest.raises(ValueError, match="num_copies"):
        AssociativeGRU(8, num_copies=0)


@FUSED
def test_stateful_segments_equal_one_pass(fused_loop):
    rng = np.random.default_rng(27)
    xs = rng.normal(size=(2, 9, 5)).astype("float32")
    whole = AssociativeGRU(8, num_copies=3, return_sequences=True, fused_loop=fused_loop)
    stateful = AssociativeGRU(
        8, num_copies=3, return_sequences=True, stateful=True, fused_loop=fused_loop
    )
    whole.build((2, 9, 5))
    stateful.build((2, 3, 5))
    stateful.cell.set_weights(whole.cell.get_weights())
    pieces = np.concatenate([np.asarray(stateful(xs[:, i : i + 3])) for i in (0, 3, 6)], axis=1)
    np.testing.assert_allclose(pieces, np.asarray(whole(xs)), atol=1e-5)
    stateful.reset_states()
    np.testing.assert_allclose(
        np.asarray(stateful(xs[:, :3])), np.asarray(whole(xs[:, :3])), atol=1e-5
    )


MIRRORED_SCRIPT = """
import json
import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from tf_memlayers.layers import AssociativeGRU

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.default_rng(0)
x = rng.normal(size=(8, 6, 5)).astype("float32")
y = rng.normal(size=(8, 8)).astype("float32")
predictions = {}
for fused in (False, True):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        inputs = keras.Input((6, 5))
        model = keras.Model(inputs, AssociativeGRU(8, num_copies=3, fused_loop=fused)(inputs))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    predictions[str(fused)] = model.predict(x, verbose=0).tolist()
print(json.dumps({"replicas": strategy.num_replicas_in_sync, **predictions}))
"""


@tensorflow_only(f"{TF_DISTRIBUTE} and {FUSED_LOOP}")
def test_fused_loop_trains_under_a_mirrored_strategy():
    report = json_report_of_script(MIRRORED_SCRIPT)
    assert report["replicas"] == 2
    # Two training epochs on two replicas end in the same model with either loop.
    np.testing.assert_allclose(np.array(report["True"]), np.array(report["False"]), atol=1e-5)


@pytest.mark.parametrize(
    "layer_cls, options, fused_on_tensorflow",
    [
        (AssociativeGRU, {}, True),
        (AssociativeGRU, {"return_retrievals": True}, False),
        (AssociativeGRU, {"unroll": True}, False),
        (DualAssociativeGRU, {}, True),
        (DualAssociativeGRU, {"dual_key": "released"}, False),
    ],
)
def test_auto_runs_the_fused_loop_wherever_it_supports_the_layer(
    layer_cls, options, fused_on_tensorflow
):
    layer = layer_cls(4, num_copies=2, **options)
    assert layer.fused_loop == "auto"
    assert layer.uses_fused_loop is (fused_on_tensorflow and BACKEND == "tensorflow")
    # The saved config keeps "auto", so a model saved on TensorFlow loads on any backend.
    rebuilt = layer_cls.from_config(layer.get_config())
    assert rebuilt.fused_loop == "auto" and rebuilt.uses_fused_loop is layer.uses_fused_loop
    # False always runs Keras's loop.
    assert layer_cls(4, num_copies=2, fused_loop=False, **options).uses_fused_loop is False
