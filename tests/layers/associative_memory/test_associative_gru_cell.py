"""AM-GRU and Dual AM-GRU against a NumPy float64 restatement of the original step
(`am_gru_reference`)."""

import os

import keras
import numpy as np
import pytest
from keras import ops

from tests.am_gru_reference import permutations, random_weights, recorded, reference_run
from tests.layer_test_case import (
    CELL_SPEC,
    RNN_MASKING,
    CellTests,
    LayerTestCase,
    ResetCellTests,
    rnn_case,
    user_rnn,
)
from tests.support import masked_rnn
from tf_memlayers.compat import load_original_weights, original_variable_names
from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell
from tf_memlayers.models._compiling import compile_and_build_optimizer


class AssociativeGRUCellTest(CellTests, ResetCellTests, LayerTestCase):
    """The shared suites of `AssociativeGRUCell` (tests/layer_test_case.py)."""

    layer_cls = AssociativeGRUCell
    make = staticmethod(lambda **kw: AssociativeGRUCell(4, **kw))
    flags = ("return_retrievals",)
    reference = "am_gru_reference"
    not_in = {"output_spec": CELL_SPEC, "nan_padding": RNN_MASKING}
    cells = {
        "am_gru": lambda dtype=None: AssociativeGRUCell(6, num_copies=2, dtype=dtype),
        "am_gru_retrievals": lambda dtype=None: AssociativeGRUCell(
            6, num_copies=1, return_retrievals=True, dtype=dtype
        ),
    }
    keras_checks = {
        "rnn_am_gru": rnn_case(cells["am_gru"], 6, 5, 0),
        "rnn_am_gru_retrievals": rnn_case(cells["am_gru_retrievals"], 18, 5, 0),
    }
    journeys = {
        "AssociativeGRUCell": (
            "step",
            lambda e: user_rnn(AssociativeGRUCell(8, num_copies=2), return_sequences=True)(e),
        ),
    }


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


# ---------------------------------------------------------------------------------------------


CASES = [(8, 1, 6, 3), (8, 3, 6, 3), (8, 8, 6, 3), (200, 1, 5, 2), (200, 3, 5, 2), (200, 8, 5, 2)]
# The default permutation seed 123, plus two cases with another seed.
SEEDED_CASES = [case + (123,) for case in CASES] + [(8, 3, 6, 3, 7), (200, 8, 5, 2, 7)]


@pytest.mark.parametrize("units,copies,steps,batch,seed", SEEDED_CASES)
def test_am_gru_matches_the_original_step_in_float64(
    float64_policy, units, copies, steps, batch, seed
):
    rng = np.random.default_rng(units + copies)
    xs = rng.normal(size=(batch, steps, 5))
    w = random_weights(rng, 5, units)
    cell = AssociativeGRUCell(units, num_copies=copies, seed=seed)
    outputs, memory, last = run_premise(cell, xs, w)
    perms = permutations(units // 2, copies, seed)
    zeros_memory, zeros_out = np.zeros((batch, units * copies)), np.zeros((batch, units))
    record = []
    ref_outputs, ref_memory = reference_run(xs, zeros_memory, zeros_out, w, perms, record=record)
    np.testing.assert_allclose(np.asarray(outputs), ref_outputs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(memory), ref_memory, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(last), ref_outputs[:, -1], atol=1e-10, rtol=0)
    # The check is not vacuous: the memory is non-trivial and bound() clipped keys.
    assert np.abs(ref_memory).max() > 0.1
    assert (recorded(record, "key_modulus") > 1).any()


@pytest.mark.parametrize("dual_key", ["paper", "released"])
@pytest.mark.parametrize("units,copies,steps,batch", CASES)
def test_dual_am_gru_matches_the_original_step_in_float64(
    float64_policy, units, copies, steps, batch, dual_key
):
    rng = np.random.default_rng(units * copies + 1)
    xs, ys = rng.normal(size=(batch, steps, 5)), rng.normal(size=(batch, steps - 1, 5))
    w = random_weights(rng, 5, units)
    dual = DualAssociativeGRUCell(units, num_copies=copies, dual_key=dual_key)
    # The premise read by the Dual cell's own AM-GRU cell, as conditional encoding does.
    _, source, last = run_premise(dual.premise_cell, xs, w)
    layer = keras.layers.RNN(dual, return_sequences=True, return_state=True)
    layer.build(ys.shape)
    set_cell_weights(dual, w)
    zeros = np.zeros((batch, units * copies))
    outputs, memory, _, source_out = layer(ys, initial_state=[zeros, last, source])

    perms = permutations(units // 2, copies)
    _, ref_source = reference_run(xs, zeros, np.zeros((batch, units)), w, perms)
    ref_outputs, ref_memory = reference_run(
        ys, zeros, np.asarray(last), w, perms, dual=(dual_key, ref_source)
    )
    np.testing.assert_allclose(np.asarray(outputs), ref_outputs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(memory), ref_memory, atol=1e-10, rtol=0)
    np.testing.assert_array_equal(np.asarray(source_out), np.asarray(source))  # pass-through


def test_am_gru_float32_matches_float64_reference():
    rng = np.random.default_rng(7)
    xs = rng.normal(size=(3, 6, 5))
    w = random_weights(rng, 5, 16)
    cell = AssociativeGRUCell(16, num_copies=4)
    outputs, memory, _ = run_premise(cell, xs.astype("float32"), w)
    perms = permutations(8, 4)
    ref_outputs, ref_memory = reference_run(xs, np.zeros((3, 64)), np.zeros((3, 16)), w, perms)
    np.testing.assert_allclose(np.asarray(outputs), ref_outputs, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(memory), ref_memory, atol=1e-5, rtol=0)


def test_dual_cell_holds_the_am_gru_weights_and_the_dual_kernels():
    dual = DualAssociativeGRUCell(8, num_copies=2, dual_key="released")
    dual.build((None, 5))
    premise_ids = {id(v) for v in dual.premise_cell.weights}
    assert len(premise_ids) == 5 and premise_ids <= {id(v) for v in dual.weights}
    names = sorted(v.path.split("/")[-1] for v in dual.weights if id(v) not in premise_ids)
    assert names == ["dual_candidate_kernel", "dual_gate_kernel", "dual_key_kernel"]


def test_zero_source_memory_makes_the_paper_dual_cell_an_am_gru():
    rng = np.random.default_rng(8)
    xs = rng.normal(size=(2, 4, 5)).astype("float32")
    dual = DualAssociativeGRUCell(8, num_copies=3)
    expected = keras.layers.RNN(dual.premise_cell)(xs)
    zeros = np.zeros((2, 24), "float32")
    got = keras.layers.RNN(dual)(xs, initial_state=[zeros, np.zeros((2, 8), "float32"), zeros])
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-6)


def test_source_memory_changes_the_dual_output():
    rng = np.random.default_rng(9)
    xs = rng.normal(size=(2, 4, 5)).astype("float32")
    dual = DualAssociativeGRUCell(8, num_copies=3)
    layer = keras.layers.RNN(dual)
    zeros, out0 = np.zeros((2, 24), "float32"), np.zeros((2, 8), "float32")
    a = np.asarray(layer(xs, initial_state=[zeros, out0, zeros]))
    source = rng.normal(size=(2, 24)).astype("float32")
    b = np.asarray(layer(xs, initial_state=[zeros, out0, source]))
    assert np.abs(a - b).max() > 1e-3


def test_retrieval_noise_shrinks_with_more_copies():
    """Write items under random keys and read one back (paper eq. 5): more copies, less noise."""
    rng = np.random.default_rng(2016)
    m, items, trials = 64, 8, 40
    errors = {}
    for copies in (1, 4, 16):
        cell = AssociativeGRUCell(2 * m, num_copies=copies)
        total = 0.0
        for _ in range(trials):
            keys = np.exp(1j * rng.uniform(0, 2 * np.pi, size=(items, m)))  # |k| = 1
            values = rng.normal(size=(items, m)) + 1j * rng.normal(size=(items, m))
            re, im = cell.key_copies(
                ops.convert_to_tensor(keys.real), ops.convert_to_tensor(keys.imag)
            )
            memory = np.zeros((1, copies, m), complex)
            for i in range(items):
                k_c = np.asarray(re)[i] + 1j * np.asarray(im)[i]
                memory = memory + k_c * values[i]
            read = (np.conj(np.asarray(re)[0] + 1j * np.asarray(im)[0]) * memory[0]).mean(axis=0)
            total += np.mean(np.abs(read - values[0]) ** 2)
        errors[copies] = total / trials
    # Noise variance ~ (items - 1) / copies: each 4x more copies cuts it by well over 2x.
    assert errors[4] < errors[1] / 2.5
    assert errors[16] < errors[4] / 2.5


def test_padded_steps_neither_write_nor_change_the_state():
    rng = np.random.default_rng(10)
    lengths = [5, 3]
    xs = rng.normal(size=(2, 5, 4)).astype("float32")
    xs[1, 3:] = 0.0
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    for cell in (AssociativeGRUCell(8, num_copies=3), DualAssociativeGRUCell(8, num_copies=3)):
        layer = keras.layers.RNN(cell, return_state=True)
        batch_states = masked_rnn(layer, xs, mask)
        for b, length in enumerate(lengths):
            single = layer(xs[b : b + 1, :length])
            for got, expected in zip(batch_states, single):
                np.testing.assert_allclose(np.asarray(got)[b], np.asarray(expected)[0], atol=1e-6)


def test_return_retrievals_exposes_write_and_read():
    rng = np.random.default_rng(11)
    xs = rng.normal(size=(2, 4, 5)).astype("float32")
    plain = AssociativeGRUCell(8, num_copies=2)
    outputs = keras.layers.RNN(plain, return_sequences=True)(xs)
    probe = AssociativeGRUCell(8, num_copies=2, return_retrievals=True)
    layer = keras.layers.RNN(probe, return_sequences=True)
    layer.build(xs.shape)
    probe.set_weights(plain.get_weights())
    full = np.asarray(layer(xs))
    assert full.shape == (2, 4, 24)
    out, written, read = full[..., :8], full[..., 8:16], full[..., 16:]
    np.testing.assert_allclose(out, np.asarray(outputs), atol=1e-6)
    np.testing.assert_allclose(read + written, out, atol=1e-6)  # o_t = h + delta
    np.testing.assert_allclose(read[:, 0], 0.0)  # the memory starts empty


@pytest.mark.parametrize("dual_key", ["paper", "released"])
def test_dual_return_retrievals_match_the_reference(dual_key):
    rng = np.random.default_rng(11)
    xs, ys = rng.normal(size=(2, 5, 5)), rng.normal(size=(2, 4, 5))
    w = random_weights(rng, 5, 8)
    perms = permutations(4, 2)
    zeros = np.zeros((2, 16))
    _, source = reference_run(xs, zeros, np.zeros((2, 8)), w, perms)
    source, last = source.astype("float32"), rng.normal(size=(2, 8)).astype("float32")
    dual = DualAssociativeGRUCell(8, num_copies=2, dual_key=dual_key, return_retrievals=True)
    layer = keras.layers.RNN(dual, return_sequences=True)
    layer.build(ys.shape)
    set_cell_weights(dual, w)
    full = layer(ys.astype("float32"), initial_state=[zeros.astype("float32"), last, source])
    assert full.shape == (2, 4, 32)
    record = []
    ref_outputs, _ = reference_run(
        ys,
        zeros,
        last.astype(float),
        w,
        perms,
        dual=(dual_key, source.astype(float)),
        record=record,
    )
    pieces = {"written": full[..., 8:16], "read": full[..., 16:24], "source_read": full[..., 24:]}
    np.testing.assert_allclose(full[..., :8], ref_outputs, atol=1e-6, rtol=0)
    for name, got in pieces.items():
        np.testing.assert_allclose(got, recorded(record, name), atol=1e-6, rtol=0, err_msg=name)
    assert np.abs(recorded(record, "source_read")).max() > 0.1  # h2 is not trivially zero


@pytest.mark.parametrize("dual_key", [None, "paper", "released"])
def test_the_write_key_each_step_reports_matches_the_reference(dual_key):
    # call_with_retrievals's "key": bound(x W_key) (or the released layout's write key), the
    # key a memory probe compares across steps.
    rng = np.random.default_rng(13)
    xs = rng.normal(size=(2, 4, 5))
    w = random_weights(rng, 5, 8, scale=1.5)  # large enough for bound() to clip some keys
    perms = permutations(4, 2, 123)
    if dual_key is None:
        cell, extra = AssociativeGRUCell(8, num_copies=2, dtype="float64"), []
        dual = None
    else:
        cell = DualAssociativeGRUCell(8, num_copies=2, dual_key=dual_key, dtype="float64")
        source = rng.normal(size=(2, 16))
        extra, dual = [source], (dual_key, source)
    cell.build((2, 5))
    set_cell_weights(cell, w)
    record = []
    reference_run(xs, np.zeros((2, 16)), np.zeros((2, 8)), w, perms, dual=dual, record=record)
    states, keys = [np.zeros((2, 16)), np.zeros((2, 8)), *extra], []
    for t in range(xs.shape[1]):
        _, states, retrievals = cell.call_with_retrievals(xs[:, t], states)
        keys.append(ops.convert_to_numpy(retrievals["key"]))
    np.testing.assert_allclose(np.stack(keys, 1), recorded(record, "key"), atol=1e-10, rtol=0)
    assert (recorded(record, "key_modulus") > 1).any()  # bound() clipped some


@pytest.mark.parametrize("cls", [AssociativeGRUCell, DualAssociativeGRUCell])
def test_keras_round_trip_gives_identical_outputs(tmp_path, cls):
    rng = np.random.default_rng(12)
    xs = rng.normal(size=(2, 5, 4)).astype("float32")
    kwargs = dict(num_copies=3, seed=99, kernel_initializer="random_normal")
    if cls is DualAssociativeGRUCell:
        kwargs["dual_key"] = "released"
    cell = cls(8, **kwargs)
    inputs = keras.Input((None, 4))
    model = keras.Model(inputs, keras.layers.RNN(cell, return_sequences=True)(inputs))
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(np.asarray(loaded(xs)), np.asarray(model(xs)))
    rebuilt = cls.from_config(cell.get_config())
    assert rebuilt.get_config() == cell.get_config()
    assert rebuilt.permutations == cell.permutations


def test_jit_compiled_training_step_matches_eager():
    rng = np.random.default_rng(13)
    xs = rng.normal(size=(4, 6, 5)).astype("float32")
    ys = rng.normal(size=(4, 8)).astype("float32")

    def build():
        keras.utils.set_random_seed(5)
        inputs = keras.Input((6, 5))
        outputs = keras.layers.RNN(AssociativeGRUCell(8, num_copies=4))(inputs)
        return keras.Model(inputs, outputs)

    results = []
    for jit in (False, True):
        model = build()
        compile_and_build_optimizer(
            model, optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=jit
        )
        model.train_on_batch(xs, ys)
        results.append(model.predict_on_batch(xs))
    np.testing.assert_allclose(results[0], results[1], atol=1e-5)


def _premise_then_dual(steps, features):
    """An AM-GRU over the inputs, then a Dual AM-GRU over them reading its memory: a model of
    ``[premise outputs, premise memory, dual output]`` and one with a regression head."""
    inputs = keras.Input((steps, features))
    dual = DualAssociativeGRUCell(8, num_copies=4)
    seq, memory, last = keras.layers.RNN(
        dual.premise_cell, return_sequences=True, return_state=True
    )(inputs)
    out = keras.layers.RNN(dual)(inputs, initial_state=[memory * 0.0, last, memory])
    head = keras.layers.Dense(1, dtype="float32")(out)
    return keras.Model(inputs, [seq, memory, out]), keras.Model(inputs, head)


def test_mixed_float16_matches_float32_and_trains():
    rng = np.random.default_rng(14)
    xs = rng.normal(size=(4, 6, 5)).astype("float32")
    expected, _ = _premise_then_dual(6, 5)
    expected.set_weights([rng.uniform(-0.8, 0.8, size=w.shape) for w in expected.get_weights()])
    want = [np.asarray(t) for t in expected(xs)]
    keras.config.set_dtype_policy("mixed_float16")
    model, trainer = _premise_then_dual(6, 5)
    model.set_weights(expected.get_weights())
    got = model(xs)
    assert got[0].dtype == "float16"
    for name, g, w in zip(["outputs", "memory", "dual output"], got, want):
        g = np.asarray(g, "float32")
        np.testing.assert_allclose(g, w, atol=5e-3 * max(1.0, np.abs(w).max()), err_msg=name)
    compile_and_build_optimizer(trainer, optimizer="adam", loss="mse")
    loss = trainer.train_on_batch(xs, np.ones((4, 1), "float32"))
    assert np.isfinite(loss)


def test_load_original_weights_round_trip():
    rng = np.random.default_rng(15)
    units, input_dim = 8, 5
    w = random_weights(rng, input_dim, units)
    prefix = "rnn/SelfControllerWrapper/AssociativeGRUCell/"
    arrays = {
        prefix + "Keys/fully_connected/weights": w["key"],
        prefix + "Gates/fully_connected/weights": w["gate"],
        prefix + "Gates/fully_connected/biases": w["gate_bias"],
        prefix + "Candidate/fully_connected/weights": w["candidate"],
        prefix + "Candidate/fully_connected/biases": w["candidate_bias"],
        prefix + "Keys/Dual/fully_connected/weights": w["dual_key"],
        prefix + "DualGates/fully_connected/weights": w["dual_gate"],
        prefix + "DualCandidate/fully_connected/weights": w["dual_candidate"],
    }
    dual = DualAssociativeGRUCell(units, num_copies=2, dual_key="released")
    dual.build((None, input_dim))
    loaded = load_original_weights(dual, arrays)
    assert len(loaded) == 8
    np.testing.assert_allclose(np.asarray(dual.premise_cell.gate_kernel), w["gate"], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(dual.dual_key_kernel), w["dual_key"], rtol=1e-6)
    # Loaded weights reproduce the reference step.
    xs = rng.normal(size=(2, 3, input_dim)).astype("float32")
    zeros = np.zeros((2, 16), "float32")
    source = rng.normal(size=(2, 16)).astype("float32")
    got = keras.layers.RNN(dual)(xs, initial_state=[zeros, np.zeros((2, 8), "float32"), source])
    ref, _ = reference_run(
        xs.astype(float),
        zeros.astype(float),
        np.zeros((2, 8)),
        w,
        permutations(4, 2),
        dual=("released", source.astype(float)),
    )
    np.testing.assert_allclose(np.asarray(got), ref[:, -1], atol=1e-5)
    # Export in the original names and reload into a fresh AM-GRU.
    exported = original_variable_names(dual.premise_cell)
    assert set(exported) == {
        "AssociativeGRUCell/Keys/fully_connected/weights",
        "AssociativeGRUCell/Gates/fully_connected/weights",
        "AssociativeGRUCell/Gates/fully_connected/biases",
        "AssociativeGRUCell/Candidate/fully_connected/weights",
        "AssociativeGRUCell/Candidate/fully_connected/biases",
    }
    fresh = AssociativeGRUCell(units, num_copies=2)
    fresh.build((None, input_dim))
    load_original_weights(fresh, {k: np.asarray(v) for k, v in exported.items()})
    for a, b in zip(fresh.weights, dual.premise_cell.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_load_original_weights_rejects_wrong_shapes_and_missing_names():
    cell = AssociativeGRUCell(8, num_copies=2)
    cell.build((None, 5))
    arrays = {name: np.asarray(v) for name, v in original_variable_names(cell).items()}
    bad = dict(arrays)
    bad["AssociativeGRUCell/Gates/fully_connected/weights"] = np.zeros((3, 3))
    with pytest.raises(ValueError, match="Gates/fully_connected/weights"):
        load_original_weights(cell, bad)
    missing = dict(arrays)
    del missing["AssociativeGRUCell/Keys/fully_connected/weights"]
    with pytest.raises(ValueError, match="Keys/fully_connected/weights"):
        load_original_weights(cell, missing)


# ---------------------------------------------------------------------------------------------
# Bad input


def test_odd_units_is_rejected():
    with pytest.raises(ValueError, match="units.*even.*7"):
        AssociativeGRUCell(7)
    with pytest.raises(ValueError, match="units.*even"):
        DualAssociativeGRUCell(9)


def test_num_copies_below_one_is_rejected():
    with pytest.raises(ValueError, match="num_copies.*>= 1.*0"):
        AssociativeGRUCell(8, num_copies=0)
    with pytest.raises(TypeError, match="num_copies"):
        AssociativeGRUCell(8, num_copies=2.5)


def test_unknown_dual_key_is_rejected():
    with pytest.raises(ValueError, match="dual_key.*'paper'.*'released'.*'shared'"):
        DualAssociativeGRUCell(8, dual_key="shared")


def test_mismatched_source_memory_width_is_rejected():
    dual = DualAssociativeGRUCell(8, num_copies=3)
    xs = np.ones((2, 4, 5), "float32")
    with pytest.raises(ValueError, match="source memory.*24.*got 16"):
        keras.layers.RNN(dual)(
            xs,
            initial_state=[
                np.zeros((2, 24), "float32"),
                np.zeros((2, 8), "float32"),
                np.zeros((2, 16), "float32"),
            ],
        )


def test_a_premise_cell_argument_names_the_encoder_that_shares_it():
    with pytest.raises(TypeError, match="premise_cell.*DualAssociativeEncoder"):
        DualAssociativeGRUCell(8, premise_cell=AssociativeGRUCell(8))


def test_initializers_and_regularizers_reach_every_weight_of_the_dual_cell():
    dual = DualAssociativeGRUCell(
        6,
        num_copies=2,
        kernel_initializer="zeros",
        kernel_regularizer="l2",
        gate_bias_initializer="zeros",
        candidate_bias_initializer="ones",
        bias_regularizer="l1",
    )
    dual.build((None, 4))
    premise = dual.premise_cell
    for kernel in (
        dual.dual_gate_kernel,
        dual.dual_candidate_kernel,
        premise.gate_kernel,
        premise.key_kernel,
        premise.candidate_kernel,
    ):
        assert not np.any(np.asarray(kernel)) and kernel.regularizer is not None
    assert not np.any(np.asarray(premise.gate_bias))
    np.testing.assert_array_equal(np.asarray(premise.candidate_bias), 1.0)
    assert premise.gate_bias.regularizer is not None
    config = dual.get_config()
    assert config["kernel_initializer"]["class_name"] == "Zeros"
    assert config["kernel_regularizer"]["class_name"] == "L2"
    assert config["bias_regularizer"]["class_name"] == "L1"
