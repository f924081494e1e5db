"""The language-model benchmark scripts' own arithmetic (the runs themselves are long)."""

import json
import re

import h5py
import numpy as np
import pytest

from examples.language_modeling.parameter_budget import count_language_model_parameters
from tests.support import REPO_ROOT, load_script


def _load(name):
    """The benchmark script ``name``, from wherever it lives under benchmarks/."""
    (path,) = (REPO_ROOT / "benchmarks").rglob(f"{name}.py")
    return load_script(path.parent.relative_to(REPO_ROOT).as_posix(), name)


def test_real_data_report_keeps_rows_only_for_the_same_settings(tmp_path):
    real_data = _load("lm_real_data")
    settings = {"epochs": 1, "hidden": 200}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"settings": settings, "rows": [{"model": "lstm"}]}))
    assert real_data.saved_rows(str(path), settings) == [{"model": "lstm"}]
    assert real_data.saved_rows(str(path), dict(settings, epochs=2)) == []
    assert real_data.saved_rows(str(tmp_path / "missing.json"), settings) == []


def test_equal_budget_report_is_resumed_only_with_the_same_settings(tmp_path):
    equal_budget = _load("lm_equal_budget")
    settings = {"max_epochs": 15, "patience": 2, "dropout": 0.4}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"settings": settings, "rows": [{"model": "lstm"}]}))
    assert equal_budget.read_report(path, settings)["rows"] == [{"model": "lstm"}]
    assert equal_budget.read_report(path, dict(settings, dropout=0.5)) is None
    assert equal_budget.read_report(tmp_path / "missing.json", settings) is None
    # The stopping rules are not model settings: a new cap or patience reads the same report.
    stopping = dict(settings, max_epochs=40, patience=3)
    assert equal_budget.read_report(path, stopping)["rows"] == [{"model": "lstm"}]


def test_equal_budget_row_says_whether_patience_or_the_cap_stopped_it():
    equal_budget = _load("lm_equal_budget")
    args = equal_budget.parse_args(["--max-epochs", "15", "--patience", "2"])
    patience = {"epochs_trained": 9, "best_epoch": 7}
    capped = {"epochs_trained": 15, "best_epoch": 14}
    assert equal_budget.stopped_by(patience, 2) == "patience"
    assert equal_budget.stopped_by(capped, 2) == "cap"
    assert equal_budget.is_finished(patience, args) and equal_budget.is_finished(capped, args)
    # A higher cap reopens the capped model only.
    raised = equal_budget.parse_args(["--max-epochs", "40", "--patience", "2"])
    assert equal_budget.is_finished(patience, raised)
    assert not equal_budget.is_finished(capped, raised)


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_equal_budget_raising_the_cap_continues_a_model_as_if_never_stopped(tmp_path, monkeypatch):
    equal_budget = _load("lm_equal_budget")
    _tiny_wikitext(tmp_path / "data" / "wikitext2")
    evaluate, scored = equal_budget.evaluate_language_model, []

    def counting(*args, **kwargs):
        scored.append(None)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(equal_budget, "evaluate_language_model", counting)

    def run(name, cap):
        scored.clear()
        argv = _tiny_run_arguments(
            tmp_path,
            name,
            "--models",
            "lstm",
            "--max-epochs",
            cap,
            "--patience",
            "2",
            "--dropout",
            "0.5",
        )
        return equal_budget.main(argv)["rows"][0]

    straight = run("straight", "2")
    assert run("raised", "1")["epochs_trained"] == 1
    # Interrupted while continuing: the 1-epoch row stays in the results file.
    monkeypatch.setattr(equal_budget, "evaluate_language_model", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        run("raised", "2")
    rows = json.loads((tmp_path / "raised.json").read_text())["rows"]
    assert [row["epochs_trained"] for row in rows] == [1]
    monkeypatch.setattr(equal_budget, "evaluate_language_model", counting)
    continued = run("raised", "2")
    # One validation scoring (epoch 2), then the best weights on valid and test: epoch 1 was
    # read back from its checkpoint, not trained again.
    assert len(scored) == 3
    assert continued["history"] == straight["history"]
    assert continued["epochs_trained"] == 2
    assert continued["test_perplexity"] == straight["test_perplexity"]
    # Epoch 2 drew the dropout masks that follow epoch 1's, not epoch 1's again, so the
    # weights after it are the straight run's.
    straight_weights, continued_weights = (
        _arrays(tmp_path / name / "wikitext2" / "lstm" / "last.weights.h5")
        for name in ("straight", "raised")
    )
    assert straight_weights.keys() == continued_weights.keys() and len(straight_weights) > 3
    for name in straight_weights:
        np.testing.assert_array_equal(continued_weights[name], straight_weights[name], err_msg=name)


def test_equal_budget_widths_give_every_kind_the_lstm_parameter_count():
    equal_budget = _load("lm_equal_budget")
    args = equal_budget.parse_args(["--hidden", "20", "--embedding-dim", "10"])
    kinds = ("lstm", "key_value_predict", "ngram")
    widths = equal_budget.widths(100, kinds, args)
    common = dict(embedding_dim=10, window=args.window, ngram=args.ngram)
    budget = count_language_model_parameters(100, kind="lstm", units=20, **common)
    assert widths["lstm"] == 20
    for kind in kinds[1:]:
        multiple = 3 if kind == "key_value_predict" else args.ngram - 1
        counts = {
            hidden: count_language_model_parameters(100, kind=kind, units=hidden, **common)
            for hidden in (widths[kind] - multiple, widths[kind], widths[kind] + multiple)
        }
        assert min(counts, key=lambda h: abs(counts[h] - budget)) == widths[kind]


def test_equal_budget_caption_names_the_models_the_epoch_cap_stopped():
    equal_budget = _load("lm_equal_budget")
    rows = [
        {"model": "lstm", "epochs_trained": 15, "best_epoch": 15},  # capped, still improving
        {"model": "ngram", "epochs_trained": 9, "best_epoch": 7},  # stopped early
        {"model": "key_value", "epochs_trained": 15, "best_epoch": 13},  # capped, had stalled
    ]
    assert equal_budget.capped_note(rows).endswith("still improving: lstm (15 epochs).")
    assert equal_budget.capped_note(rows[1:]) == ""
    # A row kept from a run with a lower cap names its own number of epochs.
    rows.append({"model": "attention", "epochs_trained": 40, "best_epoch": 40})
    assert equal_budget.capped_note(rows).endswith(
        "still improving: lstm (15 epochs), attention (40 epochs)."
    )


def _tiny_wikitext(folder):
    folder.mkdir(parents=True)
    words = "the cat sat on a mat and the dog ran".split()
    for split in ("train", "valid", "test"):
        lines = []
        for title in ("One", "Two", "Three"):
            lines += [" ", f" = {title} = ", " "] + [f" {' '.join(words)} "] * 3
        (folder / f"wiki.{split}.tokens").write_text("\n".join(lines) + "\n")


def _tiny_run_arguments(tmp_path, name, *options):
    """Command line of a tiny equal-budget run on `_tiny_wikitext`, kept in ``name``."""
    return [
        "--corpus",
        "wikitext2",
        "--data-root",
        str(tmp_path / "data"),
        "--hidden",
        "8",
        "--embedding-dim",
        "8",
        "--batch-size",
        "2",
        "--seq-len",
        "5",
        "--verbose",
        "0",
        "--results",
        str(tmp_path / f"{name}.json"),
        "--workdir",
        str(tmp_path / name),
        "--figures-dir",
        str(tmp_path / "docs"),
        *options,
    ]


def _page_with_the_ptb_block(tmp_path, monkeypatch, benchmark):
    """A results page holding only the (empty) PTB block, which ``benchmark`` then writes to."""
    docs_tables = _load("docs_tables")
    page = tmp_path / "results.rst"
    page.write_text(
        "".join(f".. {side} GENERATED: lm-equal-budget-ptb\n" for side in ("BEGIN", "END"))
    )
    monkeypatch.setattr(
        benchmark,
        "update_docs",
        lambda *a, **k: docs_tables.update_docs(*a, page=page, **k),
    )
    return page


def test_equal_budget_run_on_wikitext2_checkpoints_resumes_and_writes_its_block(
    tmp_path, monkeypatch
):
    equal_budget = _load("lm_equal_budget")
    _tiny_wikitext(tmp_path / "data" / "wikitext2")
    argv = _tiny_run_arguments(
        tmp_path,
        "runs",
        "--models",
        "lstm",
        "attention",
        "--max-epochs",
        "1",
        "--probe-segments",
        "2",
    )
    report = equal_budget.main(argv)
    assert [row["model"] for row in report["rows"]] == ["lstm", "attention"]
    for kind in ("lstm", "attention"):  # checkpoints are kept apart per corpus
        state = json.loads((tmp_path / "runs" / "wikitext2" / kind / "state.json").read_text())
        assert state["settings"]["corpus"] == "wikitext2"
    assert len(report["rows"][1]["attention_by_position"]) == 5
    for name in ("valid", "attention"):
        assert (tmp_path / "docs" / f"lm_equal_budget_wikitext2_{name}.png").stat().st_size
    # A rerun with the same settings trains nothing: both rows are read back.
    (tmp_path / "runs" / "wikitext2").rename(tmp_path / "moved")
    assert (
        equal_budget.main(argv)["rows"] == json.loads((tmp_path / "runs.json").read_text())["rows"]
    )
    assert not (tmp_path / "runs" / "wikitext2").exists()

    page = _page_with_the_ptb_block(tmp_path, monkeypatch, equal_budget)
    equal_budget.write_docs(report)
    text = page.read_text()
    block = text[text.index(".. END GENERATED: lm-equal-budget-ptb") :]
    assert block.index("BEGIN GENERATED: lm-equal-budget-wikitext2") < block.index("WikiText-2")
    assert "reset at the start of every article" in block
    assert ".. image:: images/lm_equal_budget_wikitext2_attention.png" in block


def _arrays(weights_file):
    with h5py.File(weights_file, "r") as saved:
        arrays = {}
        saved.visititems(
            lambda name, item: (
                arrays.update({name: item[()]}) if isinstance(item, h5py.Dataset) else None
            )
        )
    return arrays


def test_equal_budget_table_gives_each_model_its_test_gain_over_the_lstm():
    equal_budget = _load("lm_equal_budget")
    settings = {"patience": 2, "max_epochs": 40}
    run = {"epochs_trained": 20, "best_epoch": 18}  # ended by the stopping rule
    rows = [
        {"model": "attention", "test_perplexity": 109.87, **run},
        {"model": "lstm", "test_perplexity": 124.74, "epochs_trained": 40, "best_epoch": 39},
        {"model": "ngram", "test_perplexity": 130.0, **run},
    ]
    gains = [row["test_below_lstm"] for row in equal_budget.with_gain_over_lstm(rows, settings)]
    assert gains == [14.9, None, -5.3]
    assert "test_below_lstm" not in rows[0]
    assert equal_budget.with_gain_over_lstm(rows[:1], settings)[0]["test_below_lstm"] is None
    assert equal_budget.different_caps_note(rows, settings) == ""
    # A row kept from a run capped at 15 epochs is not compared with the LSTM of this run...
    rows.append(
        {"model": "key_value", "test_perplexity": 115.0, "epochs_trained": 15, "best_epoch": 15}
    )
    assert equal_budget.with_gain_over_lstm(rows, settings)[-1]["test_below_lstm"] is None
    assert equal_budget.different_caps_note(rows, settings).endswith("epochs: key_value.")
    # ... but with an LSTM that the same cap stopped.
    rows[1] |= {"epochs_trained": 15, "best_epoch": 15}
    gains = [row["test_below_lstm"] for row in equal_budget.with_gain_over_lstm(rows, settings)]
    assert gains == [None, None, None, 9.7]


def test_cost_of_a_batch_leaves_out_the_compiling_call_and_divides_by_the_batches(monkeypatch):
    cost = _load("lm_equal_budget_cost")
    clock = {"now": 0.0, "calls": 0}

    def run(batches):  # the first call traces and compiles: slow, and must not be timed
        clock["now"] += 50.0 if clock["calls"] == 0 else 6.0 + clock["calls"]
        clock["calls"] += 1

    monkeypatch.setattr(cost.timing.time, "perf_counter", lambda: clock["now"])
    batches = cost.first_batches(_bptt_batches(num_batches=7), 3)
    assert batches.num_batches == 3 and batches.resets.shape[0] == 3
    # Timed calls take 7, 8 and 9 seconds for 3 batches.
    assert cost.seconds_per_batch(run, batches, repeats=3) == pytest.approx([7 / 3, 8 / 3, 3])
    assert clock["calls"] == 4


def _bptt_batches(num_batches):
    from examples.language_modeling.lm_batches import BPTTBatches

    tokens = np.zeros((num_batches, 2, 4), "int32")
    return BPTTBatches(
        tokens, tokens, np.ones((num_batches, 2, 4), "float32"), np.zeros((num_batches, 2), bool)
    )


def test_cost_estimate_adds_up_an_epoch_and_shows_the_run_measured_minutes(tmp_path, monkeypatch):
    cost = _load("lm_equal_budget_cost")
    equal_budget = _load("lm_equal_budget")
    _tiny_wikitext(tmp_path / "data" / "wikitext2")
    options = [
        "--corpus",
        "wikitext2",
        "--data-root",
        str(tmp_path / "data"),
        "--hidden",
        "8",
        "--embedding-dim",
        "8",
        "--batch-size",
        "2",
        "--seq-len",
        "5",
        "--max-epochs",
        "4",
        "--results",
        str(tmp_path / "runs.json"),
    ]
    args = equal_budget.parse_args(options)
    settings = {name: getattr(args, name) for name in equal_budget.SETTINGS}
    (tmp_path / "runs.json").write_text(
        json.dumps(
            {
                "settings": settings,
                "rows": [
                    {"model": "ngram", "minutes": 6.0, "epochs_trained": 4},
                ],
            }
        )
    )
    report = cost.main(
        options
        + [
            "--models",
            "lstm",
            "ngram",
            "--steps",
            "2",
            "--repeats",
            "3",
            "--output",
            str(tmp_path / "cost.json"),
        ]
    )
    assert report == json.loads((tmp_path / "cost.json").read_text())
    widths = equal_budget.widths(report["vocabulary"], ["lstm", "ngram"], args)
    for row in report["rows"]:
        assert row["hidden"] == widths[row["model"]]
        assert row["parameters"] == count_language_model_parameters(
            report["vocabulary"],
            kind=row["model"],
            units=row["hidden"],
            embedding_dim=8,
        )
        epoch_seconds = (
            report["train_batches"] * row["train_step_seconds"]
            + report["valid_batches"] * row["scoring_step_seconds"]
        )
        assert row["epoch_minutes"] == pytest.approx(epoch_seconds / 60)
        fastest, slowest = row["train_step_range"]
        assert fastest <= row["train_step_seconds"] <= slowest
        assert row["max_epochs_hours"] == pytest.approx(4 * epoch_seconds / 3600)
    assert [row["measured_epoch_minutes"] for row in report["rows"]] == [None, 1.5]

    page = _page_with_the_ptb_block(tmp_path, monkeypatch, cost)
    ptb = dict(report, corpus="ptb", rows=[dict(row, corpus="ptb") for row in report["rows"]])
    cost.write_docs([ptb, report])
    block = page.read_text().split(".. END GENERATED: lm-equal-budget-ptb")[1]
    assert block.index("BEGIN GENERATED: lm-equal-budget-cost") < block.index("| ngram")
    # Each table (a wide one is split in several, each repeating the corpus and model)
    # lists the two PTB rows, then the two WikiText-2 rows.
    tables = re.findall(r"^\+-.*?\+\n(?:[|+].*\n)+", block, re.MULTILINE)
    assert tables
    for table in tables:
        assert table.count("| ptb ") == table.count("| wikitext2 ") == 2
        assert table.rindex("| ptb ") < table.index("| wikitext2 ")
    assert "PTB (" in block and "WikiText-2 (" in block
