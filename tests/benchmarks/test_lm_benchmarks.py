"""The language-model benchmark (benchmarks/papers/lm_equal_budget.py): its tables' arithmetic,
and tiny runs through the language-model example (the real runs are long)."""

import json
import re

import pytest

from tests.support import load_script

lm = load_script("benchmarks/papers", "lm_equal_budget")


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
    blocks = ("lm-equal-budget-ptb", "lm-real-data", "lm-reproduction")
    page.write_text("".join(f".. {s} GENERATED: {b}\n\n" for b in blocks for s in ("BEGIN", "END")))
    update = lm.update_docs
    monkeypatch.setattr(lm, "update_docs", lambda *a, **k: update(*a, page=page, **k))
    options = "--corpus wikitext2 --units 8 --embedding-dim 8 --batch-size 2 --sequence-length 5"
    paths = dict(data_root="data", workdir="runs", figures_dir="docs")
    paths = [x for k, v in paths.items() for x in (f"--{k.replace('_', '-')}", str(tmp_path / v))]
    return [*options.split(), *paths, "--verbose", "0", "--window", "3"]


def test_results_are_kept_only_with_the_same_model_settings(tmp_path):
    args = lm.parse_args(["--results", str(tmp_path / "r.json"), "--max-epochs", "15"])
    path, settings = args.results, lm.results_of(args).settings
    path.write_text(json.dumps({"settings": settings, "rows": [{"model": "lstm"}]}))
    # The stopping rules are not model settings: a new cap or patience reads the same rows.
    raised = lm.parse_args(["--results", str(path), "--max-epochs", "40", "--patience", "3"])
    assert lm.results_of(raised).stored()["rows"] == [{"model": "lstm"}]
    assert (
        lm.results_of(lm.parse_args(["--results", str(path), "--dropout", "0.5"])).stored() is None
    )


def test_a_row_says_whether_patience_or_the_cap_stopped_it_and_a_higher_cap_reopens_it():
    patience, capped = (
        {"epochs_trained": 9, "best_epoch": 7},
        {"epochs_trained": 15, "best_epoch": 14},
    )
    assert (lm.stopped_by(patience, 2), lm.stopped_by(capped, 2)) == ("patience", "cap")
    args = lm.parse_args(["--max-epochs", "15"])
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


def test_a_run_trains_through_the_example_resumes_and_writes_its_block(tiny, tmp_path):
    argv = [*tiny, "--models", "lstm", "attention", "--max-epochs", "1"]
    report = lm.main([*argv, "--update-docs"])
    lstm, attention = report["rows"]
    assert (lstm["model"], lstm["hidden"], attention["model"]) == ("lstm", 8, "attention")
    assert abs(attention["parameters"] - lstm["parameters"]) < 0.1 * lstm["parameters"]
    assert len(attention["attention_by_position"]) == 3 and lstm["epochs_trained"] == 1
    metrics = json.loads(
        (tmp_path / "runs/lm_equal_budget/wikitext2/lstm/metrics.json").read_text()
    )
    assert metrics["valid_perplexity"] == pytest.approx(lstm["valid_perplexity"], abs=0.01)
    for name in ("valid", "attention"):
        assert (tmp_path / "docs" / f"lm_equal_budget_wikitext2_{name}.png").stat().st_size
    block = (tmp_path / "results.rst").read_text().split("END GENERATED: lm-equal-budget-ptb")[1]
    assert block.index("BEGIN GENERATED: lm-equal-budget-wikitext2") < block.index("WikiText-2")
    assert "reset at the start of every article" in block
    assert ".. image:: images/lm_equal_budget_wikitext2_attention.png" in block
    # A rerun with the same settings trains nothing (the run directories moved away): the rows
    # are read back. A higher cap continues the capped LSTM from its run, as never stopped.
    (tmp_path / "runs").rename(tmp_path / "moved")
    assert lm.main(argv)["rows"] == report["rows"] and not (tmp_path / "runs").exists()
    (tmp_path / "moved").rename(tmp_path / "runs")
    (continued,) = [
        r for r in lm.main([*tiny, "--max-epochs", "2"])["rows"] if r["model"] == "lstm"
    ]
    elsewhere = ["--workdir", str(tmp_path / "straight"), "--results", str(tmp_path / "s.json")]
    (straight,) = lm.main([*tiny, "--models", "lstm", "--max-epochs", "2", *elsewhere])["rows"]
    assert continued["epochs_trained"] == 2 and continued["history"] == straight["history"]
    assert continued["test_perplexity"] == straight["test_perplexity"]


def test_the_other_modes_run_and_tabulate(tiny, tmp_path):
    # N epochs each: the ranking at equal training.
    report = lm.main([*tiny, "--models", "ngram", "--epochs", "1", "--update-docs"])
    (row,) = report["rows"]
    assert row["model"] == "ngram" and row["train_steps"] == report["batches_per_epoch"]
    page = (tmp_path / "results.rst").read_text()
    assert "after 1 epoch(s)" in page and "| ngram" in page
    # The cost of a run: the steps' medians add up to an epoch, beside the run's measured
    # minutes per epoch of the models it has finished.
    stored = lm.results_of(lm.parse_args(tiny), tmp_path / "lm_equal_budget_wikitext2.json")
    stored.write(
        {"settings": stored.settings, "rows": [dict(model="ngram", minutes=6.0, epochs_trained=4)]}
    )
    cost = lm.main([*tiny, "--cost", "--models", "lstm", "ngram", "--steps", "2", "--repeats", "3"])
    assert cost == json.loads((tmp_path / "lm_equal_budget_cost_wikitext2.json").read_text())
    for row in cost["rows"]:
        epoch = cost["train_batches"] * row["train_step_seconds"]
        epoch += cost["valid_batches"] * row["scoring_step_seconds"]
        assert row["epoch_minutes"] == pytest.approx(epoch / 60)
        assert row["max_epochs_hours"] == pytest.approx(40 * epoch / 3600)
        fastest, slowest = row["train_step_range"]
        assert fastest <= row["train_step_seconds"] <= slowest
    assert [row["measured_epoch_minutes"] for row in cost["rows"]] == [None, 1.5]
    ptb = cost | {"corpus": "ptb", "rows": [row | {"corpus": "ptb"} for row in cost["rows"]]}
    lm.write_cost_docs([ptb, cost])
    page = (tmp_path / "results.rst").read_text()
    block = page.split("BEGIN GENERATED: lm-equal-budget-cost")[1].split("END GENERATED")[0]
    assert page.index("END GENERATED: lm-equal-budget-ptb") < page.index("lm-equal-budget-cost")
    # Each table (a wide one is split, each part repeating the corpus and the model) lists the
    # two PTB rows, then the two WikiText-2 rows.
    tables = re.findall(r"^\+-.*?\+\n(?:[|+].*\n)+", block, re.MULTILINE)
    assert tables and all(t.count("| ptb ") == t.count("| wikitext2 ") == 2 for t in tables)
    assert all(t.rindex("| ptb ") < t.index("| wikitext2 ") for t in tables)
    # A preset's run: its metrics as the results file, its block from them.
    metrics = {"config": "zaremba-small", "model": "lstm", "parameters": 10, "epochs": 13}
    metrics |= {"last_epoch_train_perplexity": 40.34503, "valid_perplexity": 119.3779}
    metrics |= {"test_perplexity": 113.977, "train_tokens_per_epoch": 929588, "seconds": 6591.6}
    lm.write_docs(metrics)
    page = (tmp_path / "results.rst").read_text()
    assert "--config zaremba-small`` on Penn Treebank (929,588 training" in page
    assert "| zaremba-small | 40.35 " in page and "| 113.98 " in page
    assert "final invocation: 110 minutes" in page
