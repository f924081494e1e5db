"""Flags and split sizes are checked when a layer is made, with errors that name them."""

import json
import re

import keras
import numpy as np
import pytest

from layer_registry import declarations

from tf_memlayers.layers import (
    AssociativeGRU,
    DualAssociativeGRU,
    KeyValuePredictSplit,
    NGramConcat,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.models.snli import ConditionalEncoder

# Every declared layer's boolean arguments (tests/layer_registry.py).
CASES = [
    (declaration.cls.__name__, declaration.make, flag)
    for declaration in declarations()
    for flag in declaration.flags
]
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


FUSED_LOOP_OWNERS = {
    "AssociativeGRU": (lambda **f: AssociativeGRU(4, **f), "AssociativeGRU"),
    "DualAssociativeGRU": (lambda **f: DualAssociativeGRU(4, **f), "DualAssociativeGRU"),
    # The encoder passes fused_loop to its AM-GRU layers, which check it ...
    "ConditionalEncoder_am_gru": (
        lambda **f: ConditionalEncoder("am_gru", 4, **f), "AssociativeGRU"
    ),
    # ... and checks it itself where it has none.
    "ConditionalEncoder_gru": (lambda **f: ConditionalEncoder("gru", 4, **f), "ConditionalEncoder"),
}


@pytest.mark.parametrize("name", sorted(FUSED_LOOP_OWNERS))
@pytest.mark.parametrize("value", ["yes", "Auto", 1, None])
def test_fused_loop_must_be_a_bool_or_auto(name, value):
    make, owner = FUSED_LOOP_OWNERS[name]
    message = f"{owner}: `fused_loop` must be a bool or 'auto', got {value!r}."
    with pytest.raises(TypeError, match=re.escape(message)):
        make(fused_loop=value)
    assert make(fused_loop=np.bool_(False)).fused_loop is False
    assert make().fused_loop == "auto"


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
