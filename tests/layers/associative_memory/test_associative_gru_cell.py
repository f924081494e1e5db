"""AM-GRU and Dual AM-GRU cells against the original step in NumPy (`am_gru_reference`)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.am_gru_reference import permutations, random_weights, recorded, reference_run
from tests.layer_test_case import LayerTestCase, masking_checks, rnn_over, user_rnn
from tests.support import all_pairs, as_numpy, assert_close
from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell

# Every argument of the AM-GRU cells, for `run_config_test`.
AM_GRU_CONFIG = dict(units=8, num_copies=3, seed=99, kernel_regularizer="l2", bias_regularizer="l1")
AM_GRU_CONFIG |= dict(kernel_initializer="random_normal", gate_bias_initializer="zeros")
AM_GRU_CONFIG |= dict(candidate_bias_initializer="ones")


class AssociativeGRUCellTest(LayerTestCase):
    layer_cls = AssociativeGRUCell

    @pytest.mark.parametrize("copies, retrievals", [(2, False), (1, True)])
    def test_layer_cell_and_reset_behaviors(self, copies, retrievals):
        def make(dtype=None):
            return AssociativeGRUCell(6, copies, return_retrievals=retrievals, dtype=dtype)

        self.run_cell_tests(make)
        self.run_reset_tests(make)
        self.run_layer_test(rnn_over(make), **masking_checks((2, 3, 18 if retrievals else 6), 5))

    def test_journey(self, tmp_path):
        rnn = lambda: user_rnn(AssociativeGRUCell(8, num_copies=2), return_sequences=True)  # noqa: E731
        self.run_journey_test("step", lambda e: rnn()(e), tmp_path)

    def test_config_and_arguments(self):
        self.run_config_test(AssociativeGRUCell, **AM_GRU_CONFIG, return_retrievals=True)
        self.run_flags_test(lambda **kw: AssociativeGRUCell(4, **kw))


def set_cell_weights(cell, w):
    premise = getattr(cell, "premise_cell", cell)
    premise.key_kernel.assign(w["key"])
    premise.gate_kernel.assign(w["gate"])
    premise.gate_bias.assign(w["gate_bias"])
    premise.candidate_kernel.assign(w["candidate"])
    premise.candidate_bias.assign(w["candidate_bias"])
    if isinstance(cell, DualAssociativeGRUCell):
        if cell.dual_key == "released":
            cell.dual_key_kernel.assign(w["dual_key"])
        cell.dual_gate_kernel.assign(w["dual_gate"])
        cell.dual_candidate_kernel.assign(w["dual_candidate"])


def run_premise(cell, xs, w):
    layer = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    layer.build(xs.shape)
    set_cell_weights(cell, w)
    outputs, memory, last = layer(xs)
    return outputs, memory, last


# By pairs: sizes (200 > the permutations' 100 positions), copies, seeds, Dual keys, retrievals.
@pytest.mark.parametrize(
    "units, copies, seed, dual_key, retrievals",
    all_pairs(
        [8, 200],
        [1, 3, 8],
        [123, 7],
        [None, "paper", "released"],
        [False, True],
        split_by_backend=True,
    ),
)
@pytest.mark.usefixtures("float64_policy")
def test_cells_match_the_original_step_in_float64(units, copies, seed, dual_key, retrievals):
    rng = np.random.default_rng(units * copies + 1)
    steps, batch = (6, 3) if units == 8 else (5, 2)
    xs, ys = rng.normal(size=(batch, steps, 5)), rng.normal(size=(batch, steps - 1, 5))
    w = random_weights(rng, 5, units)
    options = dict(num_copies=copies, seed=seed, return_retrievals=retrievals)
    perms = permutations(units // 2, copies, seed)
    zeros, zeros_out = np.zeros((batch, units * copies)), np.zeros((batch, units))
    record = []
    if dual_key is None:
        cell = AssociativeGRUCell(units, **options)
        assert cell.permutations == tuple(map(tuple, perms))  # read-only, the step's
        pytest.raises(AttributeError, setattr, cell, "permutations", perms[::-1])
        outputs, memory, last = run_premise(cell, xs, w)
        ref_outputs, ref_memory = reference_run(xs, zeros, zeros_out, w, perms, record=record)
        np.testing.assert_allclose(as_numpy(last), ref_outputs[:, -1], atol=1e-10, rtol=0)
        sequence, initial, names = xs, [zeros, zeros_out], ["written", "read"]
    else:
        cell = DualAssociativeGRUCell(units, dual_key=dual_key, **options)
        # The premise read by the Dual cell's own AM-GRU cell, as conditional encoding does.
        _, source, last = run_premise(cell.premise_cell, xs, w)
        layer = keras.layers.RNN(cell, return_sequences=True, return_state=True)
        layer.build(ys.shape)
        set_cell_weights(cell, w)
        sequence, initial = ys, [zeros, as_numpy(last), as_numpy(source)]
        outputs, memory, _, source_out = layer(ys, initial_state=initial)
        np.testing.assert_array_equal(as_numpy(source_out), as_numpy(source))  # pass-through
        _, ref_source = reference_run(xs, zeros, zeros_out, w, perms)
        ref_outputs, ref_memory = reference_run(
            ys, zeros, as_numpy(last), w, perms, dual=(dual_key, ref_source), record=record
        )
        names = ["written", "read", "source_read"]
        assert np.abs(recorded(record, "source_read")).max() > 0.1  # h2 is not trivially zero
    assert_close([as_numpy(outputs)[..., :units], memory], [ref_outputs, ref_memory], 1e-10)
    if retrievals:  # the retrievals after the `units` wide output are the reference's `names`
        pieces = np.split(as_numpy(outputs)[..., units:], len(names), axis=-1)
        for name, g in zip(names, pieces):
            np.testing.assert_allclose(g, recorded(record, name), atol=1e-10, rtol=0, err_msg=name)
    # Each step's write key (`call_with_retrievals`): bound(x W_key), or the released layout's.
    states, keys = initial, []
    for t in range(sequence.shape[1]):
        _, states, step_retrievals = cell.call_with_retrievals(sequence[:, t], states)
        keys.append(as_numpy(step_retrievals["key"]))
    np.testing.assert_allclose(np.stack(keys, 1), recorded(record, "key"), atol=1e-10, rtol=0)
    # The check is not vacuous: the memory is non-trivial and bound() clipped keys.
    assert np.abs(ref_memory).max() > 0.1 and (recorded(record, "key_modulus") > 1).any()


def test_float32_matches_the_float64_reference_and_a_zero_source_memory_is_ignored():
    """The AM-GRU cell in float32; the paper's Dual cell reading a zero source memory (its own
    kernels left random) is its AM-GRU cell."""
    rng = np.random.default_rng(7)
    xs, w = rng.normal(size=(3, 6, 5)), random_weights(rng, 5, 16)
    dual = DualAssociativeGRUCell(16, num_copies=4)
    outputs, memory, _ = run_premise(dual.premise_cell, xs.astype("float32"), w)
    perms = permutations(8, 4)
    ref_outputs, ref_memory = reference_run(xs, np.zeros((3, 64)), np.zeros((3, 16)), w, perms)
    assert_close([outputs, memory], [ref_outputs, ref_memory], 1e-5)
    zeros = [np.zeros((3, size), "float32") for size in (64, 16, 64)]
    got = keras.layers.RNN(dual)(xs.astype("float32"), initial_state=zeros)
    np.testing.assert_allclose(as_numpy(got), as_numpy(outputs)[:, -1], atol=1e-6)


def test_dual_cell_holds_the_am_gru_weights_and_its_own_initialized_and_regularized():
    # (The config's initializers and regularizers: DualAssociativeGRUCellTest's config test.)
    config = {**AM_GRU_CONFIG, "units": 6, "kernel_initializer": "zeros", "dual_key": "released"}
    dual = DualAssociativeGRUCell(**config)
    dual.build((None, 4))
    premise = dual.premise_cell
    premise_ids = {id(v) for v in premise.weights}
    assert len(premise_ids) == 5 and premise_ids <= {id(v) for v in dual.weights}
    names = sorted(v.path.split("/")[-1] for v in dual.weights if id(v) not in premise_ids)
    assert names == ["dual_candidate_kernel", "dual_gate_kernel", "dual_key_kernel"]
    kernels = (dual.dual_key_kernel, dual.dual_gate_kernel, dual.dual_candidate_kernel)
    for kernel in (*kernels, premise.candidate_kernel, premise.gate_kernel, premise.key_kernel):
        assert not np.any(as_numpy(kernel)) and kernel.regularizer is not None
    assert not np.any(as_numpy(premise.gate_bias)) and premise.gate_bias.regularizer is not None
    np.testing.assert_array_equal(as_numpy(premise.candidate_bias), 1.0)


def test_retrieval_noise_shrinks_with_more_copies():
    """Write items under random keys and read one back (paper eq. 5): more copies, less noise."""
    rng, m, items, trials, errors = np.random.default_rng(2016), 64, 8, 40, {}
    for copies in (1, 4, 16):
        cell, total = AssociativeGRUCell(2 * m, num_copies=copies), 0.0
        for _ in range(trials):
            keys = np.exp(1j * rng.uniform(0, 2 * np.pi, size=(items, m)))  # |k| = 1
            values = rng.normal(size=(items, m)) + 1j * rng.normal(size=(items, m))
            re, im = cell._key_copies(*(ops.convert_to_tensor(k) for k in (keys.real, keys.imag)))
            copied = as_numpy(re) + 1j * as_numpy(im)  # [items, copies, m]
            memory = (copied * values[:, None]).sum(axis=0)
            read = (np.conj(copied[0]) * memory).mean(axis=0)
            total += np.mean(np.abs(read - values[0]) ** 2)
        errors[copies] = total / trials
    # Noise variance ~ (items - 1) / copies: each 4x more copies cuts it by well over 2x.
    assert errors[4] < errors[1] / 2.5 and errors[16] < errors[4] / 2.5
