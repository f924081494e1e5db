"""benchmarks/docs_tables.py: the results page's tables, split where they are too wide."""

import re

import pytest

from tests.support import REPO_ROOT, load_script


@pytest.fixture(scope="module")
def docs_tables():
    return load_script("benchmarks", "docs_tables")


def _columns(count):
    return [(f"c{i}", f"column {i}") for i in range(count)]


def test_a_wide_table_is_split_evenly_repeating_the_columns_that_tell_rows_apart(docs_tables):
    rows = [
        {"c0": dtype, "c1": length, **{f"c{i}": f"{dtype}{length}.{i}" for i in range(2, 12)}}
        for dtype in ("float32", "bfloat16")
        for length in (20, 100)
    ]
    text = docs_tables.rst_table(rows, _columns(12))
    tables = [docs_tables.parse_grid(t) for t in text.split("\n\n")]
    # dtype alone repeats; dtype and length tell the rows apart: both lead every part, and
    # the ten other columns are shared out evenly, as few parts as the limit allows.
    limit = docs_tables.MAX_COLUMNS
    assert len(tables) == -(-10 // (limit - 2))
    widths = [len(t[0]) for t in tables]
    assert max(widths) <= limit and max(widths) - min(widths) <= 1
    for table in tables:
        assert table[0][:2] == ["column 0", "column 1"]
        assert [row[:2] for row in table[1:]] == [
            ["float32", "20"],
            ["float32", "100"],
            ["bfloat16", "20"],
            ["bfloat16", "100"],
        ]
    headers = [h for t in tables for h in t[0][2:]]
    assert headers == [f"column {i}" for i in range(2, 12)]  # every column once, in order
    # Each cell stays in its row: the last part's last row is bfloat16, 100's.
    assert tables[-1][-1][-1] == "bfloat16100.11"


def test_a_table_within_the_limit_is_one_table(docs_tables):
    rows = [{"c0": "a", "c1": 1.5}, {"c0": "b", "c1": None}]
    text = docs_tables.rst_table(rows, _columns(2))
    assert "\n\n" not in text
    assert docs_tables.parse_grid(text) == [["column 0", "column 1"], ["a", "1.5"], ["b", ""]]


def test_key_columns_are_the_fewest_leading_ones_that_tell_rows_apart(docs_tables):
    header = ["a", "b", "c", "d"]
    assert docs_tables.key_columns([header, ["x", 1, 2, 3], ["y", 1, 2, 3]]) == 1
    assert docs_tables.key_columns([header, ["x", 1, 2, 3], ["x", 2, 2, 3]]) == 2
    # No leading columns tell them apart: as many as come closest, at most three.
    assert docs_tables.key_columns([header, ["x", 1, 2, 3], ["x", 1, 2, 3]]) == 1


def test_parse_grid_reads_cells_holding_a_bar(docs_tables):
    text = docs_tables.rst_table([{"c0": "[re | im]", "c1": 2}], _columns(2))
    assert docs_tables.parse_grid(text)[1] == ["[re | im]", "2"]


def test_a_column_spec_names_each_key_and_its_header(docs_tables):
    assert docs_tables.columns_of("a: first; b: b: its second") == [
        ("a", "first"),
        ("b", "b: its second"),
    ]
    assert docs_tables.rst_table([{"a": 1.23456}], "a: x") == docs_tables.rst_table(
        [{"a": 1.23456}], [("a", "x")]
    )


def test_a_block_is_added_after_the_named_block_then_replaced_alone(docs_tables, tmp_path):
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
    for name in ("a", "a-parts"):
        assert text.count(f".. BEGIN GENERATED: {name}\n") == 1
        assert text.count(f".. END GENERATED: {name}\n") == 1
    assert text.index("| a2 ") < text.index(".. END GENERATED: a\n") < text.index("| p2 ")
    assert text.index("| p2 ") < text.index("F") < text.index(".. END GENERATED: a-parts")
    assert "a1" not in text and "p1" not in text and text.endswith("outro\n")


def test_the_results_page_has_no_table_wider_than_the_limit(docs_tables):
    page = (REPO_ROOT / "docs" / "results.rst").read_text(encoding="utf-8")
    tables = re.findall(r"^\+[-+]+\+\n(?:^[|+].*\n?)+", page, re.MULTILINE)
    assert tables and all(
        len(docs_tables.parse_grid(t)[0]) <= docs_tables.MAX_COLUMNS for t in tables
    )
