"""`DualAssociativeGRU` against `RNN(DualAssociativeGRUCell)`, in both of its time loops."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.layer_test_case import (
    CELL_SPEC,
    REFUSES_EMPTY,
    RNN_LAYER_FLAGS,
    RNN_MASKING,
    CellTests,
    LayerTestCase,
    ResetCellTests,
    ResetSequenceTests,
    read_premise_memory,
    rnn_case,
    user_rnn,
)
from tests.support import BACKEND, FUSED_LOOP, gradients, tensorflow_only
from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    DualAssociativeGRU,
    DualAssociativeGRUCell,
)


class DualAssociativeGRUTest(ResetSequenceTests, LayerTestCase):
    """The shared suites of `DualAssociativeGRU` (tests/layer_test_case.py)."""

    layer_cls = DualAssociativeGRU
    make = staticmethod(lambda **kw: DualAssociativeGRU(4, **kw))
    not_in = {"empty": REFUSES_EMPTY}
    flags = RNN_LAYER_FLAGS
    reference = "am_gru_reference"
    keras_checks = {
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
    }
    journeys = {
        **{
            name: (
                "pair",
                lambda premise, hypothesis, fused=fused: read_premise_memory(
                    AssociativeGRU(8, num_copies=2, return_state=True, fused_loop=fused),
                    DualAssociativeGRU(8, num_copies=2, fused_loop=fused),
                    premise,
                    hypothesis,
                ),
            )
            for name, fused in (
                ("DualAssociativeGRU", False),
                ("DualAssociativeGRU_fused_loop", True),
            )
        },
    }
    nan_padding = {
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
    }
    output_spec = {
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
    }


UNITS, COPIES, INPUT_DIM, BATCH, STEPS = 8, 3, 5, 3, 6


# The fused loop where the backend has it (TensorFlow), else Keras's: for the tests whose
# subject is not the loop.
class DualAssociativeGRUCellTest(CellTests, ResetCellTests, LayerTestCase):
    """The shared suites of `DualAssociativeGRUCell` (tests/layer_test_case.py)."""

    layer_cls = DualAssociativeGRUCell
    make = staticmethod(lambda **kw: DualAssociativeGRUCell(4, **kw))
    flags = ("return_retrievals",)
    reference = "am_gru_reference"
    not_in = {"output_spec": CELL_SPEC, "nan_padding": RNN_MASKING}
    cells = {
        "dual_am_gru_paper": lambda dtype=None: DualAssociativeGRUCell(
            6, num_copies=2, dtype=dtype
        ),
        "dual_am_gru_released": lambda dtype=None: DualAssociativeGRUCell(
            6, num_copies=2, dual_key="released", return_retrievals=True, dtype=dtype
        ),
    }
    keras_checks = {
        "rnn_dual_am_gru_paper": rnn_case(cells["dual_am_gru_paper"], 6, 5 + 2, 0),
        "rnn_dual_am_gru_released": rnn_case(cells["dual_am_gru_released"], 24, 5 + 3, 0),
    }
    journeys = {
        "DualAssociativeGRUCell": (
            "pair",
            lambda premise, hypothesis: read_premise_memory(
                user_rnn(AssociativeGRUCell(8, num_copies=2), return_state=True),
                user_rnn(DualAssociativeGRUCell(8, num_copies=2)),
                premise,
                hypothesis,
            ),
        ),
    }


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
        return ops.sum(outputs * ops.sin(outputs)) + sum(ops.sum(ops.square(s)) for s in final[:2])

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
        rng,
        dual_key,
        fused_loop,
        return_sequences=True,
        return_state=True,
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


def test_premise_cell_is_not_an_argument():
    with pytest.raises(TypeError, match="premise_cell.*DualAssociativeEncoder"):
        DualAssociativeGRU(UNITS, premise_cell=AssociativeGRUCell(UNITS))


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
