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
from tf_memlayers.models.snli import (
    ConditionalEncoder,
    build_fixed_length_snli_model,
    build_snli_model,
    compile_snli_model,
)

from am_gru_reference import permutations, recorded, reference_run


def _batch(rng, batch=4, vocabulary=20):
    premise = rng.integers(2, vocabulary, size=(batch, 7)).astype("int32")
    hypothesis = rng.integers(2, vocabulary, size=(batch, 4)).astype("int32")
    premise[1, 5:] = 0
    hypothesis[2, 3:] = 0
    return premise, hypothesis


def _set_uniform_weights(layer, rng, scale=0.8):
    """Every weight U(-scale, scale): far from the ±0.05 init, so that the premise's effect
    on the hypothesis is well above the float32 tolerances."""
    layer.set_weights([rng.uniform(-scale, scale, size=w.shape) for w in layer.get_weights()])


def _layer_1_outputs(encoder, premise, hypothesis):
    """Calls the encoder and returns what its layer 1 handed to layer 2: the premise's and
    the hypothesis's output sequences."""
    top_call, seen = encoder.top_layer.call, []

    def recording_call(sequences, *args, **kwargs):
        seen.append(np.asarray(sequences, "float32"))
        return top_call(sequences, *args, **kwargs)

    encoder.top_layer.call = recording_call
    try:
        encoder([premise, hypothesis])
    finally:
        encoder.top_layer.call = top_call
    assert len(seen) == 2
    return seen


def _layer_1_weights(encoder):
    """Layer 1's weights under the names of `am_gru_reference`, in float64."""
    cell = encoder.premise_cell
    weights = {
        "key": cell.key_kernel,
        "gate": cell.gate_kernel,
        "gate_bias": cell.gate_bias,
        "candidate": cell.candidate_kernel,
        "candidate_bias": cell.candidate_bias,
    }
    if encoder.kind == "dual_am_gru":
        dual = encoder.hypothesis_cell
        weights.update(dual_gate=dual.dual_gate_kernel, dual_candidate=dual.dual_candidate_kernel)
        if encoder.dual_key == "released":
            weights["dual_key"] = dual.dual_key_kernel
    return {name: np.asarray(w.numpy(), np.float64) for name, w in weights.items()}


def _reference_retrievals(encoder, premise, hypothesis):
    """`ConditionalEncoder.memory_retrievals` restated with `am_gru_reference`: the premise
    pass from an empty memory, then the hypothesis pass from the premise's final memory (AM-GRU)
    or from an empty memory reading the premise's (Dual AM-GRU)."""
    w, units, copies = _layer_1_weights(encoder), encoder.units, encoder.num_copies
    perms = permutations(units // 2, copies, encoder.seed)
    empty = np.zeros((1, units * copies))
    written, read = [], []
    outputs, memory = reference_run(
        np.asarray(premise, np.float64)[None], empty, np.zeros((1, units)), w, perms,
        record=written,
    )
    hypothesis = np.asarray(hypothesis, np.float64)[None]
    if encoder.kind == "dual_am_gru":
        dual = (encoder.dual_key, memory)
        reference_run(hypothesis, empty, outputs[:, -1], w, perms, dual=dual, record=read)
        key = "source_read"
    else:
        reference_run(hypothesis, memory, outputs[:, -1], w, perms, record=read)
        key = "read"
    return {
        "premise_written": recorded(written, "written")[0],
        "hypothesis_read": recorded(read, key)[0],
    }


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


def _without_memories(states):
    """A hypothesis hand-over with every memory zeroed (the last output kept)."""
    return [s if i == 1 else s * 0.0 for i, s in enumerate(states)]


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_fused_loop_gives_the_same_model(monkeypatch, kind):
    rng = np.random.default_rng(3)
    premise, hypothesis = _batch(rng)
    labels = np.array([0, 1, 2, 0])
    models = [
        build_snli_model(20, kind=kind, units=8, embedding_dim=6, num_copies=3, fused_loop=fused)
        for fused in (False, True)
    ]
    _set_uniform_weights(models[0], rng)
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
    # Not vacuous: handing over no memory (for the Dual AM-GRU: no source memory) moves the
    # probabilities by far more than the tolerance.
    encoder = models[0].get_layer("encoder")
    hand_over = encoder._hypothesis_initial_state
    monkeypatch.setattr(
        encoder, "_hypothesis_initial_state", lambda states: _without_memories(hand_over(states))
    )
    without = models[0]((premise, hypothesis)).numpy()
    assert np.abs(without - results[0][0].numpy()).max() > 100 * 2e-6


@pytest.mark.parametrize("kind", ["gru", "am_gru", "dual_am_gru"])
def test_layer_1_encodes_the_hypothesis_from_the_premise_final_state(kind):
    rng = np.random.default_rng(4)
    premise = rng.normal(size=(2, 5, 6)).astype("float32")
    hypothesis = rng.normal(size=(2, 3, 6)).astype("float32")
    encoder = ConditionalEncoder(kind, units=8, num_copies=2)
    encoder.build([premise.shape, hypothesis.shape])
    _set_uniform_weights(encoder, rng)
    got_premise, got = _layer_1_outputs(encoder, premise, hypothesis)
    premise_layer = keras.layers.RNN(encoder.premise_cell, return_sequences=True, return_state=True)
    premise_seq, *states = premise_layer(premise)
    if kind == "dual_am_gru":  # an empty memory, the premise's last output, its memory to read
        memory, last = states
        cell, hand_over = encoder.hypothesis_cell, [memory * 0.0, last, memory]
    else:  # the premise's final state (GRU) or memory and last output (AM-GRU)
        cell, hand_over = encoder.premise_cell, states
    layer = keras.layers.RNN(cell, return_sequences=True)
    expected = layer(hypothesis, initial_state=hand_over).numpy()
    from_zeros = layer(hypothesis, initial_state=[s * 0.0 for s in hand_over]).numpy()
    np.testing.assert_allclose(got_premise, premise_seq.numpy(), atol=1e-6)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.abs(from_zeros - expected).max() > 1e-3


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


@pytest.mark.parametrize(
    "kind, dual_key", [("am_gru", "paper"), ("dual_am_gru", "paper"), ("dual_am_gru", "released")]
)
def test_memory_retrievals_match_the_reference(kind, dual_key):
    rng = np.random.default_rng(2)
    encoder = ConditionalEncoder(kind, units=8, num_copies=2, dual_key=dual_key)
    encoder.build([(None, None, 6), (None, None, 6)])
    _set_uniform_weights(encoder, rng)
    premise = rng.normal(size=(5, 6)).astype("float32")
    hypothesis = rng.normal(size=(3, 6)).astype("float32")
    got = encoder.memory_retrievals(premise, hypothesis)
    want = _reference_retrievals(encoder, premise, hypothesis)
    assert got["premise_written"].shape == (5, 8)
    assert got["hypothesis_read"].shape == (3, 8)
    for name in ("premise_written", "hypothesis_read"):  # every step
        np.testing.assert_allclose(got[name], want[name], atol=1e-6, rtol=0, err_msg=name)
    assert (np.abs(want["hypothesis_read"]).max(axis=1) > 0.1).all()  # a real read at every step
    assert ConditionalEncoder("gru", units=8).memory_retrievals(premise, hypothesis) == {}


def _float32_and_mixed_encoders(kind, rng, premise, hypothesis):
    """A float32 encoder with U(-0.8, 0.8) weights and a mixed_float16 copy of it."""
    expected = ConditionalEncoder(kind, units=8, num_copies=2)
    expected.build([premise.shape, hypothesis.shape])
    _set_uniform_weights(expected, rng)
    keras.config.set_dtype_policy("mixed_float16")
    try:
        encoder = ConditionalEncoder(kind, units=8, num_copies=2)
        encoder.build([premise.shape, hypothesis.shape])
    finally:
        keras.config.set_dtype_policy("float32")
    encoder.set_weights(expected.get_weights())
    return expected, encoder


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_mixed_float16_encoder_matches_float32(kind):
    rng = np.random.default_rng(3)
    premise = rng.normal(size=(2, 5, 6)).astype("float32")
    hypothesis = rng.normal(size=(2, 3, 6)).astype("float32")
    expected, encoder = _float32_and_mixed_encoders(kind, rng, premise, hypothesis)
    want = _layer_1_outputs(expected, premise, hypothesis) + expected([premise, hypothesis])
    got = _layer_1_outputs(encoder, premise, hypothesis) + encoder([premise, hypothesis])
    names = ["layer-1 premise", "layer-1 hypothesis", "p", "h"]
    for name, g, w in zip(names, got, want):
        g, w = np.asarray(g, "float32"), np.asarray(w)
        np.testing.assert_allclose(g, w, atol=5e-3 * max(1.0, np.abs(w).max()), err_msg=name)


@pytest.mark.parametrize("kind", ["am_gru", "dual_am_gru"])
def test_memory_retrievals_under_a_mixed_policy_run_in_float32(kind):
    # The probe steps the cells outside `__call__`, deliberately in the variables' dtype:
    # under mixed_float16 it gives the float32 values.
    rng = np.random.default_rng(3)
    premise = rng.normal(size=(5, 6)).astype("float32")
    hypothesis = rng.normal(size=(3, 6)).astype("float32")
    expected, encoder = _float32_and_mixed_encoders(kind, rng, premise[None], hypothesis[None])
    assert encoder.compute_dtype == "float16" and encoder.variable_dtype == "float32"
    got = encoder.memory_retrievals(premise, hypothesis)
    want = expected.memory_retrievals(premise, hypothesis)
    for name in ("premise_written", "hypothesis_read"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-6, rtol=0)


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
    vectors = model.get_layer("embedding").embeddings.numpy()
    want = _reference_retrievals(
        model.get_layer("encoder"), vectors[callback.premise_ids[0]],
        vectors[callback.hypothesis_ids[0]],
    )
    expected = cosine_similarity_matrix(want["hypothesis_read"], want["premise_written"])
    np.testing.assert_allclose(callback.last_matrix, expected, atol=1e-5)
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
    with pytest.raises(ValueError, match="fused_loop=True.*unroll=True"):
        ConditionalEncoder("dual_am_gru", fused_loop=True, unroll=True)
    with pytest.raises(TypeError, match="unroll.*bool"):
        ConditionalEncoder("gru", unroll="yes")


@pytest.mark.parametrize("fused_loop", [False, "auto"])
def test_exported_classifier_gives_the_same_probabilities(tmp_path, fused_loop):
    model = build_snli_model(
        30, kind="dual_am_gru", units=8, embedding_dim=6, num_copies=2, fused_loop=fused_loop
    )
    premise = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 2]], "int32")  # 0: padding
    hypothesis = np.array([[1, 2, 3, 4], [5, 6, 0, 0]], "int32")
    model.export(str(tmp_path / "saved"), verbose=False)
    saved = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_allclose(
        np.asarray(saved.serve([premise, hypothesis])),
        keras.ops.convert_to_numpy(model([premise, hypothesis])),
        rtol=0, atol=1e-6,
    )  # fmt: skip
    # The time loops over sentences of any length convert to TFLite with TensorFlow's own
    # list ops (SELECT_TF_OPS), which an interpreter runs with the Flex delegate only; a
    # fixed-length copy converts with the built-in operators (the test below).
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved"))
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS
    ]
    converter._experimental_lower_tensor_list_ops = False
    assert len(converter.convert()) > 0


def _builtin_tflite(model):
    """``model`` converted with TFLite's built-in operators only (no Flex)."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


@pytest.mark.parametrize(
    "kind, fused_loop, unroll, batch_size",
    [
        ("gru", "auto", True, None),
        ("am_gru", True, True, None),
        ("dual_am_gru", True, True, None),
        ("dual_am_gru", "auto", False, 3),
    ],
)
def test_fixed_length_copy_runs_in_tflite_with_builtin_operators_only(
    kind, fused_loop, unroll, batch_size
):
    interpreter_module = pytest.importorskip(
        "ai_edge_litert.interpreter", reason="the TFLite check needs ai-edge-litert"
    )
    rng = np.random.default_rng(5)
    model = build_snli_model(
        30, kind=kind, units=8, embedding_dim=6, num_copies=2, fused_loop=fused_loop
    )
    _set_uniform_weights(model, rng)
    # Sentences shorter than the fixed lengths, padded with id 0 (masked).
    premise = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 2, 11], [12, 13, 0, 0, 0, 0]], "int32")
    hypothesis = np.array([[1, 2, 3, 4], [5, 6, 0, 0], [14, 0, 0, 0]], "int32")
    expected = keras.ops.convert_to_numpy(model([premise, hypothesis]))
    # Not vacuous: the rows differ by far more than the tolerance, and the padding is
    # ignored (row 0 unpadded).
    assert np.ptp(expected, axis=0).max() > 100 * 1e-5
    np.testing.assert_allclose(
        model([premise[:1, :3], hypothesis[:1]]), expected[:1], rtol=0, atol=1e-6
    )

    # The variable-length model needs TensorFlow's list ops: built-in operators are refused.
    with pytest.raises(Exception, match="TensorList"):
        _builtin_tflite(model)
    fixed = build_fixed_length_snli_model(
        model, premise_length=6, hypothesis_length=4, batch_size=batch_size, unroll=unroll
    )
    assert [tuple(i.shape) for i in fixed.inputs] == [(batch_size, 6), (batch_size, 4)]
    np.testing.assert_allclose(fixed([premise, hypothesis]), expected, rtol=0, atol=1e-6)

    interpreter = interpreter_module.Interpreter(model_content=_builtin_tflite(fixed))
    runner = interpreter.get_signature_runner()
    (output_name,) = runner.get_output_details()
    got = runner(premise=premise, hypothesis=hypothesis)[output_name]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    if batch_size is None:  # the batch size stays free
        got = runner(premise=premise[1:], hypothesis=hypothesis[1:])[output_name]
        np.testing.assert_allclose(got, expected[1:], rtol=0, atol=1e-5)


def test_fixed_length_copy_names_a_bad_argument():
    model = build_snli_model(20, kind="gru", units=4, embedding_dim=3)
    with pytest.raises(ValueError, match="unroll=False.*batch_size"):
        build_fixed_length_snli_model(model, 5, 3, unroll=False)
    with pytest.raises(ValueError, match="premise_length"):
        build_fixed_length_snli_model(model, 0, 3)
    with pytest.raises(TypeError, match="hypothesis_length"):
        build_fixed_length_snli_model(model, 5, 2.5)
    with pytest.raises(ValueError, match="batch_size"):
        build_fixed_length_snli_model(model, 5, 3, batch_size=0)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="build_snli_model"):
        build_fixed_length_snli_model(other, 5, 3)
