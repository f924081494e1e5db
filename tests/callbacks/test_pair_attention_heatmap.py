"""What `PairAttentionHeatmap` writes to TensorBoard each epoch, or does not write."""

import keras
import numpy as np
import tensorflow as tf

from tests.support import summary_events, summary_table, summary_text, tensorflow_only
from tf_memlayers.callbacks import PairAttentionHeatmap
from tf_memlayers.layers import (
    AttentionRNN,
    ConditionalAttentionEncoder,
    ConditionalEncoder,
    WordByWordAttention,
)
from tf_memlayers.models import build_snli_model

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")

VOCABULARY = ["<pad>", "<unk>", "a", "dog", "runs", "sleeps"]
PREMISE, HYPOTHESIS = ["a", "dog", "runs", "fast"], ["a", "dog", "sleeps"]


def _word_by_word_model():
    encoder = ConditionalEncoder(
        [
            ConditionalAttentionEncoder(
                keras.layers.LSTM(4, return_sequences=True, return_state=True),
                AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(4))),
            )
        ]
    )
    return build_snli_model(len(VOCABULARY), encoder=encoder, embedding_dim=3)


def test_every_epoch_writes_the_weights_and_the_pair_at_its_step(tmp_path):
    model = _word_by_word_model()
    heatmap = PairAttentionHeatmap(tmp_path, PREMISE, HYPOTHESIS, VOCABULARY)
    heatmap.set_model(model)
    heatmap.on_epoch_end(0)
    first = heatmap.last_matrix
    # The encoder's weights of the embedded probe ("fast" is unknown: <unk>'s vector).
    embedding = model.get_layer("embedding")
    vectors = np.asarray(embedding.embeddings)
    np.testing.assert_array_equal(heatmap.premise_ids, [[2, 3, 4, 1]])
    want = model.get_layer("encoder").premise_attention(vectors[[2, 3, 4, 1]], vectors[[2, 3, 5]])
    np.testing.assert_allclose(first, want, rtol=1e-6)
    assert first.shape == (3, 4)
    np.testing.assert_allclose(first.sum(axis=-1), 1.0, rtol=1e-6)
    # New weights between the epochs: the second epoch's matrix is that of the new weights.
    embedding.embeddings.assign(np.random.default_rng(1).normal(size=(6, 3)))
    heatmap.on_epoch_end(3)
    assert not np.allclose(heatmap.last_matrix, first)
    np.testing.assert_array_equal(heatmap.last_matrix, heatmap.attention())
    events = summary_events(tmp_path / "attention")
    for tag in ("attention/alignment", "attention/alignment/table", "attention/sentence"):
        assert [step for step, _ in events[tag]] == [0, 3], tag
    assert summary_text(events["attention/sentence"][-1][1]) == (
        "premise: a dog runs fast\n\nhypothesis: a dog sleeps"
    )
    rows, columns, written = summary_table(events["attention/alignment/table"][-1][1])
    assert columns == PREMISE and rows == HYPOTHESIS  # premise words label the columns
    np.testing.assert_allclose(written, heatmap.last_matrix, atol=5e-4 + 1e-9)
    image = tf.make_ndarray(events["attention/alignment"][-1][1].tensor)
    assert tf.io.decode_png(image[2]).numpy().ndim == 3


def test_an_encoder_without_attention_writes_nothing(tmp_path):
    encoder = ConditionalEncoder(
        [
            keras.layers.GRU(4, return_sequences=True, return_state=True),
            keras.layers.GRU(4, return_state=True),
        ]
    )
    model = build_snli_model(len(VOCABULARY), encoder=encoder, embedding_dim=3)
    heatmap = PairAttentionHeatmap(tmp_path, PREMISE, HYPOTHESIS, VOCABULARY)
    heatmap.set_model(model)
    assert heatmap.attention() is None
    heatmap.on_epoch_end(0)
    assert heatmap.last_matrix is None and not (tmp_path / "attention").exists()
