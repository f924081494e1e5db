"""The SNLI encoder of tf-memlayers 0.1 and 0.2 (`_conditional_encoder_v0.ConditionalEncoder`),
which loads their ``.keras`` files: a config with a kind name becomes this encoder, as the
saved 0.1 models' configs do, and its weights are laid out as those files hold them; in
float64 the encoder computes the paper's conditional encoding (layer 1 over the premise, then
over the hypothesis from the premise's final state, or, for the Dual AM-GRU, from an empty
memory reading the premise's; a GRU over both from the premise's final state), checked against
NumPy (`am_gru_reference` and a GRU written from Keras's equations) with masks and unrolled;
its probe of what layer 1 writes and reads, its default initializer and its argument checks.
That the whole saved models load and give their saved outputs is tests/test_saved_v0_1.py's
and tests/test_saved_v0_2.py's."""

import json
import pathlib
import zipfile

import keras
import numpy as np
import pytest

import tf_memlayers.models
from tests import am_gru_reference as ref
from tf_memlayers.models._conditional_encoder_v0 import ConditionalEncoder

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
DIM, UNITS, TOP_UNITS, COPIES = 3, 4, 5, 2
PREMISE_LENGTHS, HYPOTHESIS_LENGTHS = (5, 3), (4, 2)  # right padding in the second row


def _saved_encoder_config(kind):
    """The encoder's entry in the config of the SNLI model version 0.1 saved."""
    with zipfile.ZipFile(FIXTURES / f"snli_{kind}_v0.1.keras") as archive:
        config = json.loads(archive.read("config.json"))
    return next(
        layer for layer in config["config"]["layers"] if layer["config"]["name"] == "encoder"
    )


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_the_saved_0_1_encoder_config_becomes_the_v0_encoder(kind):
    saved = _saved_encoder_config(kind)
    # Saved as the class the current `ConditionalEncoder` is registered as.
    assert saved["registered_name"] == "tf_memlayers>ConditionalEncoder"
    encoder = keras.layers.deserialize(saved)
    assert type(encoder) is ConditionalEncoder
    fields = ("kind", "units", "top_units", "num_copies", "seed")
    assert {field: getattr(encoder, field) for field in fields} == {
        field: saved["config"][field] for field in fields
    }
    assert encoder.kind == kind
    # The current class hands any config with a kind name to this one, ...
    config = ConditionalEncoder("gru", units=3, top_units=2).get_config()
    again = tf_memlayers.models.ConditionalEncoder.from_config(config)
    assert type(again) is ConditionalEncoder and again.get_config() == config
    # ... which is registered under a name of its own.
    assert keras.saving.get_registered_name(ConditionalEncoder) == (
        "tf_memlayers>ConditionalEncoderV0"
    )
    assert keras.saving.get_registered_object("tf_memlayers>ConditionalEncoderV0") is (
        ConditionalEncoder
    )


def _weight_layout(path):
    """``{dataset path: shape}`` of the encoder's weights in a ``.weights.h5`` file."""
    import h5py

    layout = {}
    with h5py.File(path, "r") as weights:
        weights.visititems(
            lambda name, item: (
                layout.update({name: item.shape})
                if isinstance(item, h5py.Dataset) and "conditional_encoder" in name
                else None
            )
        )
    return layout


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_the_weights_are_laid_out_as_the_saved_0_1_files_hold_them(kind, tmp_path):
    # The saved weights find their variables by the layers' attribute and class names.
    with zipfile.ZipFile(FIXTURES / f"snli_{kind}_v0.1.keras") as archive:
        archive.extract("model.weights.h5", tmp_path / "saved")
    inputs = [keras.Input((None, DIM)), keras.Input((None, DIM))]
    encoder = ConditionalEncoder(kind, units=4, num_copies=2, seed=5, fused_loop=False)
    model = keras.Model(inputs, encoder(inputs))
    model.save_weights(tmp_path / "fresh.weights.h5")
    saved = _weight_layout(tmp_path / "saved" / "model.weights.h5")
    assert saved and _weight_layout(tmp_path / "fresh.weights.h5") == saved


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gru_reference(sequence, state, kernel, recurrent_kernel, bias):
    """Keras's GRU (reset gate after the recurrent product, gates ``[z | r | h]``, one input
    and one recurrent bias) over ``sequence`` ``[T, dim]`` from ``state``; returns the
    outputs ``[T, units]``."""
    units, outputs = len(state), []
    for x in sequence:
        from_input, from_state = x @ kernel + bias[0], state @ recurrent_kernel + bias[1]
        z = _sigmoid(from_input[:units] + from_state[:units])
        r = _sigmoid(from_input[units : 2 * units] + from_state[units : 2 * units])
        candidate = np.tanh(from_input[2 * units :] + r * from_state[2 * units :])
        state = z * state + (1 - z) * candidate
        outputs.append(state)
    return np.array(outputs)


def _numpy(x):
    """A tensor's or a variable's values, as float64."""
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


def _am_gru_weights(encoder):
    """The AM-GRU weights of layer 1 as `am_gru_reference` names them."""
    cell, names = (
        encoder.premise_cell,
        {
            "key": "key_kernel",
            "gate": "gate_kernel",
            "gate_bias": "gate_bias",
            "candidate": "candidate_kernel",
            "candidate_bias": "candidate_bias",
        },
    )
    w = {name: _numpy(getattr(cell, attribute)) for name, attribute in names.items()}
    if encoder.kind == "dual_am_gru":
        dual = encoder.hypothesis_cell
        w.update(
            dual_gate=_numpy(dual.dual_gate_kernel),
            dual_candidate=_numpy(dual.dual_candidate_kernel),
        )
        if encoder.dual_key == "released":
            w["dual_key"] = _numpy(dual.dual_key_kernel)
    return w


def _reference_encoding(encoder, premise, hypothesis):
    """``(p, h)`` of one unpadded pair ``[Tp, dim]``, ``[Th, dim]``, in NumPy."""
    if encoder.kind == "gru":
        cell = [
            _numpy(v)
            for v in (
                encoder.premise_cell.kernel,
                encoder.premise_cell.recurrent_kernel,
                encoder.premise_cell.bias,
            )
        ]
        premise_seq = _gru_reference(premise, np.zeros(UNITS), *cell)
        hypothesis_seq = _gru_reference(hypothesis, premise_seq[-1], *cell)
    else:
        w = _am_gru_weights(encoder)
        perms = ref.permutations(UNITS // 2, COPIES, encoder.seed)
        empty, zeros = np.zeros((1, UNITS * COPIES)), np.zeros((1, UNITS))
        premise_seq, memory = ref.reference_run(premise[None], empty, zeros, w, perms)
        if encoder.kind == "am_gru":  # the hypothesis continues the premise's memory
            hypothesis_seq, _ = ref.reference_run(
                hypothesis[None], memory, premise_seq[:, -1], w, perms
            )
        else:  # an empty memory, reading the premise's
            hypothesis_seq, _ = ref.reference_run(
                hypothesis[None],
                empty,
                premise_seq[:, -1],
                w,
                perms,
                dual=(encoder.dual_key, memory),
            )
        premise_seq, hypothesis_seq = premise_seq[0], hypothesis_seq[0]
    top = [_numpy(v) for v in encoder.top_layer.cell.weights]
    p = _gru_reference(premise_seq, np.zeros(TOP_UNITS), *top)[-1]
    return p, _gru_reference(hypothesis_seq, p, *top)[-1]


def _pair(rng, dtype="float64"):
    premise = rng.normal(size=(2, max(PREMISE_LENGTHS), DIM)).astype(dtype)
    hypothesis = rng.normal(size=(2, max(HYPOTHESIS_LENGTHS), DIM)).astype(dtype)
    masks = [
        np.arange(x.shape[1]) < np.array(lengths)[:, None]
        for x, lengths in ((premise, PREMISE_LENGTHS), (hypothesis, HYPOTHESIS_LENGTHS))
    ]
    return premise, hypothesis, masks


@pytest.mark.parametrize(
    "kind, dual_key, unroll",
    [
        ("gru", "paper", False),
        ("gru", "paper", True),
        ("am_gru", "paper", False),
        ("dual_am_gru", "paper", False),
        ("dual_am_gru", "released", True),
    ],
)
def test_the_encoding_matches_numpy_in_float64(float64_policy, kind, dual_key, unroll):
    rng = np.random.default_rng(len(kind) + unroll)
    premise, hypothesis, masks = _pair(rng)
    encoder = ConditionalEncoder(
        kind,
        units=UNITS,
        top_units=TOP_UNITS,
        num_copies=COPIES,
        dual_key=dual_key,
        seed=3,
        fused_loop=False,
        unroll=unroll,
    )
    encoder.build([premise.shape, hypothesis.shape])
    # Weights far from the ±0.05 initialisation, so that every term shows.
    encoder.set_weights([rng.uniform(-0.8, 0.8, w.shape) for w in encoder.get_weights()])
    p, h = (_numpy(t) for t in encoder([premise, hypothesis], mask=masks))
    assert p.shape == h.shape == (2, TOP_UNITS)
    for row, (premise_length, hypothesis_length) in enumerate(
        zip(PREMISE_LENGTHS, HYPOTHESIS_LENGTHS)
    ):
        expected_p, expected_h = _reference_encoding(
            encoder, premise[row, :premise_length], hypothesis[row, :hypothesis_length]
        )
        np.testing.assert_allclose(p[row], expected_p, rtol=0, atol=1e-10)
        np.testing.assert_allclose(h[row], expected_h, rtol=0, atol=1e-10)
    assert encoder.premise_layer.unroll == encoder.top_layer.unroll == unroll
    if kind != "gru":
        assert encoder.fused_loop is False and not encoder.premise_layer.uses_fused_loop
    # Not vacuous: the hypothesis's encoding depends on the premise.
    _, other_h = encoder([rng.normal(size=premise.shape), hypothesis], mask=masks)
    assert np.abs(_numpy(other_h) - h).max() > 1e-3


@pytest.mark.parametrize(
    "kind, dual_key", [("am_gru", None), ("dual_am_gru", "paper"), ("dual_am_gru", "released")]
)
def test_memory_retrievals_match_the_reference(float64_policy, kind, dual_key):
    rng = np.random.default_rng(6)
    encoder = ConditionalEncoder(
        kind, units=UNITS, num_copies=COPIES, dual_key=dual_key or "paper", fused_loop=False
    )
    encoder.build([(None, None, DIM), (None, None, DIM)])
    encoder.set_weights([rng.uniform(-0.8, 0.8, w.shape) for w in encoder.get_weights()])
    premise, hypothesis = rng.normal(size=(5, DIM)), rng.normal(size=(3, DIM))
    got = encoder.memory_retrievals(premise, hypothesis)
    want = ref.conditional_encoding_retrievals(
        premise, hypothesis, _am_gru_weights(encoder), UNITS, COPIES, encoder.seed, dual_key
    )
    assert sorted(got) == ["hypothesis_read", "premise_written"]
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-10, err_msg=name)
    assert np.abs(got["hypothesis_read"]).max() > 1e-3


def test_a_gru_encoder_has_no_retrievals():
    encoder = ConditionalEncoder("gru", units=UNITS)
    encoder.build([(None, None, DIM), (None, None, DIM)])
    assert encoder.memory_retrievals(np.ones((2, DIM)), np.ones((2, DIM))) == {}


def test_the_default_initializer_draws_every_kernel_afresh_from_the_seed():
    def kernels(seed):
        encoder = ConditionalEncoder(
            "dual_am_gru", units=UNITS, num_copies=COPIES, seed=seed, fused_loop=False
        )
        encoder.build([(None, None, DIM), (None, None, DIM)])
        return [(w.name, _numpy(w)) for w in encoder.weights if "kernel" in w.name]

    first, again, other = kernels(7), kernels(7), kernels(8)
    assert len(first) == 7  # layer 1's five, the GRU's two
    for (name, values), (_, same), (_, different) in zip(first, again, other):
        assert np.abs(values).max() <= 0.05 and np.abs(values).max() > 0.01, name
        np.testing.assert_array_equal(same, values, err_msg=name)
        assert not np.array_equal(different, values), name
    # No two kernels start alike, even of one shape (an integer seed would repeat them).
    starts = [tuple(values.ravel()[:4]) for _, values in first]
    assert len(set(starts)) == len(starts)


def test_output_shape_config_and_masks():
    encoder = ConditionalEncoder(
        "am_gru",
        units=UNITS,
        top_units=TOP_UNITS,
        num_copies=COPIES,
        seed=9,
        fused_loop=False,
        name="encoder",
    )
    assert encoder.compute_output_shape([(7, None, DIM), (7, None, DIM)]) == [
        (7, TOP_UNITS),
        (7, TOP_UNITS),
    ]
    assert encoder.compute_mask(None, [np.ones((1, 2), bool)] * 2) is None
    config = encoder.get_config()
    for key, value in dict(
        kind="am_gru",
        units=UNITS,
        top_units=TOP_UNITS,
        num_copies=COPIES,
        dual_key="paper",
        seed=9,
        fused_loop=False,
        unroll=False,
    ).items():
        assert config[key] == value, key
    clone = ConditionalEncoder.from_config(config)
    assert clone.get_config() == config
    assert ConditionalEncoder("gru", units=6).top_units == 6  # layer 2 defaults to units


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(kind="lstm"), ValueError, "`kind` must be one of 'gru', 'am_gru', 'dual_am_gru'"),
        (dict(kind="gru", fused_loop=True), ValueError, "kind='gru' has none"),
        (dict(kind="gru", fused_loop="yes"), TypeError, "`fused_loop` must be a bool or 'auto'"),
        (dict(units=0), ValueError, "`units` must be >= 1"),
        (dict(top_units=0), ValueError, "`top_units` must be >= 1"),
        (dict(seed=1.5), TypeError, "`seed` must be an integer"),
        (dict(unroll="yes"), TypeError, "`unroll` must be a bool"),
        (dict(kind="am_gru", num_copies=0), ValueError, "num_copies"),
        (dict(kind="dual_am_gru", dual_key="both"), ValueError, "dual_key"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        ConditionalEncoder(**{"units": 4, **kwargs})
