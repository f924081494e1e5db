"""The results page (docs/results.rst) and README's headlines are what the committed results
files give: every writer (the speed tables', the GPU runs', each paper benchmark's) rewrites a
copy of the page from them, and its figures are drawn again; the one writer of its tables
(`benchmarks/docs_tables.py`), and the headlines' own rows."""

import doctest
import importlib
import re

import pytest

from benchmarks import docs_tables, headlines, papers, results_file, timing
from benchmarks.speed import page as speed_page

PAPERS = dict(fill_last_word_generated=[""], fill_last_word_real_data=[""], snli_real_data=[""])
PAPERS["seq2seq_autoencoding"] = ["--corpus generated", "--corpus ptb"]
PAPERS["lm_equal_budget"] = ["", "--config zaremba-small"]


def test_every_block_and_figure_is_what_the_results_files_give(tmp_path, monkeypatch):
    text = docs_tables.RESULTS_PAGE.read_text(encoding="utf-8")
    page, images = tmp_path / "results.rst", tmp_path / "docs" / "images"
    page.write_text(text, encoding="utf-8")
    speed_page.write(list(speed_page.SPEED_BLOCKS), page=page, images=images)
    speed_page.write_gpu(speed_page.load_runs(), page, images / speed_page.GPU_FIGURE.name)
    update = docs_tables.update_docs
    for name, runs in PAPERS.items():
        # Each run's own results file, then the page and the figures under tmp_path.
        module = importlib.import_module(f"benchmarks.papers.{name}")
        runs = [[*a.split(), "--results", str(module.parse_args(a.split()).results)] for a in runs]
        monkeypatch.setattr(module, "update_docs", lambda *a, **k: update(*a, page=page, **k))
        monkeypatch.setattr(module, "ROOT", tmp_path)
        for argv in runs:
            figures = ["--figures-dir", str(images)] if name == "lm_equal_budget" else []
            module.main([*argv, *figures, "--from-results", "--update-docs"])
    assert page.read_text(encoding="utf-8") == text
    assert headlines.main(["--check"]) == 0, "run: python -m benchmarks.headlines"
    shown = re.findall(r"^\.\. image:: images/(\S+)", text, re.MULTILINE)
    assert sorted(shown) == sorted(path.name for path in images.glob("*.png"))


def test_headlines_open_the_results_page_and_name_every_papers_models():
    results = headlines.RESULTS_PAGE.read_text(encoding="utf-8")
    assert results.index("BEGIN GENERATED:") == results.index("BEGIN GENERATED: headlines")
    rows = headlines.rows()
    names = ["Daniluk et al. 2017", "Weissenborn 2016", "Weissenborn 2016", "Gaffney"]
    assert [row["paper"] for row in rows] == names
    models = [
        ("lstm", "attention", "key_value", "key_value_predict", "ngram"),
        ("gru", "am_gru", "dual_am_gru", "word_by_word"),
        ("dual_am_gru", "attention", "gru"),
        ("no attention", "attention pooling", "attention + cache 1,000"),
    ]
    for row, names in zip(rows, models):
        assert all(f"{name} " in row["result"] for name in names), row


def test_lm_headline_names_each_models_epochs_when_they_differ():
    row = {"parameters": 4000, "epochs_trained": 15}
    same = [row | {"model": "lstm", "test_perplexity": 120.0}]
    same.append(row | {"model": "ngram", "test_perplexity": 110.04, "parameters": 3990})
    assert headlines.lm_headline(same) == (
        "PTB word-level test perplexity, equal parameter budget (the LSTM's 4,000 weights), "
        "15 epochs",
        "ngram 110.0, lstm 120.0",
    )
    # Without the LSTM's row, the best model's count.
    assert "budget (3,990 weights)" in headlines.lm_headline(same[1:])[0]
    comparison, result = headlines.lm_headline([same[0] | {"epochs_trained": 40}, same[1]])
    assert comparison.endswith("each model's epochs in brackets")
    assert result == "ngram 110.0 (15 epochs), lstm 120.0 (40 epochs)"


def _cells(table):  # header row first
    return [[c.strip() for c in row.split("|")[1:-1]] for row in table.splitlines() if "|" in row]


def test_the_docstring_examples_run():
    for module in (docs_tables, results_file, timing, papers):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module


def test_a_wide_table_is_split_evenly_repeating_the_columns_that_tell_rows_apart():
    keys = [(dtype, length) for dtype in ("float32", "bfloat16") for length in (20, 100)]
    rows = [{"c0": d, "c1": n, **{f"c{i}": f"{d}{n}.{i}" for i in range(2, 12)}} for d, n in keys]
    text = docs_tables.rst_table(rows, [(f"c{i}", f"column {i}") for i in range(12)])
    tables = [_cells(table) for table in text.split("\n\n")]
    # dtype alone repeats; dtype and length tell the rows apart: both lead every part, and
    # the ten other columns are shared out evenly, as few parts as the limit allows.
    limit = docs_tables.MAX_COLUMNS
    assert len(tables) == -(-10 // (limit - 2))
    widths = [len(table[0]) for table in tables]
    assert max(widths) <= limit and max(widths) - min(widths) <= 1
    for table in tables:
        assert table[0][:2] == ["column 0", "column 1"]
        assert [row[:2] for row in table[1:]] == [[d, str(n)] for d, n in keys]
    # Every column once, in order, each cell in its row.
    headers = [header for table in tables for header in table[0][2:]]
    assert headers == [f"column {i}" for i in range(2, 12)]
    assert tables[-1][-1][-1] == "bfloat16100.11"


def test_a_narrow_table_is_one_table_its_columns_named_in_a_spec_led_by_its_key_columns():
    text = docs_tables.rst_table([{"a": "x", "b": 1.23456}, {"a": "y", "b": None}], "a: A; b: b: B")
    assert "\n\n" not in text and _cells(text) == [["A", "b: B"], ["x", "1.235"], ["y", ""]]
    columns = docs_tables.columns_of("a: first; b: b: its second")
    assert columns == [("a", "first"), ("b", "b: its second")]
    # The key columns: the fewest leading ones that tell the rows apart.
    header = ["a", "b", "c", "d"]
    assert docs_tables.key_columns([header, ["x", 1, 2, 3], ["y", 1, 2, 3]]) == 1
    assert docs_tables.key_columns([header, ["x", 1, 2, 3], ["x", 2, 2, 3]]) == 2
    # No leading columns tell them apart: as many as come closest, at most three.
    assert docs_tables.key_columns([header, ["x", 1, 2, 3], ["x", 1, 2, 3]]) == 1


def test_a_block_is_added_after_the_named_block_then_replaced_alone(tmp_path):
    """Blocks ``a`` and ``a-parts``: rewriting either, again and again, leaves one of each."""
    page = tmp_path / "results.rst"
    page.write_text("intro\n\n.. BEGIN GENERATED: a\n\nold\n\n.. END GENERATED: a\n\noutro\n")
    with pytest.raises(ValueError, match="no generated block named 'b'"):
        docs_tables.update_docs("b", [], "m: m", "caption", page=page)
    for round_ in range(3):
        docs_tables.update_docs("a", [{"m": f"a{round_}"}], "m: m", "A", page=page)
        docs_tables.update_docs(
            "a-parts", [{"m": f"p{round_}"}], "m: m", "P", page=page, footer="F", insert_after="a"
        )
    text = page.read_text()
    for name in ("BEGIN GENERATED: a", "END GENERATED: a", "BEGIN GENERATED: a-parts"):
        assert text.count(f".. {name}\n") == text.count(".. END GENERATED: a-parts\n") == 1
    assert text.index("| a2 ") < text.index(".. END GENERATED: a\n") < text.index("| p2 ")
    assert text.index("| p2 ") < text.index("F") < text.index(".. END GENERATED: a-parts")
    assert "a1" not in text and "p1" not in text and text.endswith("outro\n")
