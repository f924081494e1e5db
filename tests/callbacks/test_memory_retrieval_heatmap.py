"""The retrieval heatmap of an associative memory against its definition and the AM-GRU's NumPy
reference, and what `MemoryRetrievalHeatmap` writes to TensorBoard."""

import numpy as np

from tests.am_gru_reference import conditional_encoding_retrievals
from tests.callbacks.test_pair_probe import check_two_epochs
from tests.pair_encoders import snli_model
from tests.support import tensorflow_only
from tf_memlayers.callbacks import MemoryRetrievalHeatmap, cosine_similarity_matrix

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")


def _reference_matrix(model, heatmap):
    """The matrix of the NumPy reference of the AM-GRU (`am_gru_reference`) for the probe."""
    vectors = model.get_layer("embedding").embeddings.numpy()
    dual = model.get_layer("encoder").encoder_layers[0].hypothesis_layer.cell
    names = "key gate gate_bias candidate candidate_bias dual_gate dual_candidate".split()
    w = {
        name: np.asarray(getattr(owner, name if "bias" in name else f"{name}_kernel"), np.float64)
        for name, owner in zip(names, [dual.premise_cell] * 5 + [dual] * 2)
    }
    premise, hypothesis = vectors[heatmap.premise_ids[0]], vectors[heatmap.hypothesis_ids[0]]
    want = conditional_encoding_retrievals(premise, hypothesis, w, 8, 2, dual_key="paper")
    return cosine_similarity_matrix(want["hypothesis_read"], want["premise_written"])


def test_every_epoch_writes_the_reference_matrix_of_cosines_and_the_pair_at_its_step(tmp_path):
    vocabulary = ["<pad>", "<unk>", "a", "red", "cat", "the", "is", "."]
    model = snli_model(len(vocabulary), units=8, embedding_dim=6, num_copies=2)
    premise, hypothesis = ["a", "red", "cat", "."], ["the", "cat", "is", "red", "."]
    heatmap = MemoryRetrievalHeatmap(str(tmp_path), premise, hypothesis, vocabulary)
    heatmap.set_model(model)
    matrices = check_two_epochs(
        heatmap, tmp_path, "memory/retrieval", lambda: _reference_matrix(model, heatmap), atol=1e-5
    )
    assert matrices[0].shape == (5, 4) and np.all(np.abs(matrices) <= 1 + 1e-9)
