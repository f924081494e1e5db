"""The auto-encoders (decoding through the step model gives the teacher-forced model's logits)
and the memory probes of the paper's Figure 3, against the layers themselves."""

import keras
import numpy as np
import pytest

from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell

from . import probes
from .models import MODELS, build_autoencoder


def _autoencoder(kind, seed=3):
    autoencoder = build_autoencoder(kind, 30, units=8, embedding_dim=6, num_copies=2)
    rng = np.random.default_rng(seed)
    # Weights far from their initial scale, so that every layer shows in the logits.
    autoencoder.model.set_weights(
        [rng.uniform(-0.7, 0.7, np.shape(w)) for w in autoencoder.model.get_weights()]
    )
    return autoencoder


def _batch():
    rng = np.random.default_rng(0)
    source = rng.integers(4, 30, (3, 6)).astype("int32")
    source[1, 4:] = 0
    source[2, 2:] = 0
    decoder_input = np.zeros((3, 7), "int32")
    for row, length in enumerate((source > 0).sum(1)):
        decoder_input[row, : length + 1] = [2, *source[row, :length]]
    return source, decoder_input


@pytest.mark.parametrize("kind", MODELS)
def test_decoding_through_the_step_model_gives_the_teacher_forced_logits(kind):
    autoencoder = _autoencoder(kind)
    source, decoder_input = _batch()
    expected = keras.ops.convert_to_numpy(autoencoder.model([source, decoder_input]))
    state = autoencoder.encoder_model.predict_on_batch(source)
    state = list(state) if isinstance(state, (list, tuple)) else [state]
    stepped = []
    for t in range(decoder_input.shape[1]):
        logits, *state = autoencoder.step_model.predict_on_batch(
            [decoder_input[:, t : t + 1], *state]
        )
        stepped.append(logits)
    words = decoder_input > 0
    np.testing.assert_allclose(np.concatenate(stepped, 1)[words], expected[words], atol=1e-5)
    # Not vacuous: the source reaches the decoder.
    other = autoencoder.model([np.where(source > 0, 5, 0).astype("int32"), decoder_input])
    assert np.abs(keras.ops.convert_to_numpy(other) - expected)[words].max() > 1e-2


@pytest.mark.parametrize("kind", MODELS)
def test_greedy_decoding_follows_the_most_likely_word_and_stops_at_the_end(kind):
    autoencoder = _autoencoder(kind)
    source, _ = _batch()
    eos = int(np.argmax(autoencoder.model([source[:1], np.array([[2]], "int32")])[0, 0]))
    decoded = autoencoder.decode(source, 5, bos_id=2, eos_id=eos)
    assert decoded.shape == (3, 5)
    for row in range(3):
        text = np.array([[2]], "int32")
        for position in range(5):
            logits = autoencoder.model([source[row : row + 1], text])
            word = int(np.argmax(logits[0, -1]))
            assert decoded[row, position] == word
            if word == eos:  # nothing after the end
                assert not decoded[row, position + 1 :].any()
                break
            text = np.concatenate([text, [[word]]], axis=1).astype("int32")


def test_an_unknown_model_is_named():
    with pytest.raises(ValueError, match="`kind` must be one of .*; got 'lstm'"):
        build_autoencoder("lstm", 30)


def test_the_dual_am_gru_probe_reads_what_the_layers_compute():
    autoencoder = _autoencoder("dual_am_gru")
    source, decoder_input = _batch()
    one_source, one_input = source[1, :4], decoder_input[1, :5]
    probe = autoencoder.memory_probe(one_source, one_input)
    layer = autoencoder.model.get_layer
    encoder, decoder = layer("encoder"), layer("decoder")
    # The same cells with return_retrievals, in Keras's loop.
    encoder_cell = AssociativeGRUCell(8, num_copies=2, return_retrievals=True)
    decoder_cell = DualAssociativeGRUCell(
        8, num_copies=2, dual_key="released", return_retrievals=True
    )
    embedded_source = layer("source_embedding")(one_source[None])
    embedded_target = layer("target_embedding")(one_input[None])
    encoding = keras.layers.RNN(encoder_cell, return_sequences=True, return_state=True)
    encoding.build(embedded_source.shape)
    encoder_cell.set_weights(encoder.cell.get_weights())
    pieces, memory, last = encoding(embedded_source)
    decoding = keras.layers.RNN(decoder_cell, return_sequences=True)
    decoding.build(embedded_target.shape)
    decoder_cell.set_weights(decoder.cell.get_weights())
    read = decoding(embedded_target, initial_state=[memory * 0.0, last, memory])
    np.testing.assert_allclose(probe["written"], pieces[0, :, 8:16], atol=1e-6)
    np.testing.assert_allclose(probe["read"], read[0, :, 24:], atol=1e-6)
    assert probe["keys"].shape == (4, 8)
    assert np.abs(probe["read"]).max() > 1e-2
    matrix = probes.heatmap_matrix("dual_am_gru", probe)
    assert matrix.shape == (5, 4) and np.abs(matrix).max() <= 1 + 1e-9


def test_the_attention_probe_gives_each_step_a_distribution_over_the_source():
    autoencoder = _autoencoder("attention")
    source, decoder_input = _batch()
    alignments = autoencoder.memory_probe(source[0], decoder_input[0])["alignments"]
    assert alignments.shape == (7, 6)
    np.testing.assert_allclose(alignments.sum(1), 1.0, atol=1e-6)
    other = autoencoder.memory_probe(source[0][::-1], decoder_input[0])["alignments"]
    assert np.abs(other - alignments).max() > 1e-3
    shorter = autoencoder.memory_probe(source[1, :4], decoder_input[1, :5])["alignments"]
    assert shorter.shape == (5, 4)
    assert _autoencoder("gru").memory_probe(source[0], decoder_input[0]) == {}


def test_the_probe_statistics():
    keys = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    assert probes.key_similarity(keys) == pytest.approx(1 / 3)  # pairs (1, 2): 1; the rest 0
    assert np.isnan(probes.key_similarity(keys[:1]))
    diagonal = np.eye(4)[:, :3] + 0.1  # 4 decoder steps over 3 words: the last predicts <eos>
    assert probes.position_shares(diagonal) == (1.0, pytest.approx(1 / 3))
    last = np.zeros((4, 3))
    last[:, 2] = 1.0
    assert probes.position_shares(last) == (pytest.approx(1 / 3), 1.0)
    # One-word sentences have no two keys to compare.
    statistics = probes.probe_statistics(
        _autoencoder("dual_am_gru"), [(np.array([5]), np.array([2, 5]))]
    )
    assert statistics["key_similarity"] is None and statistics["read_aligned"] == 1.0


@pytest.mark.parametrize("kind", MODELS)
def test_the_padding_changes_no_logit(kind):
    """A sentence padded in a batch is read as it is alone: the encoder skips its padding, the
    attention leaves it out, and the padded decoder steps are masked out of the loss."""
    autoencoder = _autoencoder(kind)
    source, decoder_input = _batch()
    batched = keras.ops.convert_to_numpy(autoencoder.model([source, decoder_input]))
    for row in (1, 2):
        length = int((source[row] > 0).sum())
        alone = autoencoder.model(
            [source[row : row + 1, :length], decoder_input[row : row + 1, : length + 1]]
        )
        np.testing.assert_allclose(batched[row, : length + 1], alone[0], atol=1e-5)
    # The loss and accuracy of the padded steps: none, whatever the target holds there.
    model = autoencoder.model
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    target = np.concatenate([decoder_input[:, 1:], np.zeros((3, 1), "int32")], 1)
    target[np.arange(3), (source > 0).sum(1)] = 3  # <eos>
    other = np.where(decoder_input > 0, target, 7).astype("int32")  # a word on the padding
    scores = [
        model.evaluate([source, decoder_input], t, verbose=0, return_dict=True)
        for t in (target, other)
    ]
    assert scores[0] == pytest.approx(scores[1], rel=1e-6)
