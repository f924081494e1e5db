"""The one writer of the results page's tables: `update_docs(name, rows, columns, caption)`
replaces the block between ``.. BEGIN GENERATED: <name>`` and ``.. END GENERATED: <name>`` of
``docs/results.rst`` with the caption and an RST table of ``rows`` (split past `MAX_COLUMNS`).

>>> print(rst_table([{"model": "gru", "ms": 1.23456}], "model: model; ms: median (ms)"))
+-------+-------------+
| model | median (ms) |
+=======+=============+
| gru   | 1.235       |
+-------+-------------+
"""

import pathlib
import re

RESULTS_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results.rst"
#: The most columns of a table: the page's content column is about 740 px wide.
MAX_COLUMNS = 6


def _cell(value):
    """Floats to 4 significant digits, lists of floats to 3 decimals, ``None`` empty."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, float) for v in value):
        return "[" + ", ".join(f"{v:.3f}" for v in value) + "]"
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def key_columns(cells, most=3):
    """The fewest leading columns (≤ ``most``) best telling ``cells``' rows apart (header first)."""
    distinct = [len({tuple(row[:count]) for row in cells[1:]}) for count in range(1, most + 1)]
    return 1 + distinct.index(max(distinct))


def split_columns(cells, limit=MAX_COLUMNS):
    """``cells`` as tables of at most ``limit`` columns, each led by the `key_columns`, the
    others shared out evenly in their order."""
    if len(cells[0]) <= limit:
        return [cells]
    keys = min(key_columns(cells), limit - 1)
    rest = len(cells[0]) - keys
    parts = -(-rest // (limit - keys))
    size, extra = divmod(rest, parts)
    bounds = [keys + part * size + min(part, extra) for part in range(parts + 1)]
    return [[row[:keys] + row[a:b] for row in cells] for a, b in zip(bounds, bounds[1:])]


def _grid(cells):
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    line = lambda ch: "+" + "+".join(ch * (w + 2) for w in widths) + "+"  # noqa: E731
    body = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    rows = [f"{body(r)}\n{line('-')}" for r in cells[1:]]
    return "\n".join([line("-"), body(cells[0]), line("="), *rows])


def columns_of(spec):
    """``[(key, header)]`` of ``"key: header; key; ..."`` (a bare key: its own header) or a list."""
    if not isinstance(spec, str):
        return list(spec)
    parts = (part.partition(": ") for part in spec.split("; "))
    return [(key, header or key) for key, _, header in parts]


def rst_table(rows, columns):
    """RST grid tables of ``rows`` under ``columns`` (`columns_of`), split (`split_columns`)."""
    columns = columns_of(columns)
    cells = [[header for _, header in columns]]
    cells += [[_cell(row.get(key, "")) for key, _ in columns] for row in rows]
    return "\n\n".join(_grid(part) for part in split_columns(cells))


def with_block(text, name, rows, columns, caption, footer="", insert_after=None, where="the page"):
    """``(new text, block)``: ``text`` with its block ``name`` made from ``rows`` (``footer``:
    RST after the table); a new block goes after block ``insert_after``."""
    begin, end = f".. BEGIN GENERATED: {name}", f".. END GENERATED: {name}"
    block = f"{begin}\n\n{caption}\n\n{rst_table(rows, columns)}\n\n"
    block += f"{footer.strip()}\n\n{end}" if footer.strip() else end
    # Whole marker lines only: a block's name may begin another's (``x`` and ``x-parts``).
    pattern = re.compile(f"^{re.escape(begin)}$.*?^{re.escape(end)}$", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1), block
    if insert_after is not None:
        anchor = re.search(rf"^\.\. END GENERATED: {re.escape(insert_after)}$", text, re.MULTILINE)
        if anchor:
            return text[: anchor.end()] + f"\n\n{block}" + text[anchor.end() :], block
    raise ValueError(f"{where} has no generated block named {name!r}.")


def update_docs(name, rows, columns, caption, page=RESULTS_PAGE, footer="", insert_after=None):
    """Replaces the generated block ``name`` in ``page`` (`with_block`); returns the block."""
    text = page.read_text(encoding="utf-8")
    text, block = with_block(text, name, rows, columns, caption, footer, insert_after, page.name)
    page.write_text(text, encoding="utf-8")
    return block
