"""What `PairAttentionHeatmap` writes to TensorBoard each epoch, or does not write."""

import numpy as np

from tests.callbacks.test_pair_probe import check_two_epochs
from tests.pair_encoders import snli_model
from tests.support import tensorflow_only
from tf_memlayers.callbacks import PairAttentionHeatmap

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")


def test_every_epoch_writes_the_weights_and_the_pair_at_its_step(tmp_path):
    # Word-by-word attention: an LSTM over the premise, one with attention over the hypothesis.
    vocabulary = ["<pad>", "<unk>", "a", "dog", "runs", "sleeps"]
    model = snli_model(len(vocabulary), "word_by_word", units=4, embedding_dim=3, init_scale=0.5)
    premise, hypothesis = ["a", "dog", "runs", "fast"], ["a", "dog", "sleeps"]
    heatmap = PairAttentionHeatmap(tmp_path, premise, hypothesis, vocabulary)
    heatmap.set_model(model)
    # The encoder's weights of the embedded probe ("fast" is unknown: <unk>'s vector, id 1).
    encoder, vectors = model.get_layer("encoder"), model.get_layer("embedding").embeddings

    def expected():
        words = np.asarray(vectors)
        return encoder.premise_attention(words[[2, 3, 4, 1]], words[[2, 3, 5]])

    matrices = check_two_epochs(heatmap, tmp_path, "attention/alignment", expected, rtol=1e-6)
    assert matrices[0].shape == (3, 4)
    np.testing.assert_allclose(np.sum(matrices, axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(heatmap.last_matrix, heatmap.attention())
