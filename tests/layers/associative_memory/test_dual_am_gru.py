"""`DualAssociativeGRU` against `RNN(DualAssociativeGRUCell)`, in both of its time loops."""

import keras
import numpy as np
import pytest
from conftest import BACKEND, FUSED_LOOP, gradients, tensorflow_only
from keras import ops
from layer_registry import RNN_LAYER_FLAGS, Declaration

from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    DualAssociativeGRU,
    DualAssociativeGRUCell,
    premise_sharing_clone_function,
)

# The layer registry's declarations of this module's layers (tests/layer_registry.py): a small
# instance, the boolean arguments, and the cases of the suites over every layer.
DECLARATIONS = (
    Declaration(
        DualAssociativeGRU,
        lambda **kw: DualAssociativeGRU(4, **kw),
        flags=RNN_LAYER_FLAGS,
        reference="am_gru_reference",
        keras_checks={
            **{
                f"dual_am_gru_{key}_{loop}": (
                    DualAssociativeGRU,
                    {
                        "units": 4,
                        "num_copies": 2,
                        "dual_key": key,
                        "return_sequences": True,
                        "fused_loop": fused,
                    },
                    dict(
                        input_shape=(2, 3, 4),
                        expected_output_shape=(2, 3, 4),
                        expected_num_trainable_weights=5 + 2 + (key == "released"),
                        supports_masking=True,
                    ),
                )
                for key, loop, fused in (
                    ("paper", "keras_loop", False),
                    ("released", "keras_loop", False),
                    ("paper", "fused_loop", True),
                )
            },
        },
        journeys={
            **{
                name: (
                    "dual",
                    lambda fused=fused: (
                        AssociativeGRU(8, num_copies=2, return_state=True, fused_loop=fused),
                        DualAssociativeGRU(8, num_copies=2, fused_loop=fused),
                    ),
                )
                for name, fused in (
                    ("DualAssociativeGRU", False),
                    ("DualAssociativeGRU_fused_loop", True),
                )
            },
        },
        nan_padding={
            **{
                f"dual_am_gru_{loop}": lambda fused=fused: DualAssociativeGRU(
                    4,
                    num_copies=2,
                    return_sequences=True,
                    zero_output_for_mask=True,
                    fused_loop=fused,
                )
                for loop, fused in (("keras_loop", False), ("fused_loop", True))
            },
        },
        output_spec={
            "dual_am_gru_states": (
                lambda dtype: DualAssociativeGRU(
                    4, num_copies=2, return_sequences=True, return_state=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
            "dual_am_gru_fused_last": (
                lambda dtype: DualAssociativeGRU(4, num_copies=3, fused_loop=True, dtype=dtype),
                (2, 5, 4),
                {},
            ),
            "dual_am_gru_retrievals": (
                lambda dtype: DualAssociativeGRU(
                    4, num_copies=2, dual_key="released", return_retrievals=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
        },
    ),
)


UNITS, COPIES, INPUT_DIM, BATCH, STEPS = 8, 3, 5, 3, 6
# The fused loop where the backend has it (TensorFlow), else Keras's: for the tests whose
# subject is not the loop.
FUSED_IF_AVAILABLE = BACKEND == "tensorflow"


def _mask_with_holes():
    mask = np.ones((BATCH, STEPS), bool)
    mask[1, STEPS - 2 :] = False  # right padding
    mask[2, 1] = False  # a hole
    return mask


def _pair(rng, dual_key="paper", fused_loop=False, **rnn_kwargs):
    """A cell-form RNN and a `DualAssociativeGRU` with the same (random) weights."""
    cell_form = keras.layers.RNN(
        DualAssociativeGRUCell(UNITS, num_copies=COPIES, dual_key=dual_key), **rnn_kwargs
    )
    layer = DualAssociativeGRU(
        UNITS, num_copies=COPIES, dual_key=dual_key, fused_loop=fused_loop, **rnn_kwargs
    )
    for rnn in (cell_form, layer):
        rnn.build((None, None, INPUT_DIM))
    weights = [rng.normal(scale=0.4, size=w.shape) for w in cell_form.cell.weights]
    cell_form.cell.set_weights(weights)
    layer.cell.set_weights(weights)
    return cell_form, layer


def _states(rng):
    return [
        rng.normal(scale=0.3, size=(BATCH, UNITS * COPIES)),
        rng.normal(size=(BATCH, UNITS)),
        rng.normal(scale=0.3, size=(BATCH, UNITS * COPIES)),
    ]


def _run_with_gradients(rnn, xs, states, mask):
    def loss(xs, *states):
        outputs, *final = rnn(xs, initial_state=list(states), mask=mask)
        return ops.sum(outputs * ops.sin(outputs)) + sum(
            ops.sum(ops.square(s)) for s in final[:2]
        )

    _, weight_grads, input_grads = gradients(loss, rnn.cell.trainable_weights, [xs, *states])
    outputs, *final = rnn(xs, initial_state=states, mask=mask)
    return [outputs, *final, *input_grads, *weight_grads]


@pytest.mark.parametrize(
    "dual_key, fused_loop, go_backwards",
    [
        ("paper", False, False),
        ("released", False, True),
        pytest.param("paper", True, False, marks=tensorflow_only(FUSED_LOOP)),
        pytest.param("paper", True, True, marks=tensorflow_only(FUSED_LOOP)),
    ],
    ids=["paper_keras", "released_keras_backwards", "paper_fused", "paper_fused_backwards"],
)
def test_layer_equals_the_cell_form_forward_and_gradients(
    float64_policy, dual_key, fused_loop, go_backwards
):
    rng = np.random.default_rng(11)
    cell_form, layer = _pair(
        rng, dual_key, fused_loop, return_sequences=True, return_state=True,
        go_backwards=go_backwards,
        # The cell form's masked outputs are wrong on JAX otherwise (KERAS_MASKED_OUTPUT).
        zero_output_for_mask=BACKEND != "tensorflow",
    )
    xs = rng.normal(size=(BATCH, STEPS, INPUT_DIM))
    states = _states(rng)
    mask = ops.convert_to_tensor(_mask_with_holes())
    expected = _run_with_gradients(cell_form, xs, states, mask)
    got = _run_with_gradients(layer, xs, states, mask)
    # outputs, 3 final states; gradients of the inputs, 3 states and the weights.
    assert len(got) == 1 + 3 + 1 + 3 + 5 + 2 + int(dual_key == "released")
    for e, g in zip(expected, got):
        assert np.abs(np.asarray(e)).max() > 0
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), atol=1e-10, rtol=1e-10)
    # The source memory passes through unchanged.
    np.testing.assert_array_equal(np.asarray(got[3]), np.asarray(states[2]))


def test_the_source_memory_changes_the_outputs():
    rng = np.random.default_rng(3)
    _, layer = _pair(rng, fused_loop=FUSED_IF_AVAILABLE, return_sequences=True)
    xs = rng.normal(size=(BATCH, STEPS, INPUT_DIM)).astype("float32")
    memory, last, source = (np.asarray(s).astype("float32") for s in _states(rng))
    with_source = np.asarray(layer(xs, initial_state=[memory, last, source]))
    without = np.asarray(layer(xs, initial_state=[memory, last, 0 * source]))
    assert np.abs(with_source - without).max() > 1e-3


def test_shared_premise_cell_gives_conditional_encoding(float64_policy):
    # The layers of `ConditionalEncoder`: an `AssociativeGRU` over the premise, then a
    # `DualAssociativeGRU` sharing its cell over the hypothesis, against the cells stepped by
    # `keras.layers.RNN`.
    rng = np.random.default_rng(5)
    premise_layer = AssociativeGRU(
        UNITS, num_copies=COPIES, return_state=True, fused_loop=FUSED_IF_AVAILABLE
    )
    hypothesis_layer = DualAssociativeGRU(
        UNITS, num_copies=COPIES, premise_cell=premise_layer.cell, fused_loop=FUSED_IF_AVAILABLE
    )
    premise = rng.normal(size=(BATCH, STEPS, INPUT_DIM))
    hypothesis = rng.normal(size=(BATCH, STEPS - 2, INPUT_DIM))
    _, memory, last = premise_layer(premise)
    got = hypothesis_layer(hypothesis, initial_state=[0 * memory, last, memory])
    assert len(hypothesis_layer.trainable_weights) == 5 + 2
    assert hypothesis_layer.cell.premise_cell is premise_layer.cell

    premise_cell = AssociativeGRUCell(UNITS, num_copies=COPIES)
    dual_cell = DualAssociativeGRUCell(UNITS, num_copies=COPIES, premise_cell=premise_cell)
    dual_cell.build((None, INPUT_DIM))  # builds the premise cell too
    premise_cell.set_weights(premise_layer.cell.get_weights())
    dual_cell.set_weights(hypothesis_layer.cell.get_weights())
    _, memory, last = keras.layers.RNN(premise_cell, return_state=True)(premise)
    expected = keras.layers.RNN(dual_cell)(hypothesis, initial_state=[0 * memory, last, memory])
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-10, rtol=0)


def _conditional_encoding_model(fused_loop=False, dual_key="paper"):
    """A functional model built as the `DualAssociativeGRU` docstring shows: the Dual layer
    shares the premise layer's cell and reads its final memory."""
    premise, hypothesis = keras.Input((STEPS, INPUT_DIM)), keras.Input((STEPS - 2, INPUT_DIM))
    premise_layer = AssociativeGRU(
        UNITS, num_copies=COPIES, return_state=True, fused_loop=fused_loop, name="premise"
    )
    _, memory, last = premise_layer(premise)
    dual = DualAssociativeGRU(
        UNITS,
        num_copies=COPIES,
        dual_key=dual_key,
        premise_cell=premise_layer.cell,
        fused_loop=fused_loop,
        name="hypothesis",
    )
    output = dual(hypothesis, initial_state=[memory * 0, last, memory])
    return keras.Model([premise, hypothesis], output)


def _assert_premise_cell_shared(model):
    premise_cell = model.get_layer("premise").cell
    assert model.get_layer("hypothesis").cell.premise_cell is premise_cell
    assert len(model.weights) == 5 + 2  # the premise cell's weights once, the dual kernels
    assert len({id(w) for w in model.weights}) == 7


def _inputs(rng):
    return [
        rng.normal(size=(BATCH, STEPS, INPUT_DIM)).astype("float32"),
        rng.normal(size=(BATCH, STEPS - 2, INPUT_DIM)).astype("float32"),
    ]


@pytest.mark.parametrize("fused_loop", [False, True] if FUSED_IF_AVAILABLE else [False])
def test_shared_premise_cell_survives_keras_file(tmp_path, fused_loop):
    rng = np.random.default_rng(11)
    model = _conditional_encoding_model(fused_loop=fused_loop)
    model.set_weights([rng.normal(scale=0.4, size=w.shape) for w in model.weights])
    xs = _inputs(rng)
    expected = np.asarray(model(xs))
    model.save(tmp_path / "model.keras")

    loaded = keras.models.load_model(tmp_path / "model.keras")
    _assert_premise_cell_shared(loaded)
    np.testing.assert_array_equal(np.asarray(loaded(xs)), expected)
    # Training the loaded model moves the one premise cell both layers read.
    loaded.get_layer("premise").cell.key_kernel.assign_add(np.ones((INPUT_DIM + UNITS, UNITS)))
    assert np.abs(np.asarray(loaded(xs)) - expected).max() > 1e-3
    # Saved again, it loads again.
    loaded.save(tmp_path / "again.keras")
    _assert_premise_cell_shared(keras.models.load_model(tmp_path / "again.keras"))


def test_unshared_layers_keep_their_configs():
    # Only a cell that a Dual layer shares goes into the `AssociativeGRU` config.
    assert "cell" not in AssociativeGRU(UNITS).get_config()
    assert "premise_cell" not in DualAssociativeGRU(UNITS).get_config()
    assert "premise_cell" not in DualAssociativeGRUCell(UNITS).get_config()


def test_clone_model_keeps_the_shared_premise_cell_with_the_clone_function():
    rng = np.random.default_rng(12)
    model = _conditional_encoding_model()
    clone = keras.models.clone_model(model, clone_function=premise_sharing_clone_function())
    _assert_premise_cell_shared(clone)
    assert not {id(w) for w in clone.weights} & {id(w) for w in model.weights}
    clone.set_weights(model.get_weights())
    xs = _inputs(rng)
    np.testing.assert_array_equal(np.asarray(clone(xs)), np.asarray(model(xs)))
    assert clone.get_layer("hypothesis").get_config() == {
        **model.get_layer("hypothesis").get_config(),
        "premise_cell": clone.get_layer("premise").cell,
    }


def test_clone_function_keeps_sharing_for_the_cell_form():
    premise, hypothesis = keras.Input((STEPS, INPUT_DIM)), keras.Input((STEPS - 2, INPUT_DIM))
    premise_layer = AssociativeGRU(UNITS, num_copies=COPIES, return_state=True)
    _, memory, last = premise_layer(premise)
    cell = DualAssociativeGRUCell(
        UNITS, num_copies=COPIES, dual_key="released", premise_cell=premise_layer.cell
    )
    output = keras.layers.RNN(cell)(hypothesis, initial_state=[memory * 0, last, memory])
    model = keras.Model([premise, hypothesis], output)
    clone = keras.models.clone_model(model, clone_function=premise_sharing_clone_function())
    clone_premise, clone_rnn = clone.layers[1], clone.layers[-1]
    assert clone_rnn.cell.premise_cell is clone_premise.cell
    assert clone_rnn.cell.dual_key == "released"
    assert len(clone.weights) == 5 + 3 == len(model.weights)


def test_sharing_is_never_lost_silently():
    model = _conditional_encoding_model()
    layer = model.get_layer("hypothesis")
    # `clone_model`'s default rebuilds each layer from its config alone.
    with pytest.raises(ValueError, match="premise_cell.*premise_sharing_clone_function"):
        keras.models.clone_model(model)
    with pytest.raises(ValueError, match="premise_cell"):
        DualAssociativeGRU.from_config(layer.get_config())
    with pytest.raises(ValueError, match="premise_cell"):
        DualAssociativeGRUCell.from_config(layer.cell.get_config())
    # A config serialized outside a `.keras` save holds no shared-object id.
    with pytest.raises(ValueError, match="premise_cell"):
        keras.models.model_from_json(model.to_json())


@tensorflow_only(FUSED_LOOP)
def test_fused_loop_needs_the_paper_key():
    with pytest.raises(ValueError, match="dual_key='paper' only; got dual_key='released'"):
        DualAssociativeGRU(4, dual_key="released", fused_loop=True)
    with pytest.raises(ValueError, match="cannot be combined with return_retrievals=True"):
        DualAssociativeGRU(4, return_retrievals=True, fused_loop=True)


def test_config_round_trip_keeps_every_argument():
    layer = DualAssociativeGRU(
        6,
        num_copies=2,
        dual_key="released",
        seed=9,
        return_retrievals=True,
        kernel_initializer="zeros",
        gate_bias_initializer="zeros",
        candidate_bias_initializer="ones",
        kernel_regularizer="l2",
        bias_regularizer="l1",
        return_sequences=True,
        return_state=True,
        go_backwards=True,
        stateful=True,
        zero_output_for_mask=True,
    )
    config = layer.get_config()
    rebuilt = DualAssociativeGRU.from_config(config)
    assert rebuilt.get_config() == config
    assert config["dual_key"] == "released" and config["seed"] == 9
    assert rebuilt.cell.premise_cell.permutations == layer.cell.premise_cell.permutations


def test_stateful_layer_carries_memory_and_source_over_segments():
    rng = np.random.default_rng(8)
    layer = DualAssociativeGRU(UNITS, num_copies=COPIES, stateful=True, return_sequences=True)
    whole = DualAssociativeGRU(UNITS, num_copies=COPIES, return_sequences=True)
    xs = rng.normal(size=(BATCH, STEPS, INPUT_DIM)).astype("float32")
    memory, last, source = (np.asarray(s).astype("float32") for s in _states(rng))
    for rnn in (whole, layer):
        rnn.build((BATCH, None, INPUT_DIM))
    whole.cell.set_weights(layer.cell.get_weights())
    expected = np.asarray(whole(xs, initial_state=[memory, last, source]))
    first = np.asarray(layer(xs[:, :3], initial_state=[memory, last, source]))
    second = np.asarray(layer(xs[:, 3:]))
    np.testing.assert_allclose(np.concatenate([first, second], 1), expected, atol=1e-5)
