"""The paper benchmarks' results-file driver (`benchmarks/results_file.py`)."""

import argparse
import doctest
import importlib
import json
import sys

import pytest

from tests.support import REPO_ROOT, load_script

sys.path.insert(0, str(REPO_ROOT))
try:
    results_file = importlib.import_module("benchmarks.results_file")
finally:
    sys.path.remove(str(REPO_ROOT))

ResultsFile = results_file.ResultsFile


def test_docstring_example_runs():
    result = doctest.testmod(results_file)
    assert result.attempted and not result.failed


def test_a_run_without_a_file_starts_empty_and_writes_after_every_row(tmp_path):
    path = tmp_path / "new" / "folder" / "results.json"  # the folders do not exist yet
    results = ResultsFile(path, {"epochs": 2, "units": [8, 8]})
    assert results_file.read(path) is None and results.stored() is None
    report = results.resume()
    assert report == {"settings": {"epochs": 2, "units": [8, 8]}, "runs": []}
    results.add(report, {"model": "gru", "seed": 0, "accuracy": 0.5})
    text = path.read_text()
    assert text == json.dumps(report, indent=1) + "\n"
    assert list(json.loads(text)) == ["settings", "runs"]
    results.add(report, {"model": "gru", "seed": 1, "accuracy": 0.6})
    assert [row["seed"] for row in json.loads(path.read_text())["runs"]] == [0, 1]


def test_stored_rows_are_kept_only_with_the_same_settings(tmp_path):
    path = tmp_path / "results.json"
    first = ResultsFile(path, {"epochs": 2})
    report = first.resume()
    report["data"] = {"train": 10}
    first.add(report, {"model": "gru", "seed": 0})

    again = ResultsFile(path, {"epochs": 2}).resume()
    assert again == {
        "settings": {"epochs": 2},
        "runs": [{"model": "gru", "seed": 0}],
        "data": {"train": 10},
    }
    assert ResultsFile(path, {"epochs": 2}).kept_rows() == [{"model": "gru", "seed": 0}]
    other = ResultsFile(path, {"epochs": 3})
    assert other.stored() is None and other.kept_rows() == []
    assert other.resume() == {"settings": {"epochs": 3}, "runs": []}
    fresh = {"corpus": "ptb", "settings": {"epochs": 3}, "runs": []}
    assert other.resume(fresh=fresh) is fresh
    # Resuming does not write: the file still holds the first run's row.
    assert json.loads(path.read_text())["runs"] == [{"model": "gru", "seed": 0}]


def test_settings_left_out_of_the_comparison_keep_the_rows_and_are_updated(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps({"settings": {"dropout": 0.4, "max_epochs": 15}, "rows": [{"model": "lstm"}]})
    )

    def compared(settings):
        return {k: v for k, v in settings.items() if k != "max_epochs"}

    raised = ResultsFile(
        path, {"dropout": 0.4, "max_epochs": 40}, rows="rows", key=("model",), compared=compared
    )
    report = raised.resume()
    assert report["rows"] == [{"model": "lstm"}]
    assert report["settings"] == {"dropout": 0.4, "max_epochs": 40}
    changed = ResultsFile(
        path, {"dropout": 0.5, "max_epochs": 15}, rows="rows", key=("model",), compared=compared
    )
    assert changed.stored() is None


def test_missing_keys_keep_their_order_once_each_and_skip_finished_rows():
    results = ResultsFile("unused.json", {}, key=("variant", "seed"))
    report = {
        "runs": [
            {"variant": "dot", "seed": 0, "epochs": 2},
            {"variant": "none", "seed": 1, "epochs": 4},
        ]
    }
    wanted = [(v, s) for s in (0, 1, 1) for v in ("none", "dot")]
    assert results.missing(report, wanted) == [("none", 0), ("dot", 1)]
    assert results.missing(report, wanted, finished=lambda row: row["epochs"] >= 4) == [
        ("none", 0),
        ("dot", 0),
        ("dot", 1),
    ]
    one_field = ResultsFile("unused.json", {}, rows="rows", key=("model",))
    assert one_field.key_of({"model": "lstm", "seed": 3}) == "lstm"
    assert one_field.missing({"rows": [{"model": "lstm"}]}, ["lstm", "ngram"]) == ["ngram"]


def test_a_new_row_replaces_the_row_with_its_key_and_goes_last(tmp_path):
    path = tmp_path / "results.json"
    results = ResultsFile(path, {}, rows="rows", key=("model",))
    report = {"settings": {}, "rows": [{"model": "lstm", "epochs": 1}, {"model": "ngram"}]}
    results.add(report, {"model": "lstm", "epochs": 2})
    assert report["rows"] == [{"model": "ngram"}, {"model": "lstm", "epochs": 2}]
    assert json.loads(path.read_text()) == report


def test_the_summary_of_the_rows_is_written_with_them(tmp_path):
    path = tmp_path / "results.json"
    results = ResultsFile(path, {}, summarise=lambda runs: [len(runs)])
    report = results.resume()
    results.add(report, {"model": "gru", "seed": 0})
    results.add(report, {"model": "gru", "seed": 1})
    assert json.loads(path.read_text())["summary"] == [2] == report["summary"]


def test_rendering_without_a_results_file_exits_with_one_line(tmp_path):
    with pytest.raises(SystemExit, match="No results file at .*missing.json"):
        results_file.read_or_exit(tmp_path / "missing.json")
    (tmp_path / "stored.json").write_text('{"runs": []}')
    assert results_file.read_or_exit(tmp_path / "stored.json") == {"runs": []}


def test_rendering_and_finishing_write_the_docs_only_when_asked(tmp_path):
    path = tmp_path / "results.json"
    results = ResultsFile(path, {"epochs": 1}, summarise=len)
    report = results.resume()
    written = []
    report["runs"].append({"model": "gru", "seed": 0})  # not yet in the file
    assert results.finish(report) is report and written == []
    assert json.loads(path.read_text()) == {
        "settings": {"epochs": 1},
        "runs": [{"model": "gru", "seed": 0}],
        "summary": 1,
    }
    results.finish(report, written.append)
    assert written == [report]
    assert results_file.render(path) == report and len(written) == 1
    assert results_file.render(path, written.append) == report and written[-1] == report


def test_results_options_name_the_file_and_the_rendering(tmp_path):
    parser = results_file.add_results_options(argparse.ArgumentParser(), tmp_path / "r.json")
    args = parser.parse_args([])
    assert args.results == tmp_path / "r.json" and args.from_results is False
    args = parser.parse_args(["--results", "other.json", "--from-results"])
    assert str(args.results) == "other.json" and args.from_results


def test_generated_last_word_benchmark_resumes_its_runs_through_the_file(tmp_path, monkeypatch):
    benchmark = load_script("benchmarks/papers", "fill_last_word_generated")
    trained = []

    def fake_run(key, seed, args):
        trained.append((key, seed))
        attention = None if key == "no-cache" else 0.5
        return {
            "variant": key,
            "model": benchmark.VARIANTS[key][0],
            "seed": seed,
            "eval_accuracy": 0.25 + seed / 10,
            "eval_majority_baseline": 0.125,
            "eval_attention_on_fact": attention,
        }

    monkeypatch.setattr(benchmark, "run", fake_run)
    path = tmp_path / "results.json"
    argv = ["--results", str(path), "--variants", "no-cache", "dot", "--seeds", "0", "1"]
    report = benchmark.main(argv)
    assert trained == [("no-cache", 0), ("dot", 0), ("no-cache", 1), ("dot", 1)]
    assert json.loads(path.read_text()) == report
    assert list(report) == ["settings", "runs", "summary"]
    assert report["settings"] == {"example_arguments": []}
    assert [row["accuracy"] for row in report["summary"]] == ["0.300 ± 0.050"] * 2

    trained.clear()
    assert benchmark.main(argv + ["--seeds", "1", "2"])["runs"][:4] == report["runs"]
    assert trained == [("no-cache", 2), ("dot", 2)]
    # Other settings of the example: the stored runs are dropped.
    trained.clear()
    report = benchmark.main(argv + ["--epochs", "3"])
    assert report["settings"] == {"example_arguments": ["--epochs", "3"]}
    assert len(trained) == 4 and len(report["runs"]) == 4
