"""The auto-encoding benchmark's table and figure, from rows of the shape its runs write (the
example itself is tested in tests/examples/test_seq2seq_example.py), and the helpers the paper
benchmarks share."""

import doctest

import numpy as np
import pytest

from benchmarks.papers import example_runs, seq2seq_autoencoding


def _row(model, seed, perplexity, key_similarity=None):
    heatmap = None
    if model != "gru":
        heatmap = {
            "matrix": np.eye(4, 3).tolist(),
            "source": ["a", "b", "c"],
            "decoder_input": ["<s>", "a", "b", "c"],
        }
    memory = {} if model == "gru" else {"read_aligned": 0.5, "read_last": 0.25}
    if key_similarity is not None:
        memory["key_similarity"] = key_similarity
    return {
        "model": model,
        "seed": seed,
        "units": 8,
        "parameters": 100,
        "epochs": 2,
        "train_sentences": 10,
        "test_sentences": 5,
        "vocabulary": 20,
        "test_perplexity": perplexity,
        "test_word_accuracy": 0.5,
        "decoded_exact_match": 0.0,
        "decoded_word_accuracy": 0.25,
        "memory_before_training": {"key_similarity": 0.0} if key_similarity else {},
        "memory": memory,
        "probe_heatmap": heatmap,
        "val_loss_by_epoch": [2.0, 1.0],
        "seconds": 1.0,
    }


def test_the_summary_has_a_row_per_model_with_the_seeds_mean_and_spread():
    runs = [_row("dual_am_gru", 0, 2.0, 0.8), _row("dual_am_gru", 1, 4.0, 0.6), _row("gru", 0, 3.0)]
    rows = seq2seq_autoencoding.summarise(runs)
    assert [row["model"] for row in rows] == [
        seq2seq_autoencoding.MODELS["dual_am_gru"],
        seq2seq_autoencoding.MODELS["gru"],
    ]
    dual, gru = rows
    assert dual["seeds"] == 2 and dual["test_perplexity"] == "3.00 ± 1.00"
    assert dual["key_similarity"] == "0.70 ± 0.10" and dual["read_last"] == "0.25 ± 0.00"
    assert gru["test_perplexity"] == "3.00" and gru["key_similarity"] == ""


def test_the_findings_sentence_quotes_the_summary():
    summary = seq2seq_autoencoding.summarise(
        [_row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)]
    )
    text = seq2seq_autoencoding.findings(summary)
    assert "0.00 untrained and 0.80 trained" in text
    assert "last word in 0.25 of its steps and at the word it predicts in 0.50" in text
    assert "(the attention decoder's weights: 0.50 at that word)" in text
    assert seq2seq_autoencoding.findings(summary[1:]) == ""


def test_the_figure_needs_both_memories_and_is_drawn_from_the_first_seed(tmp_path):
    path = tmp_path / "figure.png"
    assert seq2seq_autoencoding.draw_figure([_row("dual_am_gru", 0, 2.0, 0.8)], path) is None
    runs = [_row("attention", 1, 2.0), _row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)]
    assert seq2seq_autoencoding.draw_figure(runs, path) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_corpus_has_its_defaults_results_file_and_block():
    generated = seq2seq_autoencoding.parse_args([])
    assert generated.seeds == [0, 1, 2] and generated.epochs == 20
    assert generated.results.name == "seq2seq_autoencoding.json"
    ptb = seq2seq_autoencoding.parse_args(["--corpus", "ptb", "--epochs", "3"])
    assert ptb.seeds == [0] and ptb.epochs == 3
    assert ptb.results.name == "seq2seq_autoencoding_ptb.json"
    assert seq2seq_autoencoding.example_arguments(ptb) == [
        "--max-length",
        "15",
        "--max-train",
        "10000",
        "--epochs",
        "3",
    ]


def test_the_shared_helpers(tmp_path):
    result = doctest.testmod(example_runs)
    assert result.attempted > 0 and result.failed == 0
    with pytest.raises(SystemExit, match="failed"):
        example_runs.run_example(tmp_path / "missing.py", [], tmp_path / "run", tmp_path)
