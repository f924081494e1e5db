"""Flags and split sizes are checked when a layer is made, with errors that name them."""

import json
import re

import numpy as np
import pytest

from layer_registry import declarations, declared_makers

from tf_memlayers.layers import AssociativeGRU, DualAssociativeEncoder, DualAssociativeGRU
from examples.snli.encoders import make_encoder

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
    "DualAssociativeEncoder": (
        lambda **f: DualAssociativeEncoder(4, **f), "DualAssociativeGRU"
    ),
    # The SNLI example passes fused_loop on to its AM-GRU layers, which check it.
    "make_encoder_am_gru": (
        lambda **f: make_encoder("am_gru", 4, **f).encoder_layers[0], "AssociativeGRU"
    ),
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


# Every declared layer that takes explicit piece sizes (tests/layer_registry.py).
SIZED = declared_makers(init_argument="sizes")


def _pieces(make):
    """The one number of sizes ``make`` accepts, found by trying 1 to 6 pieces (a cell may
    still refuse sizes that do not add up to its cell's output width)."""
    accepted = []
    for count in range(1, 7):
        try:
            make(sizes=[1] * count)
        except ValueError as error:
            if "`sizes` must list" in str(error):
                continue
        accepted.append(count)
    assert len(accepted) == 1, accepted
    return accepted[0]


def _width(make):
    """The width a cell's sizes must add up to (its cell's output), or any width for a
    layer, which checks the sum when built."""
    layer = make()
    return getattr(layer, "cell_output_size", None) or 12


@pytest.mark.parametrize("name", sorted(SIZED))
def test_sizes_are_checked_when_made(name):
    make = SIZED[name]
    count = _pieces(make)
    integers = "integer" if count == 1 else "integers"
    pieces = "piece" if count == 1 else "pieces"
    bad = [
        (5, TypeError, f"{name}: `sizes` must be a list of {count} positive {integers}, got 5"),
        ("23", TypeError, f"`sizes` must be a list of {count} positive {integers}, got '23'"),
        ([1] * (count + 1), ValueError, f"`sizes` must list {count} {pieces}"),
        ([2.5] + [1] * (count - 1), TypeError, "`sizes` must be an integer, got 2.5"),
        ([1] * (count - 1) + [0], ValueError, "`sizes` must be >= 1, got 0"),
    ]
    for sizes, error, fragment in bad:
        with pytest.raises(error, match=re.escape(fragment)):
            make(sizes=sizes)


@pytest.mark.parametrize("name", sorted(SIZED))
def test_numpy_sizes_give_a_json_config(name):
    make = SIZED[name]
    sizes = [1] * (_pieces(make) - 1)
    sizes.append(_width(make) - sum(sizes))
    config = make(sizes=np.array(sizes)).get_config()
    assert json.loads(json.dumps(config))["sizes"] == sizes
