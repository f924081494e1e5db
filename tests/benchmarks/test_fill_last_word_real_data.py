"""The real-sentence last-word benchmark: held-out early stopping, seeds, resumed runs."""

import json

import numpy as np
import pytest

from tests.support import load_script


def _benchmark():
    return load_script("benchmarks/papers", "fill_last_word_real_data")


def _tiny_pwkp(root):
    folder = root / "pwkp_gaffney"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    words = "the a cat dog sat ran on under mat rug red blue".split()
    for name, count in (("test.txt", 60), ("dev.txt", 20)):
        lines = [" ".join(rng.choice(words, size=6)) + " ." for _ in range(count)]
        (folder / name).write_text("\n".join(lines) + "\n")
    (root / "glove_subset").mkdir()
    vectors = {word: rng.normal(size=4).round(3).tolist() for word in words[:6]}
    (root / "glove_subset" / "glove-50d-5k.json").write_text(json.dumps(vectors))


def test_held_out_split_is_fixed_and_disjoint():
    benchmark = _benchmark()
    sentences = [f"s{i}" for i in range(50)]
    kept, held = benchmark.split_held_out(sentences, 0.1)
    assert len(held) == 5 and len(kept) == 45 and not set(kept) & set(held)
    assert benchmark.split_held_out(sentences, 0.1) == (kept, held)


def test_table_gives_mean_and_std_over_seeds_in_variant_order():
    benchmark = _benchmark()
    runs = [
        {
            "model": "attention pooling",
            "seed": 0,
            "dev_accuracy": 5.0,
            "best_epoch": 3,
            "train_seconds": 60.0,
        },
        {
            "model": "no attention",
            "seed": 0,
            "dev_accuracy": 4.0,
            "best_epoch": 2,
            "train_seconds": 120.0,
        },
        {
            "model": "no attention",
            "seed": 1,
            "dev_accuracy": 6.0,
            "best_epoch": 4,
            "train_seconds": 240.0,
        },
    ]
    rows = benchmark.table_rows(runs)
    assert [row["model"] for row in rows] == ["no attention", "attention pooling"]
    assert rows[0]["dev_accuracy"] == "5.00 ± 1.00" and rows[0]["seeds"] == 2
    assert rows[0]["per_seed"] == "4.00, 6.00" and rows[0]["best_epochs"] == "2, 4"
    assert rows[0]["train_minutes"] == 3.0
    assert rows[1]["dev_accuracy"] == "5.00"  # one seed: no spread to show


def test_every_seed_stops_at_its_patience_and_a_rerun_skips_finished_runs(tmp_path, monkeypatch):
    benchmark = _benchmark()
    _tiny_pwkp(tmp_path / "data")
    argv = [
        "--data-dir",
        str(tmp_path / "data"),
        "--results",
        str(tmp_path / "results.json"),
        "--max-epochs",
        "4",
        "--patience",
        "1",
        "--held-out",
        "0.2",
        "--batch-size",
        "16",
        "--seeds",
        "0",
        "1",
        "--variants",
        "0",
        "2",
    ]
    report = benchmark.main(argv)
    runs = report["runs"]
    assert [(run["model"], run["seed"]) for run in runs] == [
        ("no attention", 0),
        ("attention + cache 1,000", 0),
        ("no attention", 1),
        ("attention + cache 1,000", 1),
    ]
    assert report["data"]["held_out_sentences"] == 12
    for run in runs:
        held = run["held_out_accuracy"]
        assert len(held) == run["epochs_trained"] <= 4
        assert held[run["best_epoch"] - 1] == max(held)
        if run["epochs_trained"] < 4:  # stopped by patience: no better epoch after the best
            assert run["epochs_trained"] - run["best_epoch"] == 1
    monkeypatch.setattr(benchmark, "run_variant", lambda *a, **k: pytest.fail("retrained"))
    assert benchmark.main(argv)["runs"] == runs
