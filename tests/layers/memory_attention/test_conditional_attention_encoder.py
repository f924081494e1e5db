"""`ConditionalAttentionEncoder` against a float64 NumPy reference."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase, masking_checks
from tests.memory_attention_reference import randomize, word_by_word_reference, wrapper_weights
from tests.support import as_numpy, assert_close
from tf_memlayers import ConditionalAttentionEncoder, ConditionalEncoder
from tf_memlayers.layers import (
    AttentionMechanism,
    AttentionRNN,
    AttentionWrapper,
    WordByWordAttention,
)

# A premise layer's flags: the encoder reads its sequence and its final states.
BOTH = dict(return_sequences=True, return_state=True)


def _encoder(units=5, dtype=None, **hypothesis_flags):
    premise = keras.layers.SimpleRNN(units, **BOTH, dtype=dtype)
    cell = WordByWordAttention(keras.layers.SimpleRNNCell(units, dtype=dtype), dtype=dtype)
    hypothesis = AttentionRNN(cell, dtype=dtype, **hypothesis_flags)
    return ConditionalAttentionEncoder(premise, hypothesis, dtype=dtype)


class ConditionalAttentionEncoderTest(LayerTestCase):
    # Its layers compute under their own policies: mixed precision is tested apart.
    layer_cls = ConditionalAttentionEncoder

    @pytest.mark.parametrize(
        "make_cell, weights",
        [
            (lambda: WordByWordAttention(keras.layers.LSTMCell(4)), 3 + 3 + 5),
            (lambda: AttentionWrapper(keras.layers.LSTMCell(4), score="general"), 3 + 3 + 2),
        ],
        ids=["word_by_word", "luong"],
    )
    def test_layer_behaviors(self, make_cell, weights):
        lstm, hypothesis = keras.layers.LSTM(4, **BOTH), AttentionRNN(make_cell())
        layers = dict(premise_layer=lstm, hypothesis_layer=hypothesis)
        checks = masking_checks([(2, 4), (2, 4)], weights, ((2, 5, 3), (2, 4, 3)))
        checks.update(run_training_check=False, run_mixed_precision_check=False)
        checks["expected_num_seed_generators"] = 2  # the LSTM cells' dropout
        self.run_layer_test(ConditionalAttentionEncoder, layers, **checks)

    def test_journey(self, tmp_path):
        build = lambda premise, hypothesis: _encoder(6)([premise, hypothesis])[1]  # noqa: E731
        self.run_journey_test("pair", build, tmp_path)

    def test_config_and_output_spec(self):
        hypothesis = AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(4)))
        layers = dict(premise_layer=keras.layers.LSTM(4, **BOTH), hypothesis_layer=hypothesis)
        self.run_config_test(ConditionalAttentionEncoder, **layers, name="pair")
        # The encoder's dtype policy, not its layers', sets its outputs' dtypes.
        parts = lambda e: (e.premise_layer, e.hypothesis_layer)  # noqa: E731
        make = lambda dtype: ConditionalAttentionEncoder(*parts(_encoder(4)), dtype=dtype)  # noqa: E731
        self.run_output_spec_test(make, [(2, 5, 4), (2, 3, 4)])

    def test_mixed_float16_matches_float32(self):
        premise, hypothesis, *masks = _pair(np.random.default_rng(6), "float32")
        self.run_mixed_precision_test(_encoder, [premise, hypothesis], atol=5e-3, mask=masks)


def _pair(rng, dtype="float64"):
    premise = rng.normal(size=(3, 6, 4)).astype(dtype)
    hypothesis, premise_mask = rng.normal(size=(3, 4, 4)).astype(dtype), np.ones((3, 6), bool)
    premise_mask[1, 4:] = premise_mask[2, 2:] = False
    hypothesis_mask = np.ones((3, 4), bool)
    hypothesis_mask[0, 3:] = False
    return premise, hypothesis, premise_mask, hypothesis_mask


def _reference(
    encoder, premise, hypothesis, premise_mask, hypothesis_mask, sequences=False, weights=False
):
    """The premise's SimpleRNN pass in NumPy (its final h carried through the padding), then
    the word-by-word attention from that h over its outputs; with ``weights``, the attention's
    weights ``[batch, Th, Tp]`` instead."""
    kernel, recurrent, bias = (w.astype(float) for w in encoder.premise_layer.cell.get_weights())
    h, outputs = np.zeros((premise.shape[0], recurrent.shape[0])), []
    for t in range(premise.shape[1]):
        keep = premise_mask[:, t][:, None]
        h = np.where(keep, np.tanh(premise[:, t] @ kernel + h @ recurrent + bias), h)
        outputs.append(h)
    memory = np.stack(outputs, 1)
    cell_weights, own = wrapper_weights(encoder.hypothesis_layer)
    got, alphas = word_by_word_reference(
        hypothesis, memory, premise_mask, cell_weights, own, True, hypothesis_mask, h
    )
    return alphas if weights else (h, got if sequences else got[:, -1])


# A premise loop that emits zeros at the padding (as cuDNN's does on a GPU) or not.
@pytest.mark.parametrize("return_sequences, zeros_at_padding", [(False, True), (True, False)])
def test_matches_the_reference_with_padding_in_both_sentences(return_sequences, zeros_at_padding):
    rng = np.random.default_rng(0)
    premise, hypothesis, premise_mask, hypothesis_mask = _pair(rng)
    encoder = _encoder(dtype="float64", return_sequences=return_sequences)
    encoder.premise_layer.zero_output_for_mask = zeros_at_padding
    encoder.build([premise.shape, hypothesis.shape])
    randomize(encoder, rng)
    noisy = np.where(premise_mask[..., None], premise, np.nan)  # the padding is never read
    p, h = encoder([noisy, hypothesis], mask=[premise_mask, hypothesis_mask])
    masks = (premise_mask, hypothesis_mask)
    want_p, want_h = _reference(encoder, premise, hypothesis, *masks, return_sequences)
    assert_close([p, h], [want_p, want_h], 1e-10)
    # Row 2 alone, without its padding, gives the same pair.
    p, h = encoder([premise[2:, :2], hypothesis[2:]])
    assert_close([p, h], [want_p[2:], want_h[2:]], 1e-10)
    # Not vacuous: the premise's final state and its padding both matter.
    _, from_zeros = _reference(encoder, premise * 0.0, hypothesis, *masks, return_sequences)
    assert np.abs(from_zeros - want_h).max() > 1e-2
    unmasked = (np.ones_like(premise_mask), hypothesis_mask)
    _, unmasked = _reference(encoder, premise, hypothesis, *unmasked, return_sequences)
    assert np.abs(unmasked - want_h).max() > 1e-2


def test_premise_attention_of_one_pair_is_the_references_weights():
    rng = np.random.default_rng(3)
    premise, hypothesis, _, _ = _pair(rng)
    encoder = _encoder(dtype="float64")
    encoder.build([premise.shape, hypothesis.shape])
    randomize(encoder, rng)
    full = np.ones(premise.shape[:2], bool), np.ones(hypothesis.shape[:2], bool)
    want = _reference(encoder, premise, hypothesis, *full, weights=True)
    for row in range(len(premise)):
        got = encoder.premise_attention(premise[row], hypothesis[row])
        assert got.dtype == np.float64 and got.shape == want[row].shape
        np.testing.assert_allclose(got, want[row], rtol=0, atol=1e-10)
    # Through the pair encoder of a model; a first layer that does not attend has none.
    stack = ConditionalEncoder([encoder])
    assert_close(stack.premise_attention(premise[0], hypothesis[0]), want[0], atol=1e-10)
    gru = keras.layers.GRU(4, return_sequences=True, return_state=True)
    assert ConditionalEncoder([gru]).premise_attention(premise[0], hypothesis[0]) is None
    # One pair: a batch, or a sentence without a word, is named.
    with pytest.raises(ValueError, match=r"premise_attention: `premise` must be one embedded"):
        encoder.premise_attention(premise, hypothesis[0])
    with pytest.raises(ValueError, match=r"`hypothesis` must be .* got shape \(0, 4\)"):
        encoder.premise_attention(premise[0], hypothesis[0, :0])
    with pytest.raises(ValueError, match="incompatible with the layer: .* value 4"):  # a later call
        encoder([np.ones((3, 6, 5)), hypothesis])


def test_any_attention_wrapper_fits_and_the_stack_saves_loads_and_clones(tmp_path):
    rng = np.random.default_rng(2)
    premise, hypothesis, premise_mask, hypothesis_mask = _pair(rng, "float32")
    # Luong's attention, its fed-back state one more than the LSTM's two, its weights left out.
    scored = dict(score="general", return_attention_scores=True)
    luong = AttentionRNN(AttentionWrapper(keras.layers.LSTMCell(6), **scored))
    pair = ConditionalAttentionEncoder(keras.layers.LSTM(6, **BOTH), luong)
    inputs = [keras.Input(premise.shape[1:]), keras.Input((None, 4))]  # weights over Tp
    p, h = ConditionalEncoder([pair])(inputs)
    model = keras.Model(inputs, keras.layers.Concatenate()([p, h]))
    randomize(model, rng)
    expected = as_numpy(model([premise, hypothesis]))
    assert expected.shape == (3, 12) and tuple(model.output.shape) == (None, 12)
    path = tmp_path / "pair.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(as_numpy(loaded([premise, hypothesis])), expected, atol=1e-6)
    clone = keras.models.clone_model(model)
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(as_numpy(clone([premise, hypothesis])), expected, atol=1e-6)
    first = loaded.layers[2].encoder_layers[0]
    assert isinstance(first, ConditionalAttentionEncoder)
    assert first.hypothesis_layer.cell.score == "general"


def test_bad_layers_are_named():
    lstm = keras.layers.LSTM(4, **BOTH)
    attention = AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(4)), name="lstm_attention")
    with pytest.raises(TypeError, match="`premise_layer` must be a keras.layers.RNN"):
        ConditionalAttentionEncoder.from_config(dict(premise_layer=3, hypothesis_layer=attention))
    with pytest.raises(TypeError, match="`hypothesis_layer` must be an AttentionRNN"):
        ConditionalAttentionEncoder(lstm, keras.layers.LSTM(4))
    with pytest.raises(ValueError, match="return_sequences=True and return_state=True"):
        ConditionalAttentionEncoder(keras.layers.LSTM(4, return_state=True), attention)
    mechanisms = [AttentionMechanism(), AttentionMechanism()]
    several = AttentionWrapper(keras.layers.LSTMCell(4), mechanisms=mechanisms)
    with pytest.raises(ValueError, match="attends over one memory.*has 2 `mechanisms`"):
        ConditionalAttentionEncoder(lstm, AttentionRNN(several))
    with pytest.raises(ValueError, match="go_backwards=True"):
        ConditionalAttentionEncoder(keras.layers.LSTM(4, **BOTH, go_backwards=True), attention)
    narrow = ConditionalAttentionEncoder(keras.layers.LSTM(3, **BOTH, name="narrow"), attention)
    with pytest.raises(ValueError, match="^ConditionalAttention.*'narrow' outputs vectors 3 wide"):
        ConditionalEncoder([narrow]).build([(None, None, 2), (None, None, 2)])  # its own error
    with pytest.raises(ValueError, match="ConditionalAttentionEncoder: `mask` must be a list"):
        _encoder()([np.ones((2, 3, 5), "float32")] * 2, mask=np.ones((2, 3), bool))
    gru = ConditionalAttentionEncoder(keras.layers.GRU(4, **BOTH, name="gru"), attention)
    sizes = r"'gru' has states of sizes \[4\].*'lstm_attention' states of sizes \[4, 4\]"
    pytest.raises(ValueError, gru.build, [(None, None, 2), (None, None, 2)]).match(sizes)
