"""benchmarks/speed/lm_packing.py on a tiny generated corpus, and without its data."""

import json

import pytest

from tests.support import REPO_ROOT, load_script


@pytest.fixture(scope="module")
def packing():
    return load_script("benchmarks/speed", "lm_packing")


def test_reports_padding_and_speed_of_both_layouts(packing, tmp_path, monkeypatch):
    page = tmp_path / "results.rst"
    page.write_text("".join(f".. {side} GENERATED: lm-throughput\n" for side in ("BEGIN", "END")))
    docs_tables = load_script("benchmarks", "docs_tables")
    monkeypatch.setattr(
        packing, "update_docs", lambda *a, **k: docs_tables.update_docs(*a, page=page, **k)
    )
    output = tmp_path / "lm_packing.json"
    results = packing.main(
        [
            "--generated-tokens",
            "3000",
            "--hidden",
            "8",
            "--batch-size",
            "4",
            "--seq-len",
            "6",
            "--steps",
            "3",
            "--repeats",
            "2",
            "--output",
            str(output),
            "--update-docs",
        ]
    )
    assert json.loads(output.read_text()) == json.loads(json.dumps(results))
    assert results["corpus"] == "generated" and results["documents"]["train"] > 10
    padded, packed = results["rows"]
    assert (padded["layout"], packed["layout"]) == ("padded", "packed")
    for split in ("train", "valid", "test"):
        assert 0 <= packed[f"{split}_padding"] <= padded[f"{split}_padding"] < 1
    assert packed["train_padding"] < padded["train_padding"]
    assert packed["train_batches"] < padded["train_batches"]
    for row in (padded, packed):
        assert row["step_ms"] > 0 and row["tokens_per_second"] > 0
        assert row["epoch_tokens_per_second"] > 0 and row["epoch_minutes"] > 0
        assert 0 < row["timed_targets"] <= 3 * 4 * 6
        low, high = row["step_ms_range"]
        assert low <= row["step_ms"] <= high
    assert padded["step_ratio"] == 1 and packed["step_ratio"] > 0
    # The floor: the LSTM's two matrices (input and recurrent, [8, 32] each) and the softmax
    # layer's [8, vocabulary], 6 operations per parameter for each of the 4 x 6 positions.
    vocabulary = results["vocabulary"]
    flops = 6 * (8 * 32 + 8 * 32 + 8 * vocabulary) * 4 * 6
    for row in (padded, packed):
        assert row["gflop_per_step"] == flops / 1e9
        share = flops / (row["step_ms"] * 1e6) / row["peak_gflops"]
        assert abs(row["share_of_peak"] - share) <= 1e-3 * share
    assert len(results["load_average"]) == 2
    text = page.read_text()
    assert ".. BEGIN GENERATED: lm-packing" in text and "packed" in text
    assert "share of matmul peak" in text


def test_without_the_corpus_nothing_is_measured(packing, tmp_path, capsys):
    output = tmp_path / "lm_packing.json"
    assert packing.main(["--data-dir", str(tmp_path / "absent"), "--output", str(output)]) is None
    assert "nothing measured" in capsys.readouterr().err and not output.exists()


def test_options_are_checked(packing, capsys):
    with pytest.raises(SystemExit) as exit_info:
        packing.parse_args(["--steps", "0"])
    assert exit_info.value.code == 2
    assert "argument --steps" in capsys.readouterr().err
    assert packing.default_data_dir().name == "wikitext2"
    assert packing.RESULTS == REPO_ROOT / "benchmarks" / "results" / "lm_packing.json"
