"""`tf_memlayers.compat`: the loader's public path and the table its documentation gives."""

import re

import numpy as np
import pytest

from tf_memlayers import compat
from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell

# A row of the documentation's table: ``original variable``, then ``Keras weight``.
ROW = re.compile(r"^``(AssociativeGRUCell/\S+)``\s+``(\w+)``", re.MULTILINE)
DUAL_WEIGHTS = ("dual_key_kernel", "dual_gate_kernel", "dual_candidate_kernel")


def _built(cell, input_dim=5):
    cell.build((None, input_dim))
    return cell


@pytest.mark.parametrize("cell_kind", ["am_gru", "dual_paper", "dual_released"])
def test_the_documented_table_is_the_loaders_mapping(cell_kind):
    table = dict(ROW.findall(compat.__doc__))  # {original variable name: Keras weight}
    assert set(DUAL_WEIGHTS) <= set(table.values())
    if cell_kind == "am_gru":
        cell = _built(AssociativeGRUCell(8, num_copies=2))
        premise, expected = cell, {k: v for k, v in table.items() if v not in DUAL_WEIGHTS}
    else:
        dual_key = cell_kind.removeprefix("dual_")
        cell = _built(DualAssociativeGRUCell(8, num_copies=2, dual_key=dual_key))
        premise, expected = cell.premise_cell, dict(table)
        if dual_key == "paper":  # the paper's Dual key is the AM-GRU's (`key_kernel`)
            expected = {k: v for k, v in table.items() if v != "dual_key_kernel"}
    found = compat.original_variable_names(cell)
    assert set(found) == set(expected)
    for name, attribute in expected.items():
        owner = cell if attribute in DUAL_WEIGHTS else premise
        assert found[name] is getattr(owner, attribute), name


def test_the_tf08_spelling_loads_as_the_fully_connected_one():
    # The loader's public path, with the scope of the original names.
    assert compat.__all__ == ["load_original_weights", "original_variable_names"]
    assert compat.SCOPE == "AssociativeGRUCell"
    rng, cell = np.random.default_rng(0), _built(AssociativeGRUCell(8, num_copies=2))
    spelled = {"fully_connected/weights": "Linear/Matrix", "fully_connected/biases": "Linear/Bias"}
    arrays, expected = {}, {}
    for name, variable in compat.original_variable_names(cell).items():
        value, old_name = rng.normal(size=variable.shape).astype("float32"), name
        for new, old in spelled.items():
            old_name = old_name.replace(new, old)
        assert old_name != name
        arrays["rnn/SelfControllerWrapper/" + old_name] = expected[name] = value
    assert sorted(compat.load_original_weights(cell, arrays)) == sorted(expected)
    for name, variable in compat.original_variable_names(cell).items():
        np.testing.assert_array_equal(variable.numpy(), expected[name])
