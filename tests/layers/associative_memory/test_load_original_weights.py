"""Loading the original code's variables: ambiguous names and the released Dual key."""

import numpy as np
import pytest

from tf_memlayers.compat import load_original_weights, original_variable_names
from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell


def built(cell, input_dim=5):
    cell.build((None, input_dim))
    return cell


def original_arrays(cell, scope, rng):
    return {
        f"{scope}/{name}": rng.normal(size=variable.shape).astype("float32")
        for name, variable in original_variable_names(cell).items()
    }


def test_two_cells_in_one_checkpoint_need_a_prefix():
    rng = np.random.default_rng(0)
    cell = built(AssociativeGRUCell(8, num_copies=2))
    encoder = original_arrays(cell, "encoder/rnn", rng)
    decoder = original_arrays(cell, "decoder/rnn", rng)
    with pytest.raises(ValueError, match="Several entries .*Keys/fully_connected.*prefix="):
        load_original_weights(cell, {**encoder, **decoder})
    with pytest.raises(TypeError, match="`prefix` must be a string"):
        load_original_weights(cell, {**encoder, **decoder}, prefix=3)
    load_original_weights(cell, {**encoder, **decoder}, prefix="decoder/")
    for name, variable in original_variable_names(cell).items():
        np.testing.assert_array_equal(variable.numpy(), decoder["decoder/rnn/" + name])


def test_released_dual_key_is_not_loaded_into_a_paper_cell():
    rng = np.random.default_rng(1)
    released = built(DualAssociativeGRUCell(8, num_copies=2, dual_key="released"))
    arrays = original_arrays(released, "rnn", rng)
    paper = built(DualAssociativeGRUCell(8, num_copies=2))
    with pytest.raises(ValueError, match="Keys/Dual.*dual_key='released'"):
        load_original_weights(paper, arrays)
    assert len(load_original_weights(released, arrays)) == 8  # 5 premise + 3 dual weights
