"""The paper benchmarks: their results files (`benchmarks/results_file.py`) and driver, their
options, their tables and figures, and tiny runs through the examples."""

import json

import numpy as np
import pytest

from benchmarks import results_file
from benchmarks.papers import fill_last_word_real_data as last_word
from benchmarks.papers import seq2seq_autoencoding as seq2seq
from benchmarks.papers import snli_real_data
from benchmarks.results_file import ResultsFile
from tests.support import load_script


def test_a_file_is_written_after_every_row_a_row_replacing_the_one_with_its_key(tmp_path):
    path = tmp_path / "new" / "folder" / "results.json"  # the folders do not exist yet
    results = ResultsFile(path, {"epochs": 2}, summarise=lambda runs: [len(runs)])
    assert results_file.read(path) is None and results.stored() is None
    report = results.resume()
    assert report == {"settings": {"epochs": 2}, "runs": []}
    results.add(report, {"model": "gru", "seed": 0, "accuracy": 0.5})
    results.add(report, {"model": "lstm", "seed": 0})
    assert path.read_text() == json.dumps(report, indent=1) + "\n"
    results.add(report, {"model": "gru", "seed": 0, "accuracy": 0.6})  # last, replacing
    stored = json.loads(path.read_text())
    assert list(stored) == ["settings", "runs", "summary"] and stored["summary"] == [2]
    assert stored["runs"] == [
        {"model": "lstm", "seed": 0},
        {"model": "gru", "seed": 0, "accuracy": 0.6},
    ]
    with pytest.raises(SystemExit, match="No results file at .*missing.json"):
        results_file.read_or_exit(tmp_path / "missing.json")


def test_stored_rows_are_kept_only_with_the_same_compared_settings(tmp_path):
    path = tmp_path / "results.json"
    stored = {"settings": {"dropout": 0.4, "max_epochs": 15}, "rows": [1], "data": {"train": 9}}
    path.write_text(json.dumps(stored))  # "data": the benchmark's own, kept as it stands
    compared = lambda settings: {k: v for k, v in settings.items() if k != "max_epochs"}  # noqa: E731
    options = dict(rows="rows", key=("model",), compared=compared)
    raised = ResultsFile(path, {"dropout": 0.4, "max_epochs": 40}, **options).resume()
    assert raised == stored | {"settings": {"dropout": 0.4, "max_epochs": 40}}
    assert ResultsFile(path, {"dropout": 0.5, "max_epochs": 15}, **options).stored() is None
    other = ResultsFile(path, {"epochs": 3})  # every setting compared
    assert other.stored() is None and other.resume() == {"settings": {"epochs": 3}, "runs": []}
    fresh = {"corpus": "ptb", "settings": {"epochs": 3}, "runs": []}
    assert other.resume(fresh=fresh) is fresh
    # Resuming does not write: the file still holds the first run's rows.
    assert json.loads(path.read_text())["rows"] == [1]


def test_missing_keys_keep_their_order_once_each_and_skip_finished_rows():
    results = ResultsFile("unused.json", {}, key=("variant", "seed"))
    report = {"runs": [{"variant": "dot", "seed": 0, "epochs": 2}, {"variant": "none", "seed": 1}]}
    wanted = [(v, s) for s in (0, 1, 1) for v in ("none", "dot")]
    assert results.missing(report, wanted) == [("none", 0), ("dot", 1)]
    finished = lambda row: row.get("epochs", 4) >= 4  # noqa: E731
    assert results.missing(report, wanted, finished) == [("none", 0), ("dot", 0), ("dot", 1)]
    one_field = ResultsFile("unused.json", {}, rows="rows", key=("model",))
    assert one_field.key_of({"model": "lstm", "seed": 3}) == "lstm"
    assert one_field.missing({"rows": [{"model": "lstm"}]}, ["lstm", "ngram"]) == ["ngram"]


def test_a_benchmark_resumes_its_runs_renders_them_and_writes_its_block_when_asked(
    tmp_path, monkeypatch
):
    benchmark = load_script("benchmarks/papers", "fill_last_word_generated")
    trained, written = [], []

    def fake_run(key, seed, args):
        trained.append((key, seed))
        row = dict(variant=key, model=benchmark.VARIANTS[key][0], seed=seed, eval_accuracy=seed)
        return row | dict(eval_majority_baseline=0.125, eval_attention_on_fact=seed or None)

    monkeypatch.setattr(snli_real_data, "run", fake_run)
    monkeypatch.setattr(benchmark, "write_docs_table", written.append)
    path = tmp_path / "results.json"
    argv = ["--results", str(path), "--variants", "no-cache", "dot", "--seeds", "0", "1"]
    with pytest.raises(SystemExit, match="No results file"):
        benchmark.main([*argv, "--from-results"])
    report = benchmark.main(argv)
    assert trained == [("no-cache", 0), ("dot", 0), ("no-cache", 1), ("dot", 1)]
    assert json.loads(path.read_text()) == report and written == []
    assert list(report) == ["settings", "runs", "summary"]
    assert report["settings"] == {"example_arguments": []}
    assert [row["accuracy"] for row in report["summary"]] == ["0.500 ± 0.500"] * 2
    assert report["summary"][0]["attention_on_fact"] == ""  # a seed without a read weight
    assert benchmark.main([*argv, "--from-results", "--update-docs"]) == report == written[0]
    trained.clear()
    assert (
        benchmark.main(argv + ["--seeds", "1", "2", "--update-docs"])["runs"][:4] == report["runs"]
    )
    assert trained == [("no-cache", 2), ("dot", 2)] and len(written[1]["runs"]) == 6
    # Other settings of the example: the stored runs are dropped.
    trained.clear()
    report = benchmark.main(argv + ["--epochs", "3"])
    assert report["settings"] == {"example_arguments": ["--epochs", "3"]}
    assert len(trained) == 4 and len(report["runs"]) == 4


BAD_OPTIONS = {
    "lm_equal_budget": ["--max-epochs 0", "--dropout 1", "--steps 0", "--repeats x", "--units -3"]
    + ["--models gru"],
    "snli_real_data": ["--learning-rate nan", "--units 0", "--models lstm", "--seeds -1"],
    "seq2seq_autoencoding": ["--epochs 0", "--models lstm", "--seeds -1", "--corpus x"],
    "fill_last_word_real_data": ["--max-epochs 0", "--batch-size -4", "--held-out 1"]
    + ["--variants 4"],
    "fill_last_word_generated": ["--epochs 0", "--variants lstm"],
}


@pytest.mark.parametrize(
    "name, argv", [(name, argv) for name, options in BAD_OPTIONS.items() for argv in options]
)
def test_a_bad_option_is_one_line_naming_it_and_status_2(name, argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_script("benchmarks/papers", name).parse_args(argv.split())
    (line,) = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and f"error: argument {argv.split()[0]}" in line


def test_a_tiny_run_writes_its_row_and_resumes(tmp_path, monkeypatch):
    data = tmp_path / "data" / "snli" / "esnli_infersent_format"
    data.mkdir(parents=True)
    colours = "red blue green black white".split()
    for split, count in (("dev", 40), ("test", 20)):
        pairs = [
            (f"a {colours[i % 5]} cat sleeps .", f"the cat is {colours[i % 3]} .")
            for i in range(count)
        ]
        (data / f"s1.{split}").write_text("".join(p + "\n" for p, _ in pairs))
        (data / f"s2.{split}").write_text("".join(h + "\n" for _, h in pairs))
        labels = ["entailment", "neutral", "contradiction"]
        (data / f"labels.{split}").write_text("".join(labels[i % 3] + "\n" for i in range(count)))
    glove = tmp_path / "glove.json"
    glove.write_text(json.dumps({word: [0.1, 0.2, 0.3] for word in ["cat", "red", "the"]}))
    monkeypatch.setattr(snli_real_data, "DATA", tmp_path / "data")
    monkeypatch.setattr(snli_real_data, "GLOVE", glove)
    monkeypatch.setattr(snli_real_data, "RUNS", tmp_path / "runs")
    results = tmp_path / "results.json"
    argv = ["--models", "gru", "--seeds", "1", "--epochs", "2", "--units", "4", "--verbose", "0"]
    report = snli_real_data.main([*argv, "--batch-size", "12", "--results", str(results)])
    assert report["data"] == {
        "train": 36,
        "held_out_dev": 4,
        "test": 20,
        "vocabulary": 13,  # <pad>, <unk> and 11 words
        "majority_baseline": 0.35,
        "glove_found": 3,
    }
    (row,) = report["runs"]
    assert row["units"] == 30 and row["model"] == "gru"  # the GRU's paper size, H + 26
    assert len(row["dev_accuracy_by_epoch"]) == 2 == len(row["train_loss_by_epoch"])
    assert row["best_dev_accuracy"] == max(row["dev_accuracy_by_epoch"])
    assert row["best_epoch"] == 1 + row["dev_accuracy_by_epoch"].index(row["best_dev_accuracy"])
    assert 0 <= row["test_accuracy"] <= 1 and row["parameters_without_embeddings"] > 0
    assert report["summary"][0]["test"] == f"{row['test_accuracy']:.4f}"
    assert json.loads(results.read_text()) == report
    # The same settings again: the row is kept, nothing is trained.
    monkeypatch.setattr(snli_real_data, "run", None)
    assert snli_real_data.main([*argv, "--batch-size", "12", "--results", str(results)]) == report


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
    dual, gru = seq2seq.summarise(runs)
    assert (dual["model"], gru["model"]) == (seq2seq.MODELS["dual_am_gru"], seq2seq.MODELS["gru"])
    assert dual["seeds"] == 2 and dual["test_perplexity"] == "3.00 ± 1.00"
    assert dual["key_similarity"] == "0.70 ± 0.10" and dual["read_last"] == "0.25 ± 0.00"
    assert dual["decoded_exact_match"] == "0.000 ± 0.000"
    assert gru["test_perplexity"] == "3.00" and gru["key_similarity"] == ""
    summary = seq2seq.summarise([_row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)])
    text = seq2seq.findings(summary)
    assert "0.00 untrained and 0.80 trained" in text
    assert "last word in 0.25 of its steps and at the word it predicts in 0.50" in text
    assert "(the attention decoder's weights: 0.50 at that word)" in text
    assert seq2seq.findings(summary[1:]) == ""


def test_the_figure_needs_both_memories_and_is_drawn_from_the_first_seed(tmp_path):
    path = tmp_path / "figure.png"
    assert seq2seq.draw_figure([_row("dual_am_gru", 0, 2.0, 0.8)], path) is None
    runs = [_row("attention", 1, 2.0), _row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)]
    assert seq2seq.draw_figure(runs, path) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_corpus_has_its_defaults_and_results_file():
    generated = seq2seq.parse_args([])
    assert generated.seeds == [0, 1, 2] and generated.epochs == 20
    assert generated.results.name == "seq2seq_autoencoding.json"
    ptb = seq2seq.parse_args(["--corpus", "ptb", "--epochs", "3"])
    assert ptb.seeds == [0] and ptb.results.name == "seq2seq_autoencoding_ptb.json"
    assert ptb.example_arguments == ["--max-length", "15", "--max-train", "10000", "--epochs", "3"]


def test_held_out_split_is_fixed_and_disjoint():
    sentences = [f"s{i}" for i in range(50)]
    kept, held = last_word.split_held_out(sentences, 0.1)
    assert len(held) == 5 and len(kept) == 45 and not set(kept) & set(held)
    assert last_word.split_held_out(sentences, 0.1) == (kept, held)


def test_every_seed_stops_at_its_patience_and_a_rerun_skips_finished_runs(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    words = "the a cat dog sat ran on under mat rug red blue".split()
    (tmp_path / "pwkp_gaffney").mkdir()
    for name, count in (("test.txt", 60), ("dev.txt", 20)):
        lines = [" ".join(rng.choice(words, size=6)) + " ." for _ in range(count)]
        (tmp_path / "pwkp_gaffney" / name).write_text("\n".join(lines) + "\n")
    (tmp_path / "glove_subset").mkdir()
    vectors = {word: rng.normal(size=4).round(3).tolist() for word in words[:6]}
    (tmp_path / "glove_subset" / "glove-50d-5k.json").write_text(json.dumps(vectors))
    monkeypatch.setattr(last_word, "RUNS", tmp_path / "runs")
    argv = ["--data-dir", str(tmp_path), "--results", str(tmp_path / "results.json")]
    argv += "--max-epochs 3 --patience 1 --held-out 0.2 --batch-size 16".split()
    argv += "--seeds 0 1 --variants 0 2".split()
    report = last_word.main(argv)
    runs = report["runs"]
    assert [(run["model"], run["seed"]) for run in runs] == [
        ("no attention", 0),
        ("attention + cache 1,000", 0),
        ("no attention", 1),
        ("attention + cache 1,000", 1),
    ]
    assert report["data"]["held_out_sentences"] == 12 and report["data"]["glove_rows"] == 6
    assert report["data"]["dev_sentences"] == 20 and report["data"]["train_sentences"] == 48
    for run in runs:
        held = run["held_out_accuracy"]
        assert len(held) == run["epochs_trained"] <= 3
        assert held[run["best_epoch"] - 1] == max(held)
        if run["epochs_trained"] < 3:  # stopped by patience: no better epoch after the best
            assert run["epochs_trained"] - run["best_epoch"] == 1
        assert 0 <= run["dev_accuracy"] <= 100
    rows = last_word.table_rows(runs)
    assert [row["model"] for row in rows] == ["no attention", "attention + cache 1,000"]
    accuracy = [run["dev_accuracy"] for run in runs[::2]]
    assert rows[0]["dev_accuracy"] == f"{np.mean(accuracy):.2f} ± {np.std(accuracy):.2f}"
    assert rows[0]["per_seed"] == ", ".join(f"{a:.2f}" for a in accuracy)
    minutes = (runs[0]["train_seconds"] + runs[2]["train_seconds"]) / 120
    assert rows[0]["train_minutes"] == round(minutes, 1)
    assert last_word.table_rows(runs[:1])[0]["dev_accuracy"] == f"{accuracy[0]:.2f}"  # one seed
    monkeypatch.setattr(last_word, "run", lambda *a, **k: pytest.fail("retrained"))
    assert last_word.main(argv)["runs"] == runs
