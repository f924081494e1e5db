"""The auto-encoding example (`examples/seq2seq_autoencoder.py`, Weissenborn 2016, §5.3): its
sentences, its three auto-encoders (decoding through the step model gives the teacher-forced
model's logits), the memory probes of the paper's Figure 3 against the layers themselves, and
the script end to end (its bad options: tests/examples/test_command_lines.py)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from examples.seq2seq import probes, sentences
from examples.seq2seq.models import MODELS, build_autoencoder
from tests.support import (
    REPO_ROOT,
    assert_hparams_named_as_options,
    load_script,
    logged_hparams,
    summary_events,
)
from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell


def test_generated_sentences_follow_their_seed_and_grammar():
    first = sentences.generated_sentences(200, seed=4)
    assert first == sentences.generated_sentences(200, seed=4)
    assert first != sentences.generated_sentences(200, seed=5)
    assert all(4 <= len(s) <= 14 for s in first)
    splits = sentences.generated_splits("small", seed=1)
    assert [len(splits[name]) for name in sentences.SPLITS] == [600, 100, 100]
    assert splits["train"][:5] != splits["test"][:5]  # independent streams
    with pytest.raises(ValueError, match="`size` must be one of"):
        sentences.generated_splits("huge")


def test_encode_gives_the_teacher_forced_arrays():
    vocabulary = sentences.build_vocabulary([["a", "b", "a"], ["c"]])
    assert vocabulary[:4] == list(sentences.SPECIAL_TOKENS)
    source, decoder_input, target = sentences.encode([["a", "b"], ["c", "zzz"]], vocabulary, 3)
    a, b, c = (vocabulary.index(w) for w in "abc")
    np.testing.assert_array_equal(source, [[a, b, 0], [c, 1, 0]])  # zzz: <unk>
    np.testing.assert_array_equal(decoder_input, [[2, a, b, 0], [2, c, 1, 0]])
    np.testing.assert_array_equal(target, [[a, b, 3, 0], [c, 1, 3, 0]])


def test_sentence_files_are_found_and_checked(tmp_path):
    (tmp_path / "ptb.train.txt").write_text("a b c\nd e f g h i\n\nb c\n")
    (tmp_path / "ptb.valid.txt").write_text("a b\n")
    with pytest.raises(ValueError, match="one test file.*found none"):
        sentences.find_sentence_files(tmp_path)
    (tmp_path / "test.txt").write_text("c d\n")
    (tmp_path / "ptb.char.train.txt").write_text("a _ b\n")  # as in Penn Treebank's folder
    splits = sentences.read_sentence_files(tmp_path, max_length=4)
    assert splits["train"] == [["a", "b", "c"], ["b", "c"]]  # the long and blank lines left out
    assert splits["test"] == [["c", "d"]]
    (tmp_path / "test.txt").write_text("one two three four five\n")
    with pytest.raises(ValueError, match="test.txt has no sentence of 1 to 4 words"):
        sentences.read_sentence_files(tmp_path, max_length=4)


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
    lengths = (source > 0).sum(1)
    decoder_input = np.zeros((3, 7), "int32")
    for row, length in enumerate(lengths):
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
    assert autoencoder.memory_probe(source[1, :4], decoder_input[1, :5])["alignments"].shape == (
        5,
        4,
    )
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


@pytest.fixture(scope="module")
def example():
    return load_script("examples", "seq2seq_autoencoder")


TINY = [
    "--train-size",
    "small",
    "--max-train",
    "64",
    "--units",
    "8",
    "--embedding-dim",
    "6",
    "--num-copies",
    "2",
    "--epochs",
    "1",
    "--probe-sentences",
    "4",
    "--verbose",
    "0",
]


# The Dual AM-GRU trains two epochs, long enough to learn, and its memory is probed each.
MORE = {"dual_am_gru": ["--epochs", "2", "--max-train", "200", "--learning-rate", "1e-2"]}


@pytest.mark.parametrize("model", MODELS)
def test_the_example_runs_and_reports(example, tmp_path, model):
    argv = [*TINY, "--model", model, *MORE.get(model, [])]
    metrics = example.main([*argv, "--workdir", str(tmp_path / "run")])
    for name in (
        "test_perplexity",
        "test_word_accuracy",
        "decoded_exact_match",
        "decoded_word_accuracy",
    ):
        assert np.isfinite(metrics[name]), name
    epochs = 2 if model in MORE else 1
    assert metrics["epochs_run"] == list(range(epochs))
    assert metrics["train_sentences"] == (200 if model in MORE else 64)
    if model in MORE:
        assert metrics["history"]["loss"][1] < metrics["history"]["loss"][0]
    assert set(metrics["memory"]) == set(probes.STATISTICS[model])
    heatmap = metrics["probe_heatmap"]
    if model == "gru":
        assert heatmap is None
    else:  # one row per decoder input word, one column per source word
        assert np.shape(heatmap["matrix"]) == (
            len(heatmap["decoder_input"]),
            len(heatmap["source"]),
        )
        assert heatmap["decoder_input"][1:] == heatmap["source"]
    assert (tmp_path / "run" / "metrics.json").exists()
    hparams, _ = logged_hparams(str(tmp_path / "run" / "logs"))
    assert hparams["model"] == model and hparams["source"] == metrics["source"]
    assert_hparams_named_as_options(hparams, example.parse_args(argv))
    # Each memory draws in its own run (the attention in ``attention``, as in the SNLI
    # example); the GRU has nothing to draw, and leaves no empty run for TensorBoard to list.
    logs = tmp_path / "run" / "logs"
    drawn = {run for run in probes.RUNS.values() if (logs / run).exists()}
    assert drawn == ({probes.RUNS[model]} if model != "gru" else set())
    for run in drawn:
        events = summary_events(str(logs / run))
        expected = {f"{run}/{name}" for name in probes.STATISTICS[model]}
        image = f"{run}/retrieval" if run == "memory" else f"{run}/alignment"
        assert set(events) == expected | {image, f"{image}/table"}
        for tag in expected:  # the probe ran after each epoch
            assert [step for step, _ in events[tag]] == list(range(epochs)), tag
    if model == "gru":
        # The same command resumes the finished run: nothing more to train. It decodes the
        # test sentences again, here with keras-hub's beam search (``--beams`` does not name
        # another run).
        again = example.main(
            [*TINY, "--model", model, "--beams", "3", "--workdir", str(tmp_path / "run")]
        )
        assert again["history"] == metrics["history"] and again["epochs_run"] == [0]
        assert 0 <= again["decoded_word_accuracy"] <= 1


def test_the_example_reads_sentence_files(example, tmp_path):
    words = sentences.generated_sentences(90, seed=2)
    for split, part in (("train", words[:60]), ("valid", words[60:75]), ("test", words[75:])):
        (tmp_path / f"{split}.txt").write_text("\n".join(" ".join(s) for s in part) + "\n")
    metrics = example.main(
        [*TINY, "--model", "gru", "--data-dir", str(tmp_path), "--workdir", str(tmp_path / "run")]
    )
    assert metrics["source"] == "files" and metrics["test_sentences"] == 15


def _error_line(capsys, parse, argv):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_missing_keras_hub_is_named(example, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # not installed
    line = _error_line(capsys, example.parse_args, ["--beams", "4"])
    assert "error: argument --beams" in line and "tf-memlayers[keras-hub]" in line


def test_the_script_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "seq2seq_autoencoder.py"),
            "--units",
            "7",
            "--workdir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "seq2seq_autoencoder.py: error: argument --units: must be even"
    )
    assert not (tmp_path / "run").exists()
