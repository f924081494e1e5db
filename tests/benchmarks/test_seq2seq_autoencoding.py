"""The auto-encoding benchmark: its options, its table and figure from rows of the shape its runs
write (the example itself is tested in examples/seq2seq/)."""

import numpy as np
import pytest

from benchmarks.papers import seq2seq_autoencoding as benchmark


def _row(model, seed, perplexity, key_similarity=None):
    """A row as the benchmark's runs write it, but for the columns it does not read."""
    heatmap = {"matrix": np.eye(4, 3).tolist(), "source": [*"abc"], "decoder_input": [*"sabc"]}
    memory = {} if model == "gru" else {"read_aligned": 0.5, "read_last": 0.25}
    memory.update({} if key_similarity is None else {"key_similarity": key_similarity})
    before = {"key_similarity": 0.0} if key_similarity else {}
    scores = dict(test_perplexity=perplexity, test_word_accuracy=0.5, decoded_exact_match=0.0)
    scores.update(decoded_word_accuracy=0.25, memory_before_training=before, memory=memory)
    heatmap = None if model == "gru" else heatmap
    return dict(scores, model=model, seed=seed, parameters=100, probe_heatmap=heatmap)


def test_the_summary_has_a_row_per_model_with_the_seeds_mean_and_spread():
    runs = [_row("dual_am_gru", 0, 2.0, 0.8), _row("dual_am_gru", 1, 4.0, 0.6), _row("gru", 0, 3.0)]
    dual, gru = benchmark.summarise(runs)
    assert (dual["model"], gru["model"]) == (
        benchmark.MODELS["dual_am_gru"],
        benchmark.MODELS["gru"],
    )
    assert dual["seeds"] == 2 and dual["test_perplexity"] == "3.00 ± 1.00"
    assert dual["key_similarity"] == "0.70 ± 0.10" and dual["read_last"] == "0.25 ± 0.00"
    assert dual["decoded_exact_match"] == "0.000 ± 0.000"
    assert gru["test_perplexity"] == "3.00" and gru["key_similarity"] == ""
    summary = benchmark.summarise([_row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)])
    text = benchmark.findings(summary)
    assert "0.00 untrained and 0.80 trained" in text
    assert "last word in 0.25 of its steps and at the word it predicts in 0.50" in text
    assert "(the attention decoder's weights: 0.50 at that word)" in text
    assert benchmark.findings(summary[1:]) == ""


def test_the_figure_needs_both_memories_and_is_drawn_from_the_first_seed(tmp_path):
    path = tmp_path / "figure.png"
    assert benchmark.draw_figure([_row("dual_am_gru", 0, 2.0, 0.8)], path) is None
    runs = [_row("attention", 1, 2.0), _row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)]
    assert benchmark.draw_figure(runs, path) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_corpus_has_its_defaults_and_results_file(capsys):
    generated = benchmark.parse_args([])
    assert generated.seeds == [0, 1, 2] and generated.epochs == 20
    assert generated.results.name == "seq2seq_autoencoding.json"
    ptb = benchmark.parse_args(["--corpus", "ptb", "--epochs", "3"])
    assert ptb.seeds == [0] and ptb.results.name == "seq2seq_autoencoding_ptb.json"
    assert ptb.example_arguments == ["--max-length", "15", "--max-train", "10000", "--epochs", "3"]
    for argv in (["--epochs", "0"], ["--models", "lstm"], ["--seeds", "-1"], ["--corpus", "x"]):
        with pytest.raises(SystemExit) as exit_info:
            benchmark.parse_args(argv)
        assert exit_info.value.code == 2
        assert f"error: argument {argv[0]}" in capsys.readouterr().err.strip().splitlines()[-1]
