"""`ConditionalEncoder`: Table 1's stacks and any other against their layers run by hand."""

import json
import pathlib
import zipfile

import keras
import numpy as np
import pytest

from tests.am_gru_reference import conditional_encoding_retrievals
from tests.layer_test_case import LayerTestCase, dtype_policy, masking_checks
from tests.memory_attention_reference import randomize
from tests.support import as_numpy, assert_close
from tf_memlayers.layers import AssociativeGRU, ConditionalEncoder, DualAssociativeEncoder

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
STATES = dict(units=4, return_state=True)
APART = keras.layers.Bidirectional(keras.layers.GRU(**STATES), merge_mode=None)
# Table 1's stacks of two layers (word-by-word: test_conditional_attention_encoder.py).
KINDS = ("gru", "am_gru", "dual_am_gru")


def _encoder(kind, units=8, dtype=None, **kwargs):
    """Table 1's stack ``kind``: its first layer (taking ``kwargs``), then a GRU."""
    options = dict(return_sequences=True, dtype=dtype)
    if kind == "gru":
        first = keras.layers.GRU(units, return_state=True, **options)
    elif kind == "am_gru":
        first = AssociativeGRU(units, num_copies=2, return_state=True, **options, **kwargs)
    else:
        first = DualAssociativeEncoder(units, num_copies=2, **options, **kwargs)
    top = keras.layers.GRU(units, return_state=True, dtype=dtype)
    return ConditionalEncoder([first, top], dtype=dtype)


class ConditionalEncoderTest(LayerTestCase):
    # Its layers compute under their own policies: mixed precision is tested apart.
    layer_cls = ConditionalEncoder

    @pytest.mark.parametrize(
        "kind, weights, grus", [("gru", 6, 2), ("am_gru", 5 + 3, 1), ("dual_am_gru", 7 + 3, 1)]
    )
    def test_layer_behaviors(self, kind, weights, grus):
        # A seed generator for each Keras GRU's dropout.
        skipped = dict(run_training_check=False, run_mixed_precision_check=False)
        checks = masking_checks([(2, 4)] * 2, weights, ((2, 5, 3), (2, 4, 3)), **skipped)
        checks.update(expected_num_seed_generators=grus)
        layers = _encoder(kind, 4).encoder_layers
        self.run_layer_test(ConditionalEncoder, {"layers": layers}, **checks)

    def test_journey(self, tmp_path):
        build = lambda premise, hypothesis: _encoder("dual_am_gru")([premise, hypothesis])[1]  # noqa: E731
        self.run_journey_test("pair", build, tmp_path)

    def test_config_and_output_spec(self):
        self.run_config_test(ConditionalEncoder, layers=_encoder("am_gru").encoder_layers, name="e")
        # The encoder's dtype policy, not its layers', sets its outputs' dtypes.
        make = lambda dtype: ConditionalEncoder(_encoder("gru", 4).encoder_layers, dtype=dtype)  # noqa: E731
        self.run_output_spec_test(make, [(2, 5, 4), (2, 3, 4)])

    @pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
    def test_mixed_float16_matches_float32(self, kind):
        premise, hypothesis = _pair(np.random.default_rng(3))
        self.run_mixed_precision_test(lambda: _encoder(kind), [premise, hypothesis], atol=5e-3)


def _pair(rng, batch=2, premise_length=5, hypothesis_length=3, dim=6):
    premise = rng.normal(size=(batch, premise_length, dim)).astype("float32")
    return premise, rng.normal(size=(batch, hypothesis_length, dim)).astype("float32")


def _built(kind, dim=6, **kwargs):
    encoder = _stack() if kind == "stack" else _encoder(kind, **kwargs)
    encoder.build([(None, None, dim), (None, None, dim)])
    return encoder


def _reference_retrievals(kind, encoder, premise, hypothesis):
    """`ConditionalEncoder.memory_retrievals` restated with `am_gru_reference`."""
    first = encoder.encoder_layers[0]  # the cells of its premise and hypothesis passes
    dual = isinstance(first, DualAssociativeEncoder)
    cell, hypothesis_cell = (first.premise_layer, first.hypothesis_layer) if dual else [first] * 2
    cell, hypothesis_cell = cell.cell, hypothesis_cell.cell
    names = ["key", "gate", "gate_bias", "candidate", "candidate_bias"]
    dual_key = hypothesis_cell.dual_key if kind == "dual_am_gru" else None
    if dual_key:
        names += ["dual_gate", "dual_candidate"] + ["dual_key"] * (dual_key == "released")

    def weight(name):
        owner = hypothesis_cell if name.startswith("dual") else cell
        return getattr(owner, name if name.endswith("bias") else f"{name}_kernel")

    w = {name: keras.ops.convert_to_numpy(weight(name)).astype(np.float64) for name in names}
    return conditional_encoding_retrievals(
        premise, hypothesis, w, cell.units, cell.num_copies, cell.seed, dual_key
    )


@pytest.mark.parametrize(
    "kind, dual_key", [("am_gru", "paper"), ("dual_am_gru", "paper"), ("dual_am_gru", "released")]
)
def test_memory_retrievals_match_the_reference(float64_policy, kind, dual_key):
    rng, options = np.random.default_rng(2), {"dual_key": dual_key} if kind == "dual_am_gru" else {}
    encoder = _built(kind, **options)
    randomize(encoder, rng, scale=0.8)
    premise, hypothesis = (x[0] for x in _pair(rng, batch=1))
    got = encoder.memory_retrievals(premise, hypothesis)
    want = _reference_retrievals(kind, encoder, premise, hypothesis)
    assert (got["premise_written"].shape, got["hypothesis_read"].shape) == ((5, 8), (3, 8))
    for name in ("premise_written", "hypothesis_read"):  # every step
        np.testing.assert_allclose(got[name], want[name], atol=1e-10, rtol=0, err_msg=name)
    assert (np.abs(want["hypothesis_read"]).max(axis=1) > 0.1).all()  # a real read at every step
    assert _built("gru").memory_retrievals(premise, hypothesis) == {}
    # Under a mixed policy the probe steps the cells outside `__call__`, in float32 (not 16).
    with dtype_policy("mixed_float16"):
        mixed = _built(kind, **options)
    mixed.set_weights(encoder.get_weights())
    assert mixed.compute_dtype == "float16" and mixed.variable_dtype == "float32"
    got = mixed.memory_retrievals(premise, hypothesis)
    for name in ("premise_written", "hypothesis_read"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=0, err_msg=name)


@keras.saving.register_keras_serializable(package="tf_memlayers_tests")
class PremiseInHypothesis(keras.layers.Layer):
    """A pair layer: the premise's mean added to each hypothesis step, through one Dense."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dense = keras.layers.Dense(units)
        self.supports_masking = True

    def build(self, input_shape):
        self.dense.build(input_shape[0])

    def call(self, inputs, mask=None):
        premise, hypothesis = inputs
        summary = keras.ops.mean(premise, axis=1, keepdims=True)
        return self.dense(premise), self.dense(hypothesis + summary)

    def compute_output_shape(self, input_shape):
        return tuple(tuple(s[:-1]) + (self.units,) for s in input_shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def _stack():
    """A stack the package knows nothing of: a pair layer, a bidirectional LSTM, a GRU."""
    lstm = keras.layers.LSTM(5, return_sequences=True, return_state=True)
    top = keras.layers.GRU(4, return_state=True)
    return ConditionalEncoder([PremiseInHypothesis(6), keras.layers.Bidirectional(lstm), top])


# (The Dual AM-GRU encoder's hand-over inside it: test_dual_associative_encoder.py.)
@pytest.mark.parametrize("kind", ["stack", *KINDS])
def test_each_layer_reads_the_hypothesis_from_the_premise_final_states(kind):
    rng = np.random.default_rng(6)
    premise, hypothesis = _pair(rng)
    encoder = _built(kind)
    randomize(encoder, rng, scale=0.8)
    p, h = encoder([premise, hypothesis])
    want_p, want_h = premise, hypothesis
    for layer in encoder.encoder_layers:  # by hand
        if isinstance(layer, (PremiseInHypothesis, DualAssociativeEncoder)):  # a pair layer
            want_p, want_h = layer([want_p, want_h])[:2]
        else:  # the hypothesis pass starts from the premise pass's final states
            want_p, *states = layer(want_p)
            want_h, *_ = layer(want_h, initial_state=states)
    shapes = [tuple(p.shape), tuple(h.shape)]
    assert encoder.compute_output_shape([premise.shape, hypothesis.shape]) == shapes
    assert shapes == [(2, 4 if kind == "stack" else 8)] * 2
    assert_close([p, h], [want_p, want_h], 1e-6, 1e-7)
    # Not vacuous: the hypothesis's encoding reads the premise's.
    assert np.abs(as_numpy(encoder([premise[::-1], hypothesis])[1]) - as_numpy(h)).max() > 1e-3
    if kind != "stack":  # the padding of both is ignored (the mean of "stack" reads it)
        padded = [np.pad(x, ((0, 0), (0, 2), (0, 0))) for x in (premise, hypothesis)]
        masks = [x.any(-1) for x in padded]
        assert_close(encoder(padded, mask=masks), (p, h), atol=1e-6, rtol=1e-7)


# Any Keras layer. (The AM-GRU stack's file: test_a_file_of_0_1_loads_into_the_stack_...; its
# config: test_config_and_output_spec; the Dual AM-GRU encoder's: test_dual_associative_encoder.py)
def test_save_clone_and_config_rebuild_the_stack(tmp_path):
    rng = np.random.default_rng(7)
    premise, hypothesis, encoder = keras.Input((None, 6)), keras.Input((None, 6)), _stack()
    model = keras.Model([premise, hypothesis], encoder([premise, hypothesis]))
    randomize(model, rng, scale=0.8)
    data = list(_pair(rng))
    want = [as_numpy(x) for x in model(data)]
    model.save(tmp_path / "encoder.keras")
    copies = {
        "loaded": keras.saving.load_model(tmp_path / "encoder.keras"),
        "cloned": keras.models.clone_model(model),
        "from_json": keras.models.model_from_json(model.to_json()),
    }
    types = [type(layer) for layer in encoder.encoder_layers]
    for name, copy in copies.items():
        assert len(copy.weights) == len(model.weights), name
        if name != "loaded":
            copy.set_weights(model.get_weights())
        for got, expected in zip(copy(data), want):
            np.testing.assert_allclose(as_numpy(got), expected, atol=1e-6, err_msg=name)
        assert [type(layer) for layer in copy.layers[-1].encoder_layers] == types, name


def test_a_stack_returning_sequences_passes_the_masks_on_and_a_gru_encoder_of_0_1_is_a_stack():
    encoder = ConditionalEncoder([keras.layers.GRU(4, return_sequences=True, return_state=True)])
    premise, hypothesis = _pair(np.random.default_rng(8))
    masks = [np.ones((2, 5), bool), np.ones((2, 3), bool)]
    masks[0][1, 3:] = False
    p, h = encoder([premise, hypothesis])
    assert tuple(p.shape) == (2, 5, 4) and tuple(h.shape) == (2, 3, 4)
    assert encoder.compute_mask([premise, hypothesis], masks) == masks
    assert _encoder("gru", 4).compute_mask([premise, hypothesis], masks) is None
    # A GRU encoder of 0.1 becomes a stack of two GRUs.
    with zipfile.ZipFile(FIXTURES / "snli_am_gru_v0.1.keras") as archive:
        layers = json.loads(archive.read("config.json"))["config"]["layers"]
    config = next(layer for layer in layers if layer["config"]["name"] == "encoder")
    config["config"].update(kind="gru", units=3, top_units=2)
    encoder = keras.layers.deserialize(config)
    first, top = encoder.encoder_layers
    assert type(first) is type(top) is keras.layers.GRU and (first.units, top.units) == (3, 2)
    p, h = encoder([np.ones((2, 5, 3), "float32"), np.ones((2, 3, 3), "float32")])
    assert tuple(p.shape) == tuple(h.shape) == (2, 2)
    config["config"]["kind"] = "lstm"
    with pytest.raises(ValueError, match="ConditionalEncoder: `kind` must be one of 'gru', "):
        keras.layers.deserialize(config)


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_a_file_of_0_1_loads_into_the_stack_of_its_layers_and_saves_as_one(kind, tmp_path):
    """0.1 and 0.2 saved a kind and sizes: they load as the stack, give the stored outputs."""
    saved = np.load(FIXTURES / "v0.1_outputs.npz")
    inputs = [saved[f"{kind}_premise"], saved[f"{kind}_hypothesis"]]
    want = saved[f"{kind}_probabilities"]
    model = keras.saving.load_model(FIXTURES / f"snli_{kind}_v0.1.keras")
    first, top = model.get_layer("encoder").encoder_layers
    cell = first.cell if kind == "am_gru" else first.hypothesis_layer.cell
    assert type(first) is {"am_gru": AssociativeGRU, "dual_am_gru": DualAssociativeEncoder}[kind]
    assert (cell.units, cell.num_copies, cell.seed, top.units) == (4, 2, 5, 4)
    np.testing.assert_allclose(model.predict(inputs, verbose=0), want, rtol=0, atol=1e-6)
    model.save(tmp_path / "again.keras")
    with zipfile.ZipFile(tmp_path / "again.keras") as archive:
        assert '"kind"' not in archive.read("config.json").decode()
    again = keras.saving.load_model(tmp_path / "again.keras")
    np.testing.assert_allclose(again.predict(inputs, verbose=0), want, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "layers, error, fragments",
    [
        ("gru", TypeError, ["`layers`", "non-empty list", "'gru'"]),
        ([], TypeError, ["`layers`", "non-empty list"]),
        ([np.tanh], TypeError, ["`layers[0]`", "Keras layer"]),
        ([keras.layers.GRU(4, name="g")], ValueError, ["`layers[0]`", "'g'", "return_state=True"]),
        (
            [keras.layers.GRU(**STATES, name="g"), keras.layers.GRU(**STATES)],
            ValueError,
            ["`layers[0]`", "'g'", "return_sequences=True"],
        ),
        ([keras.layers.Dense(3, name="d")], ValueError, ["`layers[0]`", "('d', a Dense) is not"]),
        ([APART], ValueError, ["Bidirectional layer `layers[0]`", "merge_mode=None"]),
    ],
    ids=["a string", "empty", "a function", "no state", "no sequences", "not of a pair", "apart"],
)
@pytest.mark.parametrize(
    "make", [ConditionalEncoder, lambda x: ConditionalEncoder.from_config({"layers": x})]
)
def test_bad_layers_are_named(layers, error, fragments, make):
    raised = pytest.raises(error, lambda: make(layers)([np.ones((2, 5, 4))] * 2))
    for fragment in fragments:
        assert fragment in str(raised.value)
