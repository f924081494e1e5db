"""The real-SNLI benchmark: its options, and a tiny run through the SNLI example that writes
its row and is resumed."""

import json

import pytest

from benchmarks.papers import snli_real_data as benchmark


@pytest.mark.parametrize(
    "argv,option",
    [(["--learning-rate", "nan"], "--learning-rate"), (["--units", "0"], "--units")]
    + [(["--models", "lstm"], "--models"), (["--seeds", "-1"], "--seeds")],
)
def test_a_bad_option_is_one_line_naming_it(capsys, argv, option):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.parse_args(argv)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"error: argument {option}: " in line


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
    monkeypatch.setattr(benchmark, "DATA", tmp_path / "data")
    monkeypatch.setattr(benchmark, "GLOVE", glove)
    monkeypatch.setattr(benchmark, "RUNS", tmp_path / "runs")
    results = tmp_path / "results.json"
    argv = ["--models", "gru", "--seeds", "1", "--epochs", "2", "--units", "4", "--verbose", "0"]
    report = benchmark.main([*argv, "--batch-size", "12", "--results", str(results)])
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
    monkeypatch.setattr(benchmark, "run", None)
    assert benchmark.main([*argv, "--batch-size", "12", "--results", str(results)]) == report
