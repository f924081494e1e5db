"""Flags and split sizes are checked when a layer is made, with errors that name them."""

import json
import re

import keras
import numpy as np
import pytest

from layer_registry import LAYERS

from tf_memlayers.layers import (
    KeyValuePredictSplit,
    NGramConcat,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.models.snli import ConditionalEncoder

# Every declared layer's boolean arguments (tests/layer_registry.py), and the model
# builders' layers that take flags of their own.
CASES = [
    (declaration.cls.__name__, declaration.make, flag)
    for declaration in LAYERS
    for flag in declaration.flags
] + [("ConditionalEncoder", lambda **f: ConditionalEncoder("am_gru", 4, **f), "fused_loop")]
FLAGS = [(make, flag) for _, make, flag in CASES]
FLAG_IDS = [f"{name}-{flag}" for name, _, flag in CASES]


@pytest.mark.parametrize("make, flag", FLAGS, ids=FLAG_IDS)
@pytest.mark.parametrize("value", ["no", [0], 1])
def test_flags_must_be_bools(make, flag, value):
    with pytest.raises(TypeError, match=re.escape(f"`{flag}` must be a bool, got {value!r}")):
        make(**{flag: value})


@pytest.mark.parametrize("make, flag", FLAGS, ids=FLAG_IDS)
def test_numpy_bools_are_accepted(make, flag):
    assert getattr(make(**{flag: np.bool_(False)}), flag, False) is False


SIZED = {
    "split": lambda sizes: KeyValuePredictSplit("key_value", sizes=sizes),
    "window": lambda sizes: SlidingWindowAttention(3, mode="key_value", sizes=sizes),
    "window_cell": lambda sizes: SlidingWindowAttentionCell(
        keras.layers.LSTMCell(5), 3, mode="key_value", sizes=sizes
    ),
    "ngram": lambda sizes: NGramConcat(3, 4, sizes=sizes),
}


@pytest.mark.parametrize("kind", sorted(SIZED))
@pytest.mark.parametrize(
    "sizes, error, fragment",
    [
        (5, TypeError, "`sizes` must be a list of 2 positive integers, got 5"),
        ("23", TypeError, "`sizes` must be a list of 2 positive integers"),
        ((2, 2, 1), ValueError, "`sizes` must list 2 pieces"),
        ((2.5, 2.5), TypeError, "`sizes` must be an integer, got 2.5"),
        ((5, 0), ValueError, "`sizes` must be >= 1, got 0"),
    ],
)
def test_sizes_are_checked_when_made(kind, sizes, error, fragment):
    with pytest.raises(error, match=fragment):
        SIZED[kind](sizes)


@pytest.mark.parametrize("kind", ["split", "window", "ngram"])
def test_numpy_sizes_give_a_json_config(kind):
    config = SIZED[kind](np.array([2, 3])).get_config()
    assert json.loads(json.dumps(config))["sizes"] == [2, 3]
