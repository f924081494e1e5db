"""`window_softmax` (eq. 3) against NumPy, and the `WindowAttentionMechanism` mixin on a bare
layer: its weights, flat memory, projected values and argument checks."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.support import as_numpy, assert_close
from tests.window_reference import masked_softmax
from tf_memlayers.layers.window_attention.window_attention_mechanism import (
    WindowAttentionMechanism,
    window_softmax,
)

SPLIT_7 = r"the input width 7 does not divide into 2 equal pieces \(key, value\)"
# The mixin's arguments after ``window``, in order, with their defaults.
ARGUMENTS = dict(mode="attention", sizes=None, attention_units=None, units=None, pad="mask")
ARGUMENTS.update(use_bias=False, kernel_initializer="glorot_uniform", bias_initializer="zeros")


class Mechanism(WindowAttentionMechanism, keras.layers.Layer):
    """The mixin on a bare layer: the constructor arguments and the weights, nothing else."""

    def __init__(self, window, *args, **kwargs):
        own = {**ARGUMENTS, **dict(zip(ARGUMENTS, args))}
        own.update({name: kwargs.pop(name) for name in ARGUMENTS if name in kwargs})
        super().__init__(**kwargs)
        self._init_attention(window, *own.values())

    def build(self, input_shape):
        self._build_attention(input_shape[-1])

    def get_config(self):
        return {**super().get_config(), **self._attention_config()}


def test_window_softmax_normalises_over_the_valid_positions_whatever_the_others_score():
    # The largest score is taken over the valid positions only (else exp(valid - max) would
    # underflow to an all-zero row); extreme scores do not overflow.
    scores = np.array([[-1000.0, -1001.0, 5.0, 1e30], [1000.0, 999.0, -1e30, 0.0]])
    valid = np.array([[1, 1, 0, 0], [1, 1, 1, 0]])
    weights = as_numpy(window_softmax(ops.convert_to_tensor(scores), valid))
    first = 1.0 / (1.0 + np.exp(-1.0))
    np.testing.assert_allclose(weights, [[first, 1 - first, 0, 0]] * 2, rtol=0, atol=1e-15)
    for shape in [(2, 0, 4), (0, 3), (2, 3, 0)]:  # empty scores give empty weights
        for valid in (None, ops.ones(shape)):
            assert tuple(window_softmax(ops.zeros(shape), valid).shape) == shape


# Each dtype of the scores with a dtype of the valid positions.
@pytest.mark.parametrize(
    "dtype, valid_dtype",
    [("float16", "bool"), ("bfloat16", "int32"), ("float32", "float64")]
    + [("float64", valid_dtype) for valid_dtype in ("bool", "float64", "int32")],
)
def test_window_softmax_is_the_masked_softmax_in_at_least_float32(dtype, valid_dtype):
    rng = np.random.default_rng(1)
    scores = ops.cast(ops.convert_to_tensor(rng.normal(scale=3.0, size=(4, 6))), dtype)
    valid = rng.random((4, 6)) > 0.4
    valid[1] = False  # nothing to attend: all-zero weights, so r_t = 0
    valid[2] = [False] * 5 + [True]
    rounded = as_numpy(ops.cast(scores, "float64"))  # the scores as the dtype holds them
    expected = "float64" if dtype == "float64" else "float32"
    for given in (None, valid.astype(valid_dtype)):  # (without valid, the plain softmax)
        weights = window_softmax(scores, given)
        assert keras.backend.standardize_dtype(weights.dtype) == expected
        atol = 1e-6 if expected == "float32" else 1e-15
        assert_close(weights, masked_softmax(rounded, given), atol=atol)
    weights = as_numpy(weights)
    assert np.all(weights[~valid] == 0) and np.all(weights[1] == 0) and weights[2, 5] == 1


SIZES = [
    # (mode, sizes, width, (key, value, predict))
    ("attention", None, 6, (6, 6, 6)),
    ("key_value", None, 8, (4, 4, 4)),
    ("key_value", (5, 3), 8, (5, 3, 3)),
    ("key_value_predict", (4, 3, 2), 9, (4, 3, 2)),
]


@pytest.mark.parametrize("mode, sizes, width, pieces", SIZES)
def test_the_weights_and_the_flat_memory_follow_the_pieces(mode, sizes, width, pieces):
    key, value, predict = pieces
    # The default widths (the key's, the value's) in one mode of two, explicit ones otherwise.
    attention_units, units = (7, 5) if sizes else (None, None)
    layer = Mechanism(3, mode, sizes, attention_units, units, use_bias=True)
    # Known before the layer is built: (output units, memory size).
    stored = key if mode == "attention" else key + value
    output_units, attention = units or value, attention_units or key
    assert layer._sizes_for(width) == (output_units, 3 * (stored + 1))
    layer.build((None, None, width))
    assert {w.name: tuple(w.shape) for w in layer.weights} == {
        "memory_kernel": (key, attention),  # W^Y
        "query_kernel": (key, attention),  # W^h
        "score_vector": (attention,),  # w
        "context_kernel": (value, output_units),  # W^r
        "predict_kernel": (predict, output_units),  # W^x
        "memory_bias": (attention,),
        "output_bias": (output_units,),
    }
    assert layer.memory_size == 3 * (stored + 1) and layer.output_units == output_units
    assert layer.piece_sizes == {"attention": (key,), "key_value": (key, value)}.get(mode, pieces)
    # The flat memory: the window's keys, then its values, then its validity flags.
    window, batch = 3, 2
    memory = np.random.default_rng(3).normal(size=(batch, layer.memory_size))
    keys, values, valid = (as_numpy(t) for t in layer._unpack_memory(ops.convert_to_tensor(memory)))
    np.testing.assert_array_equal(keys, memory[:, : window * key].reshape(batch, window, key))
    if mode == "attention":  # values are the keys, not stored twice
        np.testing.assert_array_equal(values, keys)
        offset = window * key
    else:
        offset = window * (key + value)
        expected = memory[:, window * key : offset].reshape(batch, window, value)
        np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(valid, memory[:, offset:])
    assert valid.shape == (batch, window)
    packed = layer._pack_memory(*(ops.convert_to_tensor(t) for t in (keys, values, valid)))
    np.testing.assert_array_equal(as_numpy(packed), memory)


@pytest.mark.parametrize("units, project", [(None, True), (2, True), (3, True), (4, False)])
def test_the_values_are_projected_first_when_that_does_not_widen_them(units, project):
    layer = Mechanism(2, "key_value", (4, 3), units=units)
    layer.build((None, None, 7))
    assert layer._project_values(keras.Input((None, 3))) is project


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(window=0), ValueError, "`window` must be >= 1"),
        (dict(window=2.0), TypeError, "`window` must be an integer"),
        (dict(mode="value"), ValueError, "`mode` must be one of 'attention', 'key_value'"),
        (dict(mode="key_value", sizes=(4,)), ValueError, "`sizes` must list 2 pieces"),
        (dict(attention_units=0), ValueError, "`attention_units` must be >= 1"),
        (dict(units=0), ValueError, "`units` must be >= 1"),
        (dict(pad="same"), ValueError, "`pad` must be one of 'mask', 'zeros'"),
        # Refused when building: the width 7 of the inputs below.
        (dict(mode="key_value"), ValueError, SPLIT_7),
    ],
)
def test_bad_arguments_are_refused_naming_the_class(kwargs, error, fragment):
    with pytest.raises(error, match=f"^Mechanism: {fragment}"):
        Mechanism(**{"window": 2, **kwargs}).build((None, None, 7))
