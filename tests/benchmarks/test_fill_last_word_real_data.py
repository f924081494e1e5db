"""The real-sentence last-word benchmark: held-out early stopping, seeds, resumed runs."""

import json

import numpy as np
import pytest

from tests.support import load_script


def _benchmark():
    return load_script("benchmarks/papers", "fill_last_word_real_data")


@pytest.mark.parametrize(
    "argv",
    [["--max-epochs", "0"], ["--batch-size", "-4"], ["--held-out", "1"], ["--variants", "4"]],
)
def test_bad_options_are_one_line(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        _benchmark().parse_args(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert f"error: argument {argv[0]}" in err


def test_held_out_split_is_fixed_and_disjoint():
    sentences = [f"s{i}" for i in range(50)]
    kept, held = _benchmark().split_held_out(sentences, 0.1)
    assert len(held) == 5 and len(kept) == 45 and not set(kept) & set(held)
    assert _benchmark().split_held_out(sentences, 0.1) == (kept, held)


def test_every_seed_stops_at_its_patience_and_a_rerun_skips_finished_runs(tmp_path, monkeypatch):
    benchmark = _benchmark()
    rng = np.random.default_rng(3)
    words = "the a cat dog sat ran on under mat rug red blue".split()
    (tmp_path / "pwkp_gaffney").mkdir()
    for name, count in (("test.txt", 60), ("dev.txt", 20)):
        lines = [" ".join(rng.choice(words, size=6)) + " ." for _ in range(count)]
        (tmp_path / "pwkp_gaffney" / name).write_text("\n".join(lines) + "\n")
    (tmp_path / "glove_subset").mkdir()
    vectors = {word: rng.normal(size=4).round(3).tolist() for word in words[:6]}
    (tmp_path / "glove_subset" / "glove-50d-5k.json").write_text(json.dumps(vectors))
    monkeypatch.setattr(benchmark, "RUNS", tmp_path / "runs")
    argv = ["--data-dir", str(tmp_path), "--results", str(tmp_path / "results.json")]
    argv += "--max-epochs 3 --patience 1 --held-out 0.2 --batch-size 16".split()
    argv += "--seeds 0 1 --variants 0 2".split()
    report = benchmark.main(argv)
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
    rows = benchmark.table_rows(runs)
    assert [row["model"] for row in rows] == ["no attention", "attention + cache 1,000"]
    accuracy = [run["dev_accuracy"] for run in runs[::2]]
    assert rows[0]["dev_accuracy"] == f"{np.mean(accuracy):.2f} ± {np.std(accuracy):.2f}"
    assert rows[0]["per_seed"] == ", ".join(f"{a:.2f}" for a in accuracy)
    minutes = (runs[0]["train_seconds"] + runs[2]["train_seconds"]) / 120
    assert rows[0]["train_minutes"] == round(minutes, 1)
    assert benchmark.table_rows(runs[:1])[0]["dev_accuracy"] == f"{accuracy[0]:.2f}"  # one seed
    monkeypatch.setattr(benchmark, "run", lambda *a, **k: pytest.fail("retrained"))
    assert benchmark.main(argv)["runs"] == runs
