"""KeyValuePredictSplit: contiguous pieces, key first."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase, masking_checks
from tests.support import keras_lstm
from tf_memlayers import KeyValuePredictSplit

KVP = "key_value_predict"
MODES = "`mode` must be one of 'attention', 'key_value', 'key_value_predict'; got 'kv'"


class KeyValuePredictSplitTest(LayerTestCase):
    layer_cls = KeyValuePredictSplit

    def test_layer_behaviors(self):
        # No weights to train.
        checks = masking_checks(((2, 3, 2),) * 3, 0, (2, 3, 6), run_training_check=False)
        self.run_layer_test(KeyValuePredictSplit, {"mode": KVP, "sizes": (2, 2, 2)}, **checks)

    def test_journey(self, tmp_path):
        def build(embedded):
            states = keras_lstm(8, return_sequences=True)(embedded)
            pieces = KeyValuePredictSplit(KVP, sizes=(4, 2, 2))(states)
            assert all(p._keras_mask is not None for p in pieces)  # the mask reaches each piece
            return keras.layers.Concatenate()(list(pieces[1:]))

        self.run_journey_test("step", build, tmp_path)

    def test_config_arguments_output_spec_and_empty_input(self):
        self.run_config_test(KeyValuePredictSplit, mode=KVP, sizes=(2, 2, 2))
        self.run_sizes_test(lambda **kw: KeyValuePredictSplit(KVP, **kw))
        # Its outputs are the pieces of each step: no memory.
        split = lambda: KeyValuePredictSplit(KVP, sizes=(2, 1, 1))  # noqa: E731
        self.run_empty_input_test(split, last_output_is_memory=False)
        for kwargs, shape in [
            ({}, (2, 5, 4)),
            (dict(mode=KVP, sizes=(3, 2, 1)), (2, 5, 6)),
            (dict(mode="key_value"), (2, 4)),
        ]:
            make = lambda dtype, kw=kwargs: KeyValuePredictSplit(dtype=dtype, **kw)  # noqa: E731
            self.run_output_spec_test(make, shape)


def test_pieces_are_contiguous_key_first_and_bad_arguments_are_named():
    x = np.arange(20, dtype="float32").reshape(2, 10)
    for mode, sizes, want in [
        (KVP, (4, 3, 3), [x[:, :4], x[:, 4:7], x[:, 7:]]),
        ("key_value", None, [x[:, :5], x[:, 5:], x[:, 5:]]),  # the value predicts
        ("attention", None, [x] * 3),
    ]:
        pieces = KeyValuePredictSplit(mode, sizes=sizes)(x)
        assert len(pieces) == 3
        for piece, expected in zip(pieces, want):
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(piece), expected)
    for mode, sizes, pattern in [
        ("kv", None, MODES),
        (KVP, None, "width 10 does not divide into 3 equal pieces.*explicit `sizes=`"),
        (KVP, (3, 3, 3), "sum to 9, but the input width is 10"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            KeyValuePredictSplit(mode, sizes=sizes)(x)
