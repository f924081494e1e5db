"""Writes a benchmark's JSON results into docs/results.rst as a table, between marker comments.

docs/results.rst, the documentation's results page, holds for each benchmark a block::

    .. BEGIN GENERATED: <name>
    ...
    .. END GENERATED: <name>

`update_docs(name, rows, columns, caption)` replaces what is between the markers with an
RST table built from ``rows`` (a list of dicts), or adds the block after another one.
Benchmark scripts call it with ``--update-docs``, so every figure on the results page comes
from a run, never from typing.
"""

import argparse
import pathlib
import re

RESULTS_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results.rst"


def add_update_docs_option(parser):
    """``--update-docs`` (write the results into docs/results.rst), with ``--update-readme``, its
    older spelling, as a hidden alias."""
    parser.add_argument("--update-docs", action="store_true",
                        help="write the results into docs/results.rst")
    parser.add_argument("--update-readme", dest="update_docs", action="store_true",
                        help=argparse.SUPPRESS)
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


def rst_table(rows, columns):
    """An RST grid table of ``rows`` restricted to ``columns`` (a list of (key, header))."""
    cells = [[header for _, header in columns]]
    cells += [[_cell(row.get(key, "")) for key, _ in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    line = lambda ch: "+" + "+".join(ch * (w + 2) for w in widths) + "+"  # noqa: E731
    body = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    out = [line("-"), body(cells[0]), line("=")]
    for r in cells[1:]:
        out += [body(r), line("-")]
    return "\n".join(out)


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
            return text[:anchor.end()] + f"\n\n{block}" + text[anchor.end():], block
    raise ValueError(f"{where} has no generated block named {name!r}.")


def update_docs(name, rows, columns, caption, page=RESULTS_PAGE, footer="", insert_after=None):
    """Replaces the generated block ``name`` in ``page`` (`with_block`); returns the block."""
    text, block = with_block(
        page.read_text(encoding="utf-8"), name, rows, columns, caption, footer, insert_after,
        where=page.name,
    )  # fmt: skip
    page.write_text(text, encoding="utf-8")
    return block
