"""The paper benchmarks: their results files (`benchmarks/results_file.py`) and driver, their
options, their tables and figures, and tiny runs through the examples (the real runs are long)."""

import json

import numpy as np
import pytest

from benchmarks import results_file
from benchmarks.papers import fill_last_word_real_data as last_word
from benchmarks.papers import lm_equal_budget as lm
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
    runs = [{"model": "lstm", "seed": 0}, {"model": "gru", "seed": 0, "accuracy": 0.6}]
    assert stored["runs"] == runs
    with pytest.raises(SystemExit, match="No results file at .*missing.json"):
        results_file.read_or_exit(tmp_path / "missing.json")


def test_stored_rows_are_kept_only_with_the_same_settings_and_missing_keys_in_order(tmp_path):
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
    # The missing keys keep their order, once each, and skip the finished rows.
    results = ResultsFile("unused.json", {}, key=("variant", "seed"))
    report = {"runs": [{"variant": "dot", "seed": 0, "epochs": 2}, {"variant": "none", "seed": 1}]}
    wanted = [(v, s) for s in (0, 1, 1) for v in ("none", "dot")]
    assert results.missing(report, wanted) == [("none", 0), ("dot", 1)]
    finished = lambda row: row.get("epochs", 4) >= 4  # noqa: E731
    assert results.missing(report, wanted, finished) == [("none", 0), ("dot", 0), ("dot", 1)]
    one_field = ResultsFile("unused.json", {}, rows="rows", key=("model",))
    assert one_field.key_of({"model": "lstm", "seed": 3}) == "lstm"
    assert one_field.missing({"rows": [{"model": "lstm"}]}, ["lstm", "ngram"]) == ["ngram"]


def test_a_benchmark_resumes_renders_and_writes_its_block_when_asked(tmp_path, monkeypatch):
    benchmark = load_script("benchmarks/papers", "fill_last_word_generated")
    trained, written = [], []

    def fake_run(key, seed, args):
        trained.append((key, seed))
        row = dict(variant=key, model=benchmark.VARIANTS[key][0], seed=seed, eval_accuracy=seed)
        return row | dict(eval_majority_baseline=0.125, eval_attention_on_fact=seed or None)

    monkeypatch.setattr(benchmark, "run", fake_run)
    monkeypatch.setattr(benchmark, "write_docs_table", written.append)
    path = tmp_path / "results.json"
    argv = ["--results", str(path), "--variants", "no-cache", "dot", "--seeds", "0", "1"]
    pytest.raises(SystemExit, benchmark.main, [*argv, "--from-results"]).match("No results file")
    report = benchmark.main(argv)
    assert trained == [("no-cache", 0), ("dot", 0), ("no-cache", 1), ("dot", 1)]
    assert json.loads(path.read_text()) == report and written == []
    assert list(report) == ["settings", "runs", "summary"]
    assert report["settings"] == {"example_arguments": []}
    assert [row["accuracy"] for row in report["summary"]] == ["0.500 ± 0.500"] * 2
    assert report["summary"][0]["attention_on_fact"] == ""  # a seed without a read weight
    assert benchmark.main([*argv, "--from-results", "--update-docs"]) == report == written[0]
    trained.clear()
    rerun = benchmark.main(argv + ["--seeds", "1", "2", "--update-docs"])
    assert rerun["runs"][:4] == report["runs"]
    assert trained == [("no-cache", 2), ("dot", 2)] and len(written[1]["runs"]) == 6
    # Other settings of the example: the stored runs are dropped.
    trained.clear()
    report = benchmark.main(argv + ["--epochs", "3"])
    assert report["settings"] == {"example_arguments": ["--epochs", "3"]}
    assert len(trained) == 4 and len(report["runs"]) == 4


BAD_OPTIONS = dict(
    lm_equal_budget="--max-epochs 0|--dropout 1|--patience x|--units -3|--models gru",
    snli_real_data="--learning-rate nan|--units 0|--models lstm|--seeds -1|--patience 0",
    seq2seq_autoencoding="--epochs 0|--models lstm|--seeds -1|--corpus x",
    fill_last_word_real_data="--max-epochs 0|--batch-size -4|--held-out 1|--variants 4",
    fill_last_word_generated="--epochs 0|--variants lstm",
)


@pytest.mark.parametrize(
    "name, argv", [(n, a) for n, options in BAD_OPTIONS.items() for a in options.split("|")]
)
def test_a_bad_option_is_one_line_naming_it_and_status_2(name, argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_script("benchmarks/papers", name).parse_args(argv.split())
    (line,) = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and f"error: argument {argv.split()[0]}" in line


def test_a_tiny_run_writes_its_row_and_resumes(tmp_path, monkeypatch):
    data = tmp_path / "data" / "snli" / "esnli_infersent_format"
    data.mkdir(parents=True)
    colours, labels = "red blue green black white".split(), "entailment neutral contradiction"
    # Line i of each file: the premise, the hypothesis and the label.
    files = dict(s1=("a {} cat sleeps .", colours), s2=("the cat is {} .", colours[:3]))
    files["labels"] = ("{}", labels.split())
    for split, count in (("dev", 40), ("test", 20)):
        for name, (line, words) in files.items():
            text = "".join(line.format(words[i % len(words)]) + "\n" for i in range(count))
            (data / f"{name}.{split}").write_text(text)
    glove = tmp_path / "glove.json"
    glove.write_text(json.dumps({word: [0.1, 0.2, 0.3] for word in ["cat", "red", "the"]}))
    monkeypatch.setattr(snli_real_data, "DATA", tmp_path / "data")
    monkeypatch.setattr(snli_real_data, "GLOVE", glove)
    monkeypatch.setattr(snli_real_data, "RUNS", tmp_path / "runs")
    results = tmp_path / "results.json"
    argv = ["--models", "gru", "--seeds", "1", "--epochs", "3", "--units", "4", "--verbose", "0"]
    argv += ["--patience", "1"]
    report = snli_real_data.main([*argv, "--batch-size", "12", "--results", str(results)])
    # Vocabulary: <pad>, <unk> and 11 words.
    data = dict(train=36, held_out_dev=4, test=20, vocabulary=13, majority_baseline=0.35)
    assert report["data"] == data | {"glove_found": 3}
    (row,) = report["runs"]
    assert row["units"] == 30 and row["model"] == "gru"  # the GRU's paper size, H + 26
    dev = row["dev_accuracy_by_epoch"]
    assert len(dev) == len(row["train_loss_by_epoch"]) in (2, 3)
    # The example's stopping rule (one epoch without a 0.001 improvement) ended it or not.
    assert row["stopped_by_rule"] == (len(dev) == 2) == (dev[1] - 1e-3 <= dev[0])
    assert row["best_dev_accuracy"] == max(row["dev_accuracy_by_epoch"])
    assert row["best_epoch"] == 1 + row["dev_accuracy_by_epoch"].index(row["best_dev_accuracy"])
    assert 0 <= row["test_accuracy"] <= 1 and row["parameters_without_embeddings"] > 0
    assert report["summary"][0]["test"] == f"{row['test_accuracy']:.4f}"
    assert json.loads(results.read_text()) == report
    # The same settings again: the row is kept, nothing is trained.
    monkeypatch.setattr(snli_real_data, "run", None)
    assert snli_real_data.main([*argv, "--batch-size", "12", "--results", str(results)]) == report


def _row(model, seed, perplexity, key_similarity=None):  # a row of the auto-encoding runs
    heatmap = {"matrix": np.eye(4, 3).tolist(), "source": [*"abc"], "decoder_input": [*"sabc"]}
    memory = {} if model == "gru" else {"read_aligned": 0.5, "read_last": 0.25}
    memory.update({} if key_similarity is None else {"key_similarity": key_similarity})
    before = {"key_similarity": 0.0} if key_similarity else {}
    scores = dict(test_perplexity=perplexity, test_word_accuracy=0.5, decoded_exact_match=0.0)
    scores.update(decoded_word_accuracy=0.25, memory_before_training=before, memory=memory)
    heatmap = None if model == "gru" else heatmap
    return dict(scores, model=model, seed=seed, parameters=100, probe_heatmap=heatmap)


def test_a_summary_row_per_model_of_the_seeds_mean_and_spread_a_figure_and_defaults(tmp_path):
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
    # The figure needs both memories and is drawn from the first seed.
    path = tmp_path / "figure.png"
    assert seq2seq.draw_figure([_row("dual_am_gru", 0, 2.0, 0.8)], path) is None
    runs = [_row("attention", 1, 2.0), _row("dual_am_gru", 0, 2.0, 0.8), _row("attention", 0, 2.0)]
    assert seq2seq.draw_figure(runs, path) == path and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each corpus has its defaults and results file.
    generated = seq2seq.parse_args([])
    assert generated.seeds == [0, 1, 2] and generated.epochs == 20
    assert generated.results.name == "seq2seq_autoencoding.json"
    ptb = seq2seq.parse_args(["--corpus", "ptb", "--epochs", "3"])
    assert ptb.seeds == [0] and ptb.results.name == "seq2seq_autoencoding_ptb.json"
    assert ptb.example_arguments == ["--max-length", "15", "--max-train", "10000", "--epochs", "3"]


def test_every_seed_stops_at_its_patience_and_a_rerun_skips_finished_runs(tmp_path, monkeypatch):
    kept, held = last_word.split_held_out(sentences := [f"s{i}" for i in range(50)], 0.1)
    assert len(held) == 5 and len(kept) == 45 and not set(kept) & set(held)
    assert last_word.split_held_out(sentences, 0.1) == (kept, held)  # the same split each time
    rng, words = np.random.default_rng(3), "the a cat dog sat ran on under mat rug red blue".split()
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
    runs, models = report["runs"], ["no attention", "attention + cache 1,000"]
    assert [(run["model"], run["seed"]) for run in runs] == [(m, s) for s in (0, 1) for m in models]
    assert report["data"]["held_out_sentences"] == 12 and report["data"]["glove_rows"] == 6
    assert report["data"]["dev_sentences"] == 20 and report["data"]["train_sentences"] == 48
    for run in runs:
        held = run["held_out_accuracy"]
        assert len(held) == run["epochs_trained"] <= 3 and held[run["best_epoch"] - 1] == max(held)
        if run["epochs_trained"] < 3:  # stopped by patience: no better epoch after the best
            assert run["epochs_trained"] - run["best_epoch"] == 1
        assert 0 <= run["dev_accuracy"] <= 100
    rows = last_word.table_rows(runs)
    assert [row["model"] for row in rows] == models
    accuracy = [run["dev_accuracy"] for run in runs[::2]]
    assert rows[0]["dev_accuracy"] == f"{np.mean(accuracy):.2f} ± {np.std(accuracy):.2f}"
    assert rows[0]["per_seed"] == ", ".join(f"{a:.2f}" for a in accuracy)
    minutes = (runs[0]["train_seconds"] + runs[2]["train_seconds"]) / 120
    assert rows[0]["train_minutes"] == round(minutes, 1)
    assert last_word.table_rows(runs[:1])[0]["dev_accuracy"] == f"{accuracy[0]:.2f}"  # one seed
    monkeypatch.setattr(last_word, "run", lambda *a, **k: pytest.fail("retrained"))
    assert last_word.main(argv)["runs"] == runs


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A tiny WikiText-2 under ``tmp_path/data``, the results and the results page under
    ``tmp_path``; returns the command line of a tiny run."""
    folder = tmp_path / "data" / "wikitext2"
    folder.mkdir(parents=True)
    words = "the cat sat on a mat and the dog ran".split()
    for split in ("train", "valid", "test"):
        lines = []
        for title in ("One", "Two", "Three"):
            lines += [" ", f" = {title} = ", " "] + [f" {' '.join(words)} "] * 3
        (folder / f"wiki.{split}.tokens").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(lm, "RESULTS", tmp_path)
    page = tmp_path / "results.rst"
    page.write_text("".join(f".. {s} GENERATED: lm-equal-budget-ptb\n\n" for s in ("BEGIN", "END")))
    update = lm.update_docs
    monkeypatch.setattr(lm, "update_docs", lambda *a, **k: update(*a, page=page, **k))
    options = "--corpus wikitext2 --units 8 --embedding-dim 8 --batch-size 2 --sequence-length 5"
    paths = dict(data_root="data", workdir="runs", figures_dir="docs")
    paths = [x for k, v in paths.items() for x in (f"--{k.replace('_', '-')}", str(tmp_path / v))]
    return [*options.split(), *paths, "--verbose", "0", "--window", "3"]


def test_the_stopping_rules_are_no_model_settings_and_a_higher_cap_reopens_a_capped_row(tmp_path):
    args = lm.parse_args(["--results", str(tmp_path / "r.json"), "--max-epochs", "15"])
    path, settings = args.results, lm.results_of(args).settings
    path.write_text(json.dumps({"settings": settings, "rows": [{"model": "lstm"}]}))
    # A new cap or patience reads the same rows, another dropout does not.
    raised = lm.parse_args(["--results", str(path), "--max-epochs", "40", "--patience", "3"])
    assert lm.results_of(raised).stored()["rows"] == [{"model": "lstm"}]
    other = lm.parse_args(["--results", str(path), "--dropout", "0.5"])
    assert lm.results_of(other).stored() is None
    patience = {"epochs_trained": 9, "best_epoch": 7}  # stopped by patience 2
    capped = {"epochs_trained": 15, "best_epoch": 14}
    assert (lm.stopped_by(patience, 2), lm.stopped_by(capped, 2)) == ("patience", "cap")
    assert lm.finished(patience, args) and lm.finished(capped, args)
    raised = lm.parse_args(["--max-epochs", "40"])
    assert lm.finished(patience, raised) and not lm.finished(capped, raised)


def test_the_table_gives_each_model_its_gain_over_a_comparable_lstm():
    settings = {"patience": 2, "max_epochs": 40}
    run = {"epochs_trained": 20, "best_epoch": 18}  # ended by the stopping rule
    rows = [
        {"model": "attention", "test_perplexity": 109.87, **run},
        {"model": "lstm", "test_perplexity": 124.74, "epochs_trained": 40, "best_epoch": 39},
        {"model": "ngram", "test_perplexity": 130.0, **run},
    ]
    gains = lm.with_gain_over_lstm(rows, settings)
    assert [row["test_below_lstm"] for row in gains] == [14.9, None, -5.3]
    assert lm.notes(rows, gains) == ""
    # A row kept from a run capped at 15 epochs is not compared with this run's LSTM ...
    rows.append(dict(model="key_value", test_perplexity=115.0, epochs_trained=15, best_epoch=15))
    gains = lm.with_gain_over_lstm(rows, settings)
    assert gains[-1]["test_below_lstm"] is None
    assert lm.notes(rows, gains) == (
        " Stopped by an epoch cap with their last epoch the best, so still improving: "
        "key_value (15 epochs). No gain over the LSTM is given where an epoch cap ended the "
        "model and the LSTM after different numbers of epochs: key_value."
    )
    # ... but with an LSTM that the same cap stopped.
    rows[1] |= {"epochs_trained": 15, "best_epoch": 15}
    gains = [row["test_below_lstm"] for row in lm.with_gain_over_lstm(rows, settings)]
    assert gains == [None, None, None, 9.7]


def test_a_run_trains_through_the_example_resumes_and_writes_its_block(tiny, tmp_path, monkeypatch):
    argv = [*tiny, "--models", "lstm", "attention", "--max-epochs", "1"]
    report = lm.main([*argv, "--update-docs"])
    lstm, attention = report["rows"]
    assert (lstm["model"], lstm["hidden"], attention["model"]) == ("lstm", 8, "attention")
    assert abs(attention["parameters"] - lstm["parameters"]) < 0.1 * lstm["parameters"]
    assert len(attention["attention_by_position"]) == 3 and lstm["epochs_trained"] == 1
    run_dir = tmp_path / "runs/lm_equal_budget/wikitext2/lstm"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["valid_perplexity"] == pytest.approx(lstm["valid_perplexity"], abs=0.01)
    for name in ("valid", "attention"):
        assert (tmp_path / "docs" / f"lm_equal_budget_wikitext2_{name}.png").stat().st_size
    block = (tmp_path / "results.rst").read_text().split("END GENERATED: lm-equal-budget-ptb")[1]
    assert block.index("BEGIN GENERATED: lm-equal-budget-wikitext2") < block.index("WikiText-2")
    assert "reset at the start of every article" in block
    assert ".. image:: images/lm_equal_budget_wikitext2_attention.png" in block
    # A rerun with the same settings trains nothing (the run directories moved away): the rows
    # are read back. A higher cap continues the capped LSTM from its run directory (that the
    # example then ends as if never stopped: examples/language_modeling/main_test.py).
    (tmp_path / "runs").rename(tmp_path / "moved")
    assert lm.main(argv)["rows"] == report["rows"] and not (tmp_path / "runs").exists()
    (tmp_path / "moved").rename(tmp_path / "runs")
    ran, run_example = [], lm.run_example
    monkeypatch.setattr(lm, "run_example", lambda *a: ran.append(run_example(*a)) or ran[-1])
    rows = lm.main([*tiny, "--models", "lstm", "--max-epochs", "2"])["rows"]
    (continued,) = [row for row in rows if row["model"] == "lstm"]
    assert continued["epochs_trained"] == 2 and [m["epochs_run_now"] for m in ran] == [1]
    assert continued["history"][0] == lstm["history"][0]
