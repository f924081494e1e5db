"""Writes a benchmark's JSON results into docs/results.rst as a table, between marker comments.

docs/results.rst, the documentation's results page, holds for each benchmark a block::

    .. BEGIN GENERATED: <name>
    ...
    .. END GENERATED: <name>

`update_docs(name, rows, columns, caption)` replaces what is between the markers with an
RST table built from ``rows`` (a list of dicts), or adds the block after another one.
Benchmark scripts call it with ``--update-docs``, so every figure on the results page comes
from a run, never from typing. A table of more than `MAX_COLUMNS` columns is split into
several, each led by the columns that tell its rows apart, so that none is wider than the
page's content column; ``python -m benchmarks.docs_tables --reflow`` rewrites the page's
tables by that rule with their figures unchanged.
"""

import argparse
import pathlib
import re

RESULTS_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results.rst"


def add_update_docs_option(parser):
    """``--update-docs`` (write the results into docs/results.rst), with ``--update-readme``, its
    older spelling, as a hidden alias."""
    parser.add_argument(
        "--update-docs", action="store_true", help="write the results into docs/results.rst"
    )
    parser.add_argument(
        "--update-readme", dest="update_docs", action="store_true", help=argparse.SUPPRESS
    )
    return parser


def _cell(value):
    """A table cell: floats to 4 significant digits, lists of weights to 3 decimals, and
    nothing for a missing value (``None``)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and all(isinstance(v, float) for v in value):
        return "[" + ", ".join(f"{v:.3f}" for v in value) + "]"
    return str(value)


#: The most columns a table on the results page has: the page's content column is about 740
#: px wide, and a wider table overflows it at 1280 px. A wider table is split into several,
#: each repeating the columns that tell its rows apart (`key_columns`).
MAX_COLUMNS = 6


def key_columns(cells, most=3):
    """How many leading columns of ``cells`` (header row first) tell the rows apart: the
    fewest (at least one, at most ``most``) whose values are distinct across the rows, or
    else those that come closest."""
    rows = cells[1:]
    distinct = [len({tuple(row[:count]) for row in rows}) for count in range(1, most + 1)]
    return 1 + distinct.index(max(distinct))


def split_columns(cells, limit=MAX_COLUMNS):
    """``cells`` (header row first) as one or more tables of at most ``limit`` columns: the
    key columns (`key_columns`) lead each, the other columns follow in their order, shared
    out evenly."""
    if len(cells[0]) <= limit:
        return [cells]
    keys = min(key_columns(cells), limit - 1)
    rest = list(range(keys, len(cells[0])))
    parts = -(-len(rest) // (limit - keys))
    size, extra = divmod(len(rest), parts)
    bounds = [0]
    for part in range(parts):
        bounds.append(bounds[-1] + size + (part < extra))
    return [
        [row[:keys] + [row[i] for i in rest[start:end]] for row in cells]
        for start, end in zip(bounds, bounds[1:])
    ]


def _grid(cells):
    """One RST grid table of ``cells`` (header row first)."""
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    line = lambda ch: "+" + "+".join(ch * (w + 2) for w in widths) + "+"  # noqa: E731
    body = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    out = [line("-"), body(cells[0]), line("=")]
    for r in cells[1:]:
        out += [body(r), line("-")]
    return "\n".join(out)


def rst_table(rows, columns):
    """RST grid tables of ``rows`` restricted to ``columns`` (a list of (key, header)): one
    table, or several of at most `MAX_COLUMNS` columns each (`split_columns`)."""
    cells = [[header for _, header in columns]]
    cells += [[_cell(row.get(key, "")) for key, _ in columns] for row in rows]
    return "\n\n".join(_grid(part) for part in split_columns(cells))


def parse_grid(table):
    """The cells (header row first) of a one-line-per-row RST grid table, as `rst_table`
    writes it; a cell may hold ``|``: the columns are read at the border's ``+``."""
    lines = table.strip().splitlines()
    edges = [i for i, ch in enumerate(lines[0]) if ch == "+"]
    return [
        [line[a + 1 : b].strip() for a, b in zip(edges, edges[1:])]
        for line in lines
        if line.startswith("|")
    ]


_GRID = re.compile(r"^\+[-+]+\+\n(?:^[|+].*\n?)+", re.MULTILINE)


def reflow(text):
    """``text`` with every grid table of its generated blocks rewritten by `rst_table`'s
    rules (a table wider than `MAX_COLUMNS` split); the figures in them unchanged."""

    def block(match):
        return _GRID.sub(
            lambda table: (
                "\n\n".join(_grid(part) for part in split_columns(parse_grid(table.group()))) + "\n"
            ),
            match.group(),
        )

    pattern = re.compile(
        r"^\.\. BEGIN GENERATED: (\S+)$.*?^\.\. END GENERATED: \1$", re.DOTALL | re.MULTILINE
    )
    return pattern.sub(block, text)


def _markers(name):
    return f".. BEGIN GENERATED: {name}", f".. END GENERATED: {name}"


def with_block(text, name, rows, columns, caption, footer="", insert_after=None, where="the page"):
    """``(new text, block)``: ``text`` with its generated block ``name`` made from ``rows``.

    ``footer`` is RST placed after the table inside the block (e.g. the run's figures). A
    block that ``text`` does not have yet is added right after the block named
    ``insert_after``; without ``insert_after`` a missing block is an error.
    """
    begin, end = _markers(name)
    block = f"{begin}\n\n{caption}\n\n{rst_table(rows, columns)}\n\n"
    block += f"{footer.strip()}\n\n{end}" if footer.strip() else end
    # Whole marker lines only: a block's name may begin another's (``x`` and ``x-parts``).
    pattern = re.compile(f"^{re.escape(begin)}$.*?^{re.escape(end)}$", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1), block
    if insert_after is not None:
        anchor = re.search(f"^{re.escape(_markers(insert_after)[1])}$", text, re.MULTILINE)
        if anchor:
            return text[: anchor.end()] + f"\n\n{block}" + text[anchor.end() :], block
    raise ValueError(f"{where} has no generated block named {name!r}.")


def update_docs(name, rows, columns, caption, page=RESULTS_PAGE, footer="", insert_after=None):
    """Replaces the generated block ``name`` in ``page`` (`with_block`); returns the block."""
    text, block = with_block(
        page.read_text(encoding="utf-8"),
        name,
        rows,
        columns,
        caption,
        footer,
        insert_after,
        where=page.name,
    )
    page.write_text(text, encoding="utf-8")
    return block


def _existing_page(text):
    path = pathlib.Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    return path


def parse_args(argv=None):
    from benchmarks.gpu import ArgumentParser

    parser = ArgumentParser(
        description="Rewrites the generated tables of a page by the "
        "current rules (a wide table split), their figures unchanged."
    )
    parser.add_argument(
        "--reflow", action="store_true", required=True, help="rewrite the page's generated tables"
    )
    parser.add_argument(
        "page",
        nargs="?",
        type=_existing_page,
        default=RESULTS_PAGE,
        help="the page (default: docs/results.rst)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    args.page.write_text(reflow(args.page.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
