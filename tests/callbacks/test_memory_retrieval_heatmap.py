"""The retrieval heatmap of an associative memory
(`tf_memlayers.callbacks.memory_retrieval_heatmap`): the cosine similarity of every read with every
write, against its definition; the probe pair's word ids; and what `MemoryRetrievalHeatmap` writes
to TensorBoard each epoch (the image, the table of the matrix the NumPy reference of the AM-GRU
gives, the sentence pair, at the epoch's step), or does not write when the encoder has no
associative memory."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.am_gru_reference import conditional_encoding_retrievals
from tests.pair_encoders import snli_model
from tests.support import summary_events, tensorflow_only
from tf_memlayers import ConditionalEncoder
from tf_memlayers.callbacks.memory_retrieval_heatmap import (
    MemoryRetrievalHeatmap,
    cosine_similarity_matrix,
)
from tf_memlayers.layers import DualAssociativeEncoder
from tf_memlayers.models import build_snli_model

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")

VOCABULARY = ["<pad>", "<unk>", "a", "dog", "runs", "sleeps"]


def _text(value):
    return tf.make_ndarray(value.tensor).item().decode()


def _small_snli_model(first_layer):
    encoder = ConditionalEncoder([first_layer, keras.layers.GRU(4, return_state=True)])
    return build_snli_model(len(VOCABULARY), encoder=encoder, embedding_dim=3)


def test_cosine_similarity_matrix_is_the_cosine_of_every_pair():
    rng = np.random.default_rng(0)
    read = rng.normal(size=(4, 6)).astype("float32")
    written = rng.normal(size=(3, 6)).astype("float32")
    matrix = cosine_similarity_matrix(read, written)
    assert matrix.shape == (4, 3) and matrix.dtype == np.float64
    a, b = read.astype(np.float64), written.astype(np.float64)
    for i in range(4):
        for j in range(3):
            cosine = a[i] @ b[j] / np.sqrt((a[i] @ a[i]) * (b[j] @ b[j]))
            assert matrix[i, j] == pytest.approx(cosine, abs=1e-12)


def test_a_zero_vector_has_similarity_zero():
    # A step that wrote or read nothing: similarity 0 with everything, not NaN.
    read = np.array([[0.0, 0.0], [1.0, 1.0]])
    written = np.array([[2.0, 0.0], [0.0, 0.0]])
    matrix = cosine_similarity_matrix(read, written)
    np.testing.assert_array_equal(matrix[0], 0.0)
    np.testing.assert_array_equal(matrix[:, 1], 0.0)
    assert matrix[1, 0] == pytest.approx(2**-0.5, abs=1e-12)


def test_empty_probe_sentences_are_rejected(tmp_path):
    vocabulary = ["<pad>", "<unk>", "a"]
    with pytest.raises(ValueError, match="probe `premise` must have at least one token"):
        MemoryRetrievalHeatmap(str(tmp_path), [], ["a"], vocabulary)
    with pytest.raises(ValueError, match="probe `hypothesis`"):
        MemoryRetrievalHeatmap(str(tmp_path), ["a"], [], vocabulary)


def test_probe_words_become_ids_and_unknown_words_the_unk_id(tmp_path):
    vocabulary = ["<pad>", "cat", "<unk>", "a"]
    heatmap = MemoryRetrievalHeatmap(tmp_path, ["a", "cat", "zebra"], ["zebra", "a"], vocabulary)
    assert heatmap.premise_ids.tolist() == [[3, 1, 2]]
    assert heatmap.hypothesis_ids.tolist() == [[2, 3]]
    # Without "<unk>" in the vocabulary an unknown word is id 1.
    heatmap = MemoryRetrievalHeatmap(tmp_path, ["zebra", "b"], ["b"], ["<pad>", "a", "b"])
    assert heatmap.premise_ids.tolist() == [[1, 2]] and heatmap.hypothesis_ids.tolist() == [[2]]


def test_heatmap_callback_writes_an_image(tmp_path):
    vocabulary = ["<pad>", "<unk>", "a", "red", "cat", "the", "is", "."]
    model = snli_model(len(vocabulary), units=8, embedding_dim=6, num_copies=2)
    callback = MemoryRetrievalHeatmap(
        str(tmp_path), ["a", "red", "cat", "."], ["the", "cat", "is", "red", "."], vocabulary
    )
    callback.set_model(model)
    callback.on_epoch_end(0)
    assert callback.last_matrix.shape == (5, 4)
    assert np.all(np.abs(callback.last_matrix) <= 1 + 1e-9)
    vectors = model.get_layer("embedding").embeddings.numpy()
    dual = model.get_layer("encoder").encoder_layers[0].hypothesis_layer.cell
    weights = {
        "key": dual.premise_cell.key_kernel,
        "gate": dual.premise_cell.gate_kernel,
        "gate_bias": dual.premise_cell.gate_bias,
        "candidate": dual.premise_cell.candidate_kernel,
        "candidate_bias": dual.premise_cell.candidate_bias,
        "dual_gate": dual.dual_gate_kernel,
        "dual_candidate": dual.dual_candidate_kernel,
    }
    w = {name: np.asarray(v.numpy(), np.float64) for name, v in weights.items()}
    want = conditional_encoding_retrievals(
        vectors[callback.premise_ids[0]],
        vectors[callback.hypothesis_ids[0]],
        w,
        8,
        2,
        dual_key="paper",
    )
    expected = cosine_similarity_matrix(want["hypothesis_read"], want["premise_written"])
    np.testing.assert_allclose(callback.last_matrix, expected, atol=1e-5)
    summaries = {
        tag: written[-1][1] for tag, written in summary_events(tmp_path / "memory").items()
    }
    assert {"memory/retrieval", "memory/retrieval/table", "memory/sentence"} <= set(summaries)
    image = tf.make_ndarray(summaries["memory/retrieval"].tensor)
    # An image summary holds [width, height, encoded PNG]; decode the PNG itself.
    pixels = tf.io.decode_png(image[2]).numpy()
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4) and pixels.shape[0] >= 5
    table = tf.make_ndarray(summaries["memory/retrieval/table"].tensor).item().decode()
    assert table.splitlines()[0] == "| | a | red | cat | . |"  # premise tokens label the columns
    assert [row.split(" | ")[0] for row in table.splitlines()[2:]] == [
        "| the",
        "| cat",
        "| is",
        "| red",
        "| .",
    ]


def test_every_epoch_writes_the_matrix_and_the_pair_at_its_step(tmp_path):
    model = _small_snli_model(DualAssociativeEncoder(4, num_copies=2, return_sequences=True))
    heatmap = MemoryRetrievalHeatmap(
        tmp_path, ["a", "dog", "runs"], ["a", "dog", "sleeps"], VOCABULARY
    )
    heatmap.set_model(model)
    heatmap.on_epoch_end(0)
    first = heatmap.last_matrix
    # New weights between the epochs: the second epoch's matrix is that of the new weights.
    embedding = model.get_layer("embedding")
    embedding.embeddings.assign(np.random.default_rng(1).normal(size=(6, 3)))
    heatmap.on_epoch_end(3)
    assert heatmap.last_matrix.shape == (3, 3) and not np.allclose(heatmap.last_matrix, first)
    np.testing.assert_array_equal(heatmap.last_matrix, heatmap.similarity())
    events = summary_events(tmp_path / "memory")
    for tag in ("memory/retrieval", "memory/retrieval/table", "memory/sentence"):
        assert [step for step, _ in events[tag]] == [0, 3], tag
    assert _text(events["memory/sentence"][-1][1]) == (
        "premise: a dog runs\n\nhypothesis: a dog sleeps"
    )
    # The table of the last epoch holds that epoch's matrix, one hypothesis word a row.
    rows = _text(events["memory/retrieval/table"][-1][1]).splitlines()[2:]
    written = np.array([[float(cell) for cell in row.strip("| ").split(" | ")[1:]] for row in rows])
    np.testing.assert_allclose(written, heatmap.last_matrix, atol=5e-4 + 1e-9)


def test_an_encoder_without_an_associative_memory_writes_nothing(tmp_path):
    # A GRU first: no memory whose writes and reads line up with the words.
    model = _small_snli_model(keras.layers.GRU(4, return_sequences=True, return_state=True))
    heatmap = MemoryRetrievalHeatmap(tmp_path, ["a", "dog"], ["a", "dog"], VOCABULARY)
    heatmap.set_model(model)
    assert heatmap.similarity() is None
    heatmap.on_epoch_end(0)
    assert heatmap.last_matrix is None
    # Not even an empty run for TensorBoard to list.
    assert not (tmp_path / "memory").exists()
