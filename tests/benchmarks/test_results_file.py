"""The paper benchmarks' results files (`benchmarks/results_file.py`) and their driver, through
the generated last-word benchmark."""

import json

import pytest

from benchmarks import results_file
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

    monkeypatch.setattr(benchmark, "run", fake_run)
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
