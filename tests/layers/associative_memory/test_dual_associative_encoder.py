"""`DualAssociativeEncoder` against `am_gru_reference` and its passes in `keras.layers.RNN`."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.am_gru_reference import permutations, random_weights, reference_run
from tests.layer_test_case import LayerTestCase, dtype_policy, masking_checks
from tests.layers.associative_memory.test_associative_gru_cell import (
    AM_GRU_CONFIG,
    set_cell_weights,
)
from tests.layers.associative_memory.test_dual_associative_gru import KEYS_AND_LOOPS
from tests.pair_encoders import pair_encoder
from tests.support import (
    BACKEND,
    FUSED_LOOP,
    as_numpy,
    assert_close,
    gradients,
    split_rows,
    tensorflow_only,
)
from tf_memlayers.layers import DualAssociativeEncoder, DualAssociativeGRUCell

UNITS, COPIES, INPUT_DIM, BATCH, PREMISE_STEPS, HYPOTHESIS_STEPS = 8, 3, 5, 3, 6, 4
WIDTH_4, WIDTH_5 = np.ones((2, 3, 4), "float32"), np.ones((2, 3, 5), "float32")
# Right-padded rows: each row's number of real steps.
LENGTHS = PREMISE_LENGTHS, HYPOTHESIS_LENGTHS = (6, 4, 5), (4, 2, 3)
# The fused loop where the backend has it (TensorFlow), else Keras's.
FUSED_IF_AVAILABLE, SEQUENCES = BACKEND == "tensorflow", dict(return_sequences=True)
# Every output, zeros at padded steps.
ALL_OUTPUTS = dict(return_sequences=True, return_state=True, zero_output_for_mask=True)


class DualAssociativeEncoderTest(LayerTestCase):
    layer_cls = DualAssociativeEncoder

    # (The paper's key on Keras's loop: DualAssociativeGRUTest's, the encoder's second pass.)
    @pytest.mark.parametrize("dual_key, fused_loop", KEYS_AND_LOOPS[1:])
    def test_layer_behaviors(self, dual_key, fused_loop):
        shapes = ((2, 3, 4), (2, 2, 4))
        checks = masking_checks(shapes, 5 + 2 + (dual_key == "released"), shapes)
        options = dict(num_copies=2, dual_key=dual_key, fused_loop=fused_loop, **SEQUENCES)
        self.run_layer_test(DualAssociativeEncoder, dict(units=4, **options), **checks)

    def test_journey(self, tmp_path):
        # The paper's key (on TensorFlow the fused loop): ConditionalEncoderTest's journey.
        def build(premise, hypothesis):
            encoder = DualAssociativeEncoder(8, num_copies=2, dual_key="released", dropout=0.2)
            return encoder([premise, hypothesis])[1]

        self.run_journey_test("pair", build, tmp_path)

    def test_config_and_arguments(self):
        flags = dict.fromkeys(["return_state", "unroll", "zero_output_for_mask"], True)
        config = dict(**AM_GRU_CONFIG, **SEQUENCES, **flags, dual_key="released", fused_loop=False)
        self.run_config_test(DualAssociativeEncoder, **config, name="pair", dropout_seed=5)
        premise = DualAssociativeEncoder(4, recurrent_dropout=0.3, dropout_seed=5).premise_layer
        assert (premise.recurrent_dropout, premise.dropout_seed) == (0.3, 6)  # the next seed
        self.run_flags_test(lambda **kw: DualAssociativeEncoder(4, num_copies=2, **kw))

    @pytest.mark.parametrize(
        "kwargs",
        [
            dict(num_copies=2, return_sequences=True, return_state=True),
            pytest.param(dict(num_copies=3, fused_loop=True), marks=tensorflow_only(FUSED_LOOP)),
        ],
        ids=["states", "fused_last"],
    )
    def test_output_spec(self, kwargs):
        make = lambda dtype: DualAssociativeEncoder(4, dtype=dtype, **kwargs)  # noqa: E731
        self.run_output_spec_test(make, [(2, 5, 4), (2, 3, 4)])


def _masks():
    shapes = ((PREMISE_STEPS, PREMISE_LENGTHS), (HYPOTHESIS_STEPS, HYPOTHESIS_LENGTHS))
    return [np.arange(steps) < np.array(lengths)[:, None] for steps, lengths in shapes]


def _inputs(rng, dtype="float64"):
    steps = (PREMISE_STEPS, HYPOTHESIS_STEPS)
    return [rng.normal(size=(BATCH, s, INPUT_DIM)).astype(dtype) for s in steps]


def _encoder(dual_key="paper", fused_loop=False, **kwargs):
    options = dict(num_copies=COPIES, dual_key=dual_key, fused_loop=fused_loop)
    encoder = DualAssociativeEncoder(UNITS, **options, **kwargs)
    encoder.build([(None, None, INPUT_DIM), (None, None, INPUT_DIM)])
    return encoder


@pytest.mark.parametrize(
    "dual_key, fused_loop, dtype, atol",
    [
        *(
            pytest.param(*c.values, "float64", 1e-10, id=c.id, marks=c.marks)
            for c in KEYS_AND_LOOPS
        ),
        pytest.param("paper", FUSED_IF_AVAILABLE, "float32", 1e-5, id="float32"),
    ],
)
def test_encoder_matches_the_reference(dual_key, fused_loop, dtype, atol):
    """Each row against the reference over its real steps; NaN at padded steps of both
    sentences reaches no output or (in float32) gradient, and float32 outputs zeros there."""
    rng = np.random.default_rng(20)
    with dtype_policy(dtype):
        options = dict(ALL_OUTPUTS, zero_output_for_mask=dtype == "float32")
        encoder = _encoder(dual_key, fused_loop, **options)
    w = random_weights(rng, INPUT_DIM, UNITS)
    set_cell_weights(encoder.hypothesis_layer.cell, w)
    premise, hypothesis = _inputs(rng)
    mask = _masks()
    premise[~mask[0]], hypothesis[~mask[1]] = np.nan, np.nan
    inputs = [premise.astype(dtype), hypothesis.astype(dtype)]
    got = [as_numpy(t) for t in encoder(inputs, mask=mask)]
    premise_outputs, hypothesis_outputs, premise_memory, premise_last, memory, last = got
    assert all(np.isfinite(t).all() for t in got)
    if dtype == "float32":  # (one case: the fused loop where the backend has it)
        assert not got[0][~mask[0]].any() and not got[1][~mask[1]].any()
        loss = lambda: _loss(encoder(inputs, mask=mask))  # noqa: E731
        assert all(np.isfinite(g).all() for g in gradients(loss, encoder.trainable_weights)[1])
    perms = permutations(UNITS // 2, COPIES)
    empty, zeros = np.zeros((1, UNITS * COPIES)), np.zeros((1, UNITS))
    for row, (premise_length, hypothesis_length) in enumerate(zip(*LENGTHS)):
        # Each row on its own, without its padding, as the paper's equations read it.
        premise_words = premise[row : row + 1, :premise_length]
        ref_premise, ref_source = reference_run(premise_words, empty, zeros, w, perms)
        words, dual = hypothesis[row : row + 1, :hypothesis_length], (dual_key, ref_source)
        ref_hypothesis, ref_memory = reference_run(words, empty, ref_premise[:, -1], w, perms, dual)
        for name, value, expected in (
            ("premise outputs", premise_outputs[row, :premise_length], ref_premise[0]),
            ("premise memory", premise_memory[row], ref_source[0]),
            ("premise last output", premise_last[row], ref_premise[0, -1]),
            ("hypothesis outputs", hypothesis_outputs[row, :hypothesis_length], ref_hypothesis[0]),
            ("hypothesis memory", memory[row], ref_memory[0]),
            ("hypothesis last output", last[row], ref_hypothesis[0, -1]),
        ):
            np.testing.assert_allclose(value, expected, atol=atol, rtol=0, err_msg=name)
    # Not vacuous: the hypothesis read something from the premise memory.
    assert np.abs(premise_memory).max() > 0.1


def _cell_form(encoder):
    """The encoder's two passes as `keras.layers.RNN` over a Dual cell with its weights."""
    dual_key, seed = (encoder.get_config()[name] for name in ("dual_key", "seed"))
    cell = DualAssociativeGRUCell(UNITS, num_copies=COPIES, dual_key=dual_key, seed=seed)
    cell.build((None, INPUT_DIM))
    cell.set_weights(encoder.hypothesis_layer.cell.get_weights())
    premise_rnn = keras.layers.RNN(cell.premise_cell, **ALL_OUTPUTS)
    hypothesis_rnn = keras.layers.RNN(cell, **ALL_OUTPUTS)

    def run(premise, hypothesis, mask):
        premise_outputs, memory, last = premise_rnn(premise, mask=mask[0])
        initial = [memory * 0.0, last, memory]
        outputs, *states = hypothesis_rnn(hypothesis, initial_state=initial, mask=mask[1])
        return [premise_outputs, outputs, memory, last, *states[:2]]

    return cell, run


def _loss(outputs):
    return sum(ops.sum(ops.sin(3.0 * t)) for t in outputs)


@pytest.mark.parametrize("dual_key, fused_loop", split_rows(KEYS_AND_LOOPS))
def test_encoder_equals_its_cell_form_forward_and_gradients(float64_policy, dual_key, fused_loop):
    rng, encoder = np.random.default_rng(22), _encoder(dual_key, fused_loop, **ALL_OUTPUTS)
    encoder.set_weights([rng.normal(scale=0.5, size=w.shape) for w in encoder.weights])
    cell, run_cells = _cell_form(encoder)
    inputs, mask = _inputs(rng), _masks()
    by_encoder = lambda p, h: _loss(encoder([p, h], mask=mask))  # noqa: E731
    by_cells = lambda p, h: _loss(run_cells(p, h, mask))  # noqa: E731
    got = gradients(by_encoder, encoder.trainable_weights, inputs)
    by_name = {w.name: w for w in cell.trainable_weights}
    expected = gradients(by_cells, [by_name[w.name] for w in encoder.trainable_weights], inputs)
    np.testing.assert_allclose(got[0], expected[0], atol=1e-10, rtol=0)
    # One gradient per weight, in order: both passes reach the shared AM-GRU weights.
    assert len(got[1]) == 5 + 2 + (dual_key == "released")
    assert all(np.abs(e).max() > 0 for e in expected[1] + expected[2])
    assert_close(got[1] + got[2], expected[1] + expected[2], atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("fused_loop", [False, True] if FUSED_IF_AVAILABLE else [False])
def test_keras_file_clone_and_config_keep_one_shared_set_of_weights(tmp_path, fused_loop):
    rng = np.random.default_rng(24)
    premise, hypothesis = keras.Input((None, INPUT_DIM)), keras.Input((None, INPUT_DIM))
    dual_key = "paper" if fused_loop else "released"
    encoder = DualAssociativeEncoder(
        UNITS, num_copies=COPIES, dual_key=dual_key, fused_loop=fused_loop, name="encoder"
    )
    model = keras.Model([premise, hypothesis], encoder([premise, hypothesis]))
    model.set_weights([rng.normal(scale=0.4, size=w.shape) for w in model.weights])
    xs = _inputs(rng, "float32")
    expected = [as_numpy(t) for t in model(xs)]
    model.save(tmp_path / "model.keras")

    def check(copy, same_weights):
        layer = copy.get_layer("encoder")
        assert layer.premise_layer.cell is layer.hypothesis_layer.cell.premise_cell
        assert len({id(w) for w in copy.weights}) == len(model.weights)
        if not same_weights:
            copy.set_weights(model.get_weights())
        assert_close(copy(xs), expected, atol=1e-6)
        # Moving the one AM-GRU weight set moves both outputs.
        kernel = layer.premise_layer.cell.key_kernel
        kernel.assign_add(np.ones_like(as_numpy(kernel)))
        for got, want in zip(copy(xs), expected):
            assert np.abs(as_numpy(got) - want).max() > 1e-3

    clone = keras.models.clone_model(model)
    assert not {id(w) for w in clone.weights} & {id(w) for w in model.weights}
    check(keras.models.load_model(tmp_path / "model.keras"), same_weights=True)
    check(clone, same_weights=False)
    check(keras.models.model_from_json(model.to_json()), same_weights=False)


def test_masks_pass_on_with_the_sequences():
    encoder = _encoder(return_sequences=True)
    mask = [keras.ops.convert_to_tensor(m) for m in _masks()]
    masks = encoder.compute_mask(None, mask)
    assert masks[0] is mask[0] and masks[1] is mask[1]
    assert _encoder().compute_mask(None, mask) == [None, None]
    assert _encoder(return_state=True).compute_mask(None, mask) == [None] * 6
    assert _encoder().compute_mask(None, None) is None


@pytest.mark.parametrize("kind", [None, "gru", "dual_am_gru"])
def test_bad_inputs_are_named_errors(kind):
    for inputs, mask, fragment in [
        (WIDTH_4[0], None, r"`inputs` must be .* one tensor of shape \(3, 4\)"),
        ([WIDTH_4] * 2, np.ones((2, 3), bool), r"`mask` must be .* one tensor of shape \(2, 3\)"),
        ([WIDTH_4, WIDTH_5], None, r"`hypothesis` must have width 4 \(the premise's\)"),
        ([WIDTH_4[0], WIDTH_4], None, "`premise` must have rank 3"),
        ([WIDTH_4, WIDTH_4[:1]], None, "`hypothesis` of shape .* batch size 1, but `premise`"),
        ([WIDTH_4] * 2, [np.ones((2, 2), bool)] * 2, "`mask` .* `premise`"),
    ]:
        layer = pair_encoder(kind, 4, num_copies=2) if kind else DualAssociativeEncoder(4, 2)
        with pytest.raises(ValueError, match=f"{type(layer).__name__}: .*{fragment}"):
            layer(inputs, mask=mask)
    layer([WIDTH_4] * 2)  # then a call of another width: Keras's check of the layer's spec
    with pytest.raises(ValueError, match=f"'{layer.name}' is incompatible .* value 4"):
        layer([WIDTH_5] * 2)
