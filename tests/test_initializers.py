"""`ForgetGateBias` (against an LSTM step in NumPy), `GRUGateBias` (the SNLI model's GRU against
TensorFlow 0.8's GRUCell in NumPy) and `for_one_weight`."""

import keras
import numpy as np
import pytest

import tf_memlayers
from tests.support import as_numpy
from tf_memlayers.initializers import ForgetGateBias, GRUGateBias, for_one_weight
from tf_memlayers.models.snli import paper_encoder


@pytest.mark.parametrize(
    "make, shape, dtype, expected",
    [
        # Keras orders an LSTM's bias [input, forget, cell, output], a GRU's [update, reset,
        # candidate] (with reset_after=True an input and a recurrent row), `units` each.
        (lambda: ForgetGateBias(1.0), (4,), None, [0, 1, 0, 0]),
        (lambda: ForgetGateBias(-0.5), (12,), None, [0] * 3 + [-0.5] * 3 + [0] * 6),
        (lambda: ForgetGateBias(0.1), (8,), "float64", [0, 0, 0.1, 0.1, 0, 0, 0, 0]),
        (lambda: GRUGateBias(), (6,), None, [1, 1, 1, 1, 0, 0]),
        (lambda: GRUGateBias(0.1), (2, 3), "float64", [[0.1, 0.1, 0], [0, 0, 0]]),
    ],
)
def test_the_gate_biases_set_their_gates_only_and_are_restored_by_name(
    make, shape, dtype, expected
):
    # The values come in the dtype asked for: float64's 0.1 exactly, not rounded through float32.
    values = as_numpy(make()(shape, dtype=dtype))
    np.testing.assert_array_equal(values, np.asarray(expected, dtype or "float32"))
    assert values.dtype == (dtype or "float32")
    config = keras.initializers.serialize(make())
    assert config["registered_name"] == f"tf_memlayers>{type(make()).__name__}"
    restored = keras.initializers.deserialize(config)
    np.testing.assert_array_equal(as_numpy(restored(shape, dtype=dtype)), values)


def test_the_forget_gate_bias_reaches_the_lstms_forget_gate():
    # With zero kernels an LSTM step from (h0, c0) has gates i = o = sigmoid(0), f =
    # sigmoid(forget bias), candidate tanh(0) = 0: c1 = f * c0, h1 = o * tanh(c1).
    units, forget_bias = 3, 2.0
    zeros = dict(kernel_initializer="zeros", recurrent_initializer="zeros")
    bias = dict(bias_initializer=ForgetGateBias(forget_bias), unit_forget_bias=False)
    lstm = keras.layers.LSTM(units, return_state=True, **zeros, **bias)
    c0, h0 = np.array([[1.0, -2.0, 0.5]], "float32"), np.zeros((1, units), "float32")
    h1, _, c1 = lstm(np.ones((1, 1, 2), "float32"), initial_state=[h0, c0])
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    np.testing.assert_allclose(as_numpy(c1), sigmoid(forget_bias) * c0, rtol=1e-6)
    want = sigmoid(0) * np.tanh(sigmoid(forget_bias) * c0)
    np.testing.assert_allclose(as_numpy(h1), want, rtol=1e-6)


def test_the_snli_models_gru_is_the_original_codes_gru_cell():
    # TensorFlow 0.8's GRUCell in its own layout: gates [r | u] from one product of [x, h],
    # their biases starting at 1, the candidate from [x, r * h], the output u * h + (1 - u) * c.
    units, rng = 4, np.random.default_rng(0)
    gru = paper_encoder(5, "glorot_uniform", units=units, num_copies=1).encoder_layers[1]
    x = rng.normal(size=(2, 4, 2)).astype("float32")
    gru(x)
    kernel, recurrent, bias = (as_numpy(w) for w in gru.weights)
    np.testing.assert_array_equal(bias, [1.0] * 2 * units + [0.0] * units)
    (z, r, c), both = np.split(np.arange(3 * units), 3), np.concatenate([kernel, recurrent])
    gates = np.concatenate([r, z])
    w_gates, b_gates, w_candidate, b_candidate = both[:, gates], bias[gates], both[:, c], bias[c]
    sigmoid, h = (lambda v: 1 / (1 + np.exp(-v))), np.zeros((2, units))
    for step in np.moveaxis(x, 1, 0):
        reset, update = np.split(sigmoid(np.concatenate([step, h], -1) @ w_gates + b_gates), 2, -1)
        candidate = np.tanh(np.concatenate([step, reset * h], -1) @ w_candidate + b_candidate)
        h = update * h + (1 - update) * candidate
    np.testing.assert_allclose(as_numpy(gru(x)[0]), h, atol=1e-5)


LSTM_SHAPE, GRU_SHAPE = "expected an LSTM bias shape (4*units,)", "expected a GRU bias shape"


@pytest.mark.parametrize(
    "make, value, shape, error, fragment",
    [
        *((ForgetGateBias, 1.0, s, ValueError, LSTM_SHAPE) for s in [(7,), (8, 2), (), (4, 1)]),
        *((GRUGateBias, 1.0, s, ValueError, GRU_SHAPE) for s in [(4,), (3, 3), (), (2, 3, 1)]),
        (ForgetGateBias, "x", (4,), TypeError, "`forget_bias` must be a number, got 'x' of type"),
        (GRUGateBias, True, (3,), TypeError, "`gate_bias` must be a number, got True of type bool"),
        (ForgetGateBias, float("nan"), (4,), ValueError, "`forget_bias` must be a finite number"),
        (GRUGateBias, float("inf"), (3,), ValueError, "`gate_bias` must be a finite number, got"),
    ],
)
def test_the_gate_biases_name_a_bad_value_and_refuse_other_shapes(
    make, value, shape, error, fragment
):
    with pytest.raises(error) as raised:
        make(value)(shape)
    assert f"{make.__name__}: {fragment}" in str(raised.value)


def test_each_weight_is_drawn_anew_from_the_same_distribution_unless_an_integer_seed_is_set():
    for name in ("GlorotUniform", "RandomNormal", "Orthogonal"):
        initializer = getattr(keras.initializers, name)()
        first, second = (as_numpy(for_one_weight(initializer)((4, 4))) for _ in range(2))
        assert not np.array_equal(first, second), name
        # Keras's own initializer is stateless: it would give both weights the same values.
        np.testing.assert_array_equal(as_numpy(initializer((4, 4))), as_numpy(initializer((4, 4))))
    initializer = keras.initializers.RandomUniform(minval=5.0, maxval=6.0)
    clone = for_one_weight(initializer)
    assert type(clone) is keras.initializers.RandomUniform
    values = as_numpy(clone((50, 40)))
    assert values.min() >= 5.0 and values.max() < 6.0
    assert values.mean() == pytest.approx(5.5, abs=0.02)  # 2000 draws: s.e. 0.0065
    # Initializers that draw nothing are unchanged.
    assert as_numpy(for_one_weight(ForgetGateBias(3.0))((4,))).tolist() == [0, 3, 0, 0]
    constant = for_one_weight(keras.initializers.Constant(2.0))
    np.testing.assert_array_equal(as_numpy(constant((2, 2))), 2.0)
    # An integer seed gives each weight the same values.
    initializer = keras.initializers.GlorotUniform(seed=7)
    values = [as_numpy(for_one_weight(initializer)((3, 5))) for _ in range(2)]
    np.testing.assert_array_equal(values[0], values[1])
    np.testing.assert_array_equal(values[0], as_numpy(initializer((3, 5))))
    # A seed generator is used as it is.
    initializer = keras.initializers.GlorotUniform(seed=keras.random.SeedGenerator(3))
    assert for_one_weight(initializer) is initializer
    first, second = (as_numpy(for_one_weight(initializer)((3, 3))) for _ in range(2))
    assert not np.array_equal(first, second)  # the generator draws anew at every call
    layer = tf_memlayers.SlidingWindowAttention(3, kernel_initializer=None)  # Keras's default
    layer(np.ones((1, 2, 4), "float32"))
    assert len({float(as_numpy(w)[0, 0]) for w in layer.weights if len(w.shape) == 2}) == 4
