"""benchmarks/docs_tables.py: the results page's tables, split where they are too wide, and its
generated blocks."""

import doctest

import pytest

from benchmarks import docs_tables, papers, results_file, timing


def _cells(table):
    """The cells of a grid table, header row first."""
    return [
        [c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines() if "|" in line
    ]


def test_the_docstring_examples_run():
    for module in (docs_tables, results_file, timing, papers):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module


def test_a_wide_table_is_split_evenly_repeating_the_columns_that_tell_rows_apart():
    rows = [
        {"c0": dtype, "c1": length, **{f"c{i}": f"{dtype}{length}.{i}" for i in range(2, 12)}}
        for dtype in ("float32", "bfloat16")
        for length in (20, 100)
    ]
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
        assert [row[:2] for row in table[1:]] == [
            [dtype, length] for dtype in ("float32", "bfloat16") for length in ("20", "100")
        ]
    # Every column once, in order, each cell in its row.
    assert [header for table in tables for header in table[0][2:]] == [
        f"column {i}" for i in range(2, 12)
    ]
    assert tables[-1][-1][-1] == "bfloat16100.11"


def test_a_narrow_table_is_one_table_and_its_columns_are_named_in_a_spec():
    text = docs_tables.rst_table([{"a": "x", "b": 1.23456}, {"a": "y", "b": None}], "a: A; b: b: B")
    assert "\n\n" not in text and _cells(text) == [["A", "b: B"], ["x", "1.235"], ["y", ""]]
    assert docs_tables.columns_of("a: first; b: b: its second") == [
        ("a", "first"),
        ("b", "b: its second"),
    ]


def test_key_columns_are_the_fewest_leading_ones_that_tell_rows_apart():
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
    for name in ("a", "a-parts"):
        assert text.count(f".. BEGIN GENERATED: {name}\n") == 1
        assert text.count(f".. END GENERATED: {name}\n") == 1
    assert text.index("| a2 ") < text.index(".. END GENERATED: a\n") < text.index("| p2 ")
    assert text.index("| p2 ") < text.index("F") < text.index(".. END GENERATED: a-parts")
    assert "a1" not in text and "p1" not in text and text.endswith("outro\n")
