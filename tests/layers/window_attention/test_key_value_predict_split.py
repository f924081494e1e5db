"""KeyValuePredictSplit: contiguous pieces, key first."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import EmptyInputTests, LayerTestCase, SizesTests
from tests.support import keras_lstm
from tf_memlayers import KeyValuePredictSplit


class KeyValuePredictSplitTest(EmptyInputTests, SizesTests, LayerTestCase):
    """The shared suites of `KeyValuePredictSplit` (tests/layer_test_case.py)."""

    layer_cls = KeyValuePredictSplit
    make = staticmethod(lambda **kw: KeyValuePredictSplit("key_value_predict", **kw))
    not_in = {
        "nan_padding": "splits each step's features on its own: a NaN stays in its step",
        "flags": "has no boolean arguments",
    }
    empty = {"split": lambda: KeyValuePredictSplit("key_value_predict", sizes=(2, 1, 1))}
    # Its outputs are the pieces of each step: no memory.
    last_output_is_memory = False
    keras_checks = {
        "split": (
            KeyValuePredictSplit,
            {"mode": "key_value_predict", "sizes": (2, 2, 2)},
            dict(
                input_shape=(2, 3, 6),
                expected_output_shape=((2, 3, 2), (2, 3, 2), (2, 3, 2)),
                expected_num_trainable_weights=0,
                supports_masking=True,
                # No weights to train.
                run_training_check=False,
            ),
        ),
    }
    journeys = {
        "KeyValuePredictSplit": (
            "step",
            lambda e: keras.layers.Concatenate()(
                list(
                    KeyValuePredictSplit("key_value_predict", sizes=(4, 2, 2))(
                        keras_lstm(8, return_sequences=True)(e)
                    )[1:]
                )
            ),
        ),
    }
    output_spec = {
        "split_attention": (lambda dtype: KeyValuePredictSplit(dtype=dtype), (2, 5, 4), {}),
        "split_key_value_predict": (
            lambda dtype: KeyValuePredictSplit("key_value_predict", sizes=(3, 2, 1), dtype=dtype),
            (2, 5, 6),
            {},
        ),
        "split_rank_2": (
            lambda dtype: KeyValuePredictSplit("key_value", dtype=dtype),
            (2, 4),
            {},
        ),
    }


def test_pieces_are_contiguous_key_first():
    x = np.arange(20, dtype="float32").reshape(2, 10)
    key, value, predict = KeyValuePredictSplit("key_value_predict", sizes=(4, 3, 3))(x)
    np.testing.assert_array_equal(key, x[:, :4])
    np.testing.assert_array_equal(value, x[:, 4:7])
    np.testing.assert_array_equal(predict, x[:, 7:])
    key, value, predict = KeyValuePredictSplit("key_value")(x)
    np.testing.assert_array_equal(key, x[:, :5])
    np.testing.assert_array_equal(value, x[:, 5:])
    np.testing.assert_array_equal(predict, value)
    key, value, predict = KeyValuePredictSplit("attention")(x)
    for piece in (key, value, predict):
        np.testing.assert_array_equal(piece, x)


def test_paper_width_834_splits_unequally():
    x = np.zeros((1, 3, 834), "float32")
    key, value, predict = KeyValuePredictSplit("key_value_predict", sizes=(322, 256, 256))(x)
    assert (key.shape[-1], value.shape[-1], predict.shape[-1]) == (322, 256, 256)


def test_mask_propagates_and_config_round_trips():
    inputs = keras.Input((None,), dtype="int32")
    h = keras.layers.Embedding(5, 6, mask_zero=True)(inputs)
    pieces = KeyValuePredictSplit("key_value")(h)
    assert all(p._keras_mask is not None for p in pieces)
    layer = KeyValuePredictSplit("key_value_predict", sizes=(2, 2, 2), name="split")
    assert KeyValuePredictSplit.from_config(layer.get_config()).get_config() == layer.get_config()


def test_bad_arguments():
    with pytest.raises(
        ValueError,
        match=r"`mode` must be one of 'attention', 'key_value', 'key_value_predict'; got 'kv'",
    ):
        KeyValuePredictSplit("kv")
    with pytest.raises(
        ValueError, match=r"width 10 does not divide into 3 equal pieces.*pass explicit `sizes=`"
    ):
        KeyValuePredictSplit("key_value_predict")(np.zeros((1, 10), "float32"))
    with pytest.raises(ValueError, match=r"sum to 9, but the input width is 10"):
        KeyValuePredictSplit("key_value_predict", sizes=(3, 3, 3))(np.zeros((1, 10), "float32"))
    with pytest.raises(ValueError, match=r"`sizes` must list 2 pieces"):
        KeyValuePredictSplit("key_value", sizes=(10,))(np.zeros((1, 10), "float32"))
    with pytest.raises(ValueError, match=r"`sizes` must be >= 1, got 0"):
        KeyValuePredictSplit("key_value", sizes=(10, 0))(np.zeros((1, 10), "float32"))
