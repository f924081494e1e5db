"""Loading the original code's variables into the cells, which then compute the reference
step; exporting them in the original names; ambiguous names and the released Dual key."""

import keras
import numpy as np
import pytest

from tests.am_gru_reference import permutations, random_weights, reference_run
from tests.support import as_numpy
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


def test_ambiguous_missing_and_misshapen_entries_are_refused():
    rng, cell = np.random.default_rng(0), built(AssociativeGRUCell(8, num_copies=2))
    encoder = original_arrays(cell, "encoder/rnn", rng)
    decoder = original_arrays(cell, "decoder/rnn", rng)
    # Two cells in one checkpoint need a prefix.
    with pytest.raises(ValueError, match="Several entries .*Keys/fully_connected.*prefix="):
        load_original_weights(cell, {**encoder, **decoder})
    with pytest.raises(TypeError, match="`prefix` must be a string"):
        load_original_weights(cell, {**encoder, **decoder}, prefix=3)
    load_original_weights(cell, {**encoder, **decoder}, prefix="decoder/")
    for name, variable in original_variable_names(cell).items():
        np.testing.assert_array_equal(variable.numpy(), decoder["decoder/rnn/" + name])
    # A misshapen entry, then a missing one.
    gates = "encoder/rnn/AssociativeGRUCell/Gates/fully_connected/weights"
    with pytest.raises(ValueError, match="Gates/fully_connected/weights"):
        load_original_weights(cell, {**encoder, gates: np.zeros((3, 3))})
    del encoder[gates.replace("Gates", "Keys")]
    with pytest.raises(ValueError, match="Keys/fully_connected/weights"):
        load_original_weights(cell, encoder)
    pytest.raises(TypeError, original_variable_names, keras.layers.GRUCell(4)).match("be an Asso")
    for function in (original_variable_names, lambda cell: load_original_weights(cell, decoder)):
        pytest.raises(ValueError, function, AssociativeGRUCell(8)).match("`cell` must be built")


def test_load_original_weights_round_trip():
    rng, units, input_dim = np.random.default_rng(15), 8, 5
    w = random_weights(rng, input_dim, units)
    dual = built(DualAssociativeGRUCell(units, num_copies=2, dual_key="released"), input_dim)
    # The original names (the documented table: tests/test_compat.py), in the original's scope.
    arrays = {
        "rnn/SelfControllerWrapper/" + name: w[variable.path.split("/")[-1].removesuffix("_kernel")]
        for name, variable in original_variable_names(dual).items()
    }
    # The released Dual key has no place in a paper cell.
    with pytest.raises(ValueError, match="Keys/Dual.*dual_key='released'"):
        load_original_weights(built(DualAssociativeGRUCell(units, num_copies=2)), arrays)
    assert len(load_original_weights(dual, arrays)) == 8  # 5 premise + 3 dual weights
    np.testing.assert_allclose(as_numpy(dual.premise_cell.gate_kernel), w["gate"], rtol=1e-6)
    np.testing.assert_allclose(as_numpy(dual.dual_key_kernel), w["dual_key"], rtol=1e-6)
    # Loaded weights reproduce the reference step.
    xs, zeros = rng.normal(size=(2, 3, input_dim)).astype("float32"), np.zeros((2, 16), "float32")
    source = rng.normal(size=(2, 16)).astype("float32")
    got = keras.layers.RNN(dual)(xs, initial_state=[zeros, np.zeros((2, 8), "float32"), source])
    dual_source = ("released", source.astype(float))
    ref, _ = reference_run(xs, zeros, np.zeros((2, 8)), w, permutations(4, 2), dual=dual_source)
    np.testing.assert_allclose(as_numpy(got), ref[:, -1], atol=1e-5)
    # Export in the original names and reload into a fresh AM-GRU.
    exported = original_variable_names(dual.premise_cell)
    fresh = built(AssociativeGRUCell(units, num_copies=2), input_dim)
    load_original_weights(fresh, {k: as_numpy(v) for k, v in exported.items()})
    for a, b in zip(fresh.weights, dual.premise_cell.weights):
        np.testing.assert_array_equal(as_numpy(a), as_numpy(b))
