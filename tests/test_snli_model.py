"""The SNLI model builder and the retrieval heatmap callback."""

import os

import keras
import numpy as np
import tensorflow as tf
import pytest

from tf_memlayers.callbacks.associative_memory import (
    MemoryRetrievalHeatmap,
    cosine_similarity_matrix,
)
from tf_memlayers.models.snli import ConditionalEncoder, build_snli_model, compile_snli_model


def _batch(rng, batch=4, vocabulary=20):
    premise = rng.integers(2, vocabulary, size=(batch, 7)).astype("int32")
    hypothesis = rng.integers(2, vocabulary, size=(batch, 4)).astype("int32")
    premise[1, 5:] = 0
    hypothesis[2, 3:] = 0
    return premise, hypothesis


@pytest.mark.parametrize("kind, fused_loop", [("dual_am_gru", False), ("dual_am_gru", True)])
def test_model_trains_saves_and_reloads(tmp_path, kind, fused_loop):
    rng = np.random.default_rng(0)
    premise, hypothesis = _batch(rng)
    labels = np.array([0, 1, 2, 0])
    model = build_snli_model(
        20, kind=kind, units=8, embedding_dim=6, num_copies=2, fused_loop=fused_loop
    )
    compile_snli_model(model)
    loss = model.train_on_batch((premise, hypothesis), labels)
    assert np.isfinite(loss).all()
    probabilities = model.predict_on_batch((premise, hypothesis))
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    path = os.path.join(tmp_path, "snli.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded.predict_on_batch((premise, hypothesis)), probabilities)
    encoder = loaded.get_layer("encoder")
    if kind == "dual_am_gru":
        # Sharing survives reloading: the hypothesis cell uses the premise cell's weights.
        assert encoder.hypothesis_cell.premise_cell is encoder.premise_cell


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_fused_loop_gives_the_same_model(kind):
    rng = np.random.default_rng(3)
    premise, hypothesis = _batch(rng)
    labels = np.array([0, 1, 2, 0])
    models = [
        build_snli_model(20, kind=kind, units=8, embedding_dim=6, num_copies=3, fused_loop=fused)
        for fused in (False, True)
    ]
    models[1].set_weights(models[0].get_weights())
    results = []
    for model in models:
        with tf.GradientTape() as tape:
            probabilities = model((premise, hypothesis))
            loss = keras.losses.sparse_categorical_crossentropy(labels, probabilities)
        results.append([probabilities] + tape.gradient(loss, model.trainable_weights))
    assert models[1].get_layer("encoder").get_config()["fused_loop"] is True
    for cell_form, fused in zip(*results):  # the embedding gradient is IndexedSlices
        np.testing.assert_allclose(
            tf.convert_to_tensor(fused).numpy(), tf.convert_to_tensor(cell_form).numpy(),
            atol=2e-6, rtol=1e-5,
        )


@pytest.mark.parametrize("kind", ["gru", "am_gru"])
def test_other_kinds_predict_a_distribution(kind):
    rng = np.random.default_rng(0)
    model = build_snli_model(20, kind=kind, units=8, embedding_dim=6, num_copies=2)
    probabilities = model(_batch(rng)).numpy()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    assert probabilities.shape == (4, 3)


def test_weights_are_shared_between_premise_and_hypothesis():
    encoder = ConditionalEncoder("dual_am_gru", units=8, num_copies=2)
    encoder.build([(None, None, 6), (None, None, 6)])
    names = sorted(w.path.split("/")[-1] for w in encoder.weights)
    # one set of AM-GRU weights, the dual kernels, one top GRU
    assert names.count("key_kernel") == 1 and names.count("gate_kernel") == 1
    assert "dual_gate_kernel" in names and "dual_key_kernel" not in names
    gru = ConditionalEncoder("gru", units=8)
    gru.build([(None, None, 6), (None, None, 6)])
    assert len(gru.weights) == 6  # two GRUs (kernel, recurrent kernel, bias), each used twice


def test_hypothesis_depends_on_premise_and_padding_is_ignored():
    rng = np.random.default_rng(1)
    encoder = ConditionalEncoder(
        "dual_am_gru", units=8, num_copies=2, kernel_initializer="glorot_uniform"
    )
    premise = rng.normal(size=(2, 5, 6)).astype("float32")
    hypothesis = rng.normal(size=(2, 3, 6)).astype("float32")
    p, h = encoder([premise, hypothesis])
    other = premise.copy()
    other[:, 0] += 1.0
    _, h2 = encoder([other, hypothesis])
    assert np.abs(h.numpy() - h2.numpy()).max() > 1e-4
    padded = np.concatenate([premise, np.zeros((2, 2, 6), "float32")], 1)
    mask = np.concatenate([np.ones((2, 5), bool), np.zeros((2, 2), bool)], 1)
    p3, h3 = encoder([padded, hypothesis], mask=[mask, np.ones((2, 3), bool)])
    np.testing.assert_allclose(p3.numpy(), p.numpy(), atol=1e-6)
    np.testing.assert_allclose(h3.numpy(), h.numpy(), atol=1e-6)


def test_memory_retrievals_match_the_cell_outputs():
    rng = np.random.default_rng(2)
    encoder = ConditionalEncoder("dual_am_gru", units=8, num_copies=2)
    premise = rng.normal(size=(5, 6)).astype("float32")
    hypothesis = rng.normal(size=(3, 6)).astype("float32")
    encoder([premise[None], hypothesis[None]])
    retrievals = encoder.memory_retrievals(premise, hypothesis)
    assert retrievals["premise_written"].shape == (5, 8)
    assert retrievals["hypothesis_read"].shape == (3, 8)
    # The premise's outputs are the running sums of what it read plus what it wrote.
    outputs = keras.layers.RNN(encoder.premise_cell, return_sequences=True)(premise[None])
    first = retrievals["premise_written"][0]  # memory empty at t=0: output = delta
    np.testing.assert_allclose(outputs.numpy()[0, 0], first, atol=1e-6)
    assert ConditionalEncoder("gru", units=8).memory_retrievals(premise, hypothesis) == {}


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_memory_retrievals_under_mixed_precision(kind):
    rng = np.random.default_rng(3)
    premise = rng.normal(size=(5, 6)).astype("float32")
    hypothesis = rng.normal(size=(3, 6)).astype("float32")
    keras.utils.set_random_seed(0)
    expected = ConditionalEncoder(kind, units=8, num_copies=2)
    expected([premise[None], hypothesis[None]])
    keras.config.set_dtype_policy("mixed_float16")
    try:
        encoder = ConditionalEncoder(kind, units=8, num_copies=2)
        encoder([premise[None], hypothesis[None]])
    finally:
        keras.config.set_dtype_policy("float32")
    encoder.set_weights(expected.get_weights())
    got = encoder.memory_retrievals(premise, hypothesis)
    want = expected.memory_retrievals(premise, hypothesis)
    for name in ("premise_written", "hypothesis_read"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-6)


def test_cosine_similarity_matrix():
    read = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    written = np.array([[3.0, 0.0], [0.0, -1.0]])
    expected = np.array([[1.0, 0.0], [0.0, -1.0], [2**-0.5, -(2**-0.5)]])
    np.testing.assert_allclose(cosine_similarity_matrix(read, written), expected, atol=1e-12)


def test_heatmap_callback_writes_an_image(tmp_path):
    vocabulary = ["<pad>", "<unk>", "a", "red", "cat", "the", "is", "."]
    model = build_snli_model(len(vocabulary), units=8, embedding_dim=6, num_copies=2)
    callback = MemoryRetrievalHeatmap(
        str(tmp_path), ["a", "red", "cat", "."], ["the", "cat", "is", "red", "."], vocabulary
    )
    callback.set_model(model)
    callback.on_epoch_end(0)
    assert callback.last_matrix.shape == (5, 4)
    assert np.all(np.abs(callback.last_matrix) <= 1 + 1e-9)
    summaries = {}
    for name in os.listdir(tmp_path / "memory"):
        for event in tf.compat.v1.train.summary_iterator(str(tmp_path / "memory" / name)):
            for value in event.summary.value:
                summaries[value.tag] = value
    assert {"memory/retrieval", "memory/retrieval/table", "memory/sentence"} <= set(summaries)
    image = tf.make_ndarray(summaries["memory/retrieval"].tensor)
    # An image summary holds [width, height, encoded PNG]; decode the PNG itself.
    pixels = tf.io.decode_png(image[2]).numpy()
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4) and pixels.shape[0] >= 5
    table = tf.make_ndarray(summaries["memory/retrieval/table"].tensor).item().decode()
    assert table.splitlines()[0] == "| | a | red | cat | . |"  # premise tokens label the columns
    assert [row.split(" | ")[0] for row in table.splitlines()[2:]] == [
        "| the", "| cat", "| is", "| red", "| .",
    ]


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind.*'lstm'"):
        ConditionalEncoder("lstm")
    with pytest.raises(ValueError, match="embeddings.*shape"):
        build_snli_model(10, embeddings=np.zeros((9, 4)))
    with pytest.raises(ValueError, match="units.*even"):
        build_snli_model(10, kind="am_gru", units=7)
    with pytest.raises(ValueError, match="fused_loop=True.*kind='gru'"):
        ConditionalEncoder("gru", fused_loop=True)
    with pytest.raises(ValueError, match="fused_loop=True.*dual_key='paper'.*'released'"):
        ConditionalEncoder("dual_am_gru", dual_key="released", fused_loop=True)
    with pytest.raises(TypeError, match="fused_loop.*bool.*1"):
        ConditionalEncoder("am_gru", fused_loop=1)
