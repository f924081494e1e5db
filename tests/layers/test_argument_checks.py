"""The fused-loop choice is checked when a layer is made, by the layer that owns it, with an
error that names it (each layer's flags and sizes: its test class, tests/layer_test_case.py)."""

import re

import numpy as np
import pytest

from tf_memlayers.layers import AssociativeGRU, DualAssociativeEncoder, DualAssociativeGRU

FUSED_LOOP_OWNERS = {
    "AssociativeGRU": (lambda **f: AssociativeGRU(4, **f), "AssociativeGRU"),
    "DualAssociativeGRU": (lambda **f: DualAssociativeGRU(4, **f), "DualAssociativeGRU"),
    "DualAssociativeEncoder": (lambda **f: DualAssociativeEncoder(4, **f), "DualAssociativeGRU"),
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
