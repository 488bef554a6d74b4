"""One rule for every table at a given width (issue 32): a number is never cut, a header wraps instead of
ending in "...", and a table that still cannot fit drops its last columns with a note naming them.

rich fits a table that is too wide by shrinking every column, down to one character, and cutting the cells
to an ellipsis ("1,14..."); past that it crops the lines at the terminal's edge. :func:`fit_table` decides
the widths itself before rich does:

* every column folds (long text wraps onto more lines, headers too; nothing ends in an ellipsis);
* a column is never narrower than its longest word that holds a digit ("1,146,000", "8x8x16", "$0.823"),
  so a number wraps whole onto a line of its own at worst, nor than its header's longest word (a header
  wraps between words); other text keeps up to :data:`TEXT_MIN` columns;
* if those minimums do not fit, the last columns are dropped (never the first, which names the row) until
  they do, and :func:`fit_table` returns their headers for the note :func:`dropped_note` words;
* the space left is shared out in proportion to what each column would still like.

The JSON (``--json``) never depends on the width.
"""

from __future__ import annotations

import re

__all__ = ["fit_table", "dropped_note", "TEXT_MIN"]

TEXT_MIN = 8
"""The narrowest a column of text (no digits) is made before columns are dropped."""

_WORD = re.compile(r"\S+")


def _plain(renderable) -> str | None:
    """The text of a cell that is a ``str`` or a :class:`rich.text.Text` (None for anything else)."""
    if isinstance(renderable, str):
        return renderable
    plain = getattr(renderable, "plain", None)
    return plain if isinstance(plain, str) else None


def _least(column) -> int:
    """The least width the column may have: its longest word that holds a digit (header or cell), and its
    header's longest word (a header wraps between words, never inside one)."""
    from rich.cells import cell_len

    widest = max((cell_len(w) for w in _WORD.findall(_plain(column.header) or "")), default=0)
    for cell in (column.header, *column.cells):
        text = _plain(cell)
        if text:
            widest = max([widest, *(cell_len(w) for w in _WORD.findall(text) if any(c.isdigit() for c in w))])
    return widest


def _natural(console, column) -> int:
    """The width the column's content would take unwrapped (its widest cell or header)."""
    from rich.measure import Measurement

    options = console.options.update(max_width=10_000)
    widest = max((Measurement.get(console, options, c).maximum for c in (column.header, *column.cells)), default=1)
    if column.max_width is not None:
        widest = min(widest, column.max_width)
    return max(widest, column.min_width or 0, 1)


def _chrome(table, n: int) -> int:
    """Width of a table of ``n`` columns besides their content: the box's edges and rules and the padding."""
    edges = (2 if table.box and table.show_edge else 0) + (n - 1 if table.box else 0)
    _, right, _, left = table.padding
    if table.collapse_padding:
        left, right = 0, abs(left - right)
    pad = (left + right) * n
    if not table.pad_edge:
        pad -= left + right
    return edges + pad


def _share(natural: list[int], least: list[int], room: int) -> list[int]:
    """Widths from ``least`` up toward ``natural`` that add up to ``room`` (each gets a share of the space
    in proportion to what it still wants)."""
    widths = list(least)
    spare = room - sum(widths)
    want = [max(n - w, 0) for n, w in zip(natural, widths, strict=True)]
    total = sum(want)
    if total == 0 or spare <= 0:
        return widths
    for i, w in enumerate(want):
        widths[i] += min(w, spare * w // total)
    for i in sorted(range(len(widths)), key=lambda j: natural[j] - widths[j], reverse=True):  # rounding leftovers
        if sum(widths) >= room:
            break
        widths[i] += min(natural[i] - widths[i], room - sum(widths))
    return widths


def fit_table(console, table, width: int) -> tuple[list[str], int]:
    """Make ``table`` fit ``width`` columns by the module's rule; return the headers of the columns dropped
    and the width at which none would be."""
    columns = table.columns
    for column in columns:
        if column.overflow == "ellipsis":
            column.overflow = "fold"
    least = [max(_least(c), c.min_width or 0) for c in columns]
    natural = [max(_natural(console, c), m) for c, m in zip(columns, least, strict=True)]
    least = [max(m, min(n, TEXT_MIN)) for m, n in zip(least, natural, strict=True)]
    needed = sum(least) + _chrome(table, len(columns))
    if sum(natural) + _chrome(table, len(columns)) <= width:
        for column, m in zip(columns, least, strict=True):
            column.min_width = m  # rich keeps them at the width they have; this only guards the rule
        return [], needed
    keep = len(columns)
    while keep > 1 and sum(least[:keep]) + _chrome(table, keep) > width:
        keep -= 1
    dropped = [_plain(c.header) or f"column {i + 1}" for i, c in enumerate(columns[keep:], start=keep)]
    table.columns[:] = columns[:keep]
    for i, column in enumerate(table.columns):
        column._index = i  # rich's own position (padding at the edges, row styles)
    widths = _share(natural[:keep], least[:keep], width - _chrome(table, keep))
    for column, w in zip(table.columns, widths, strict=True):
        column.width = w
    return dropped, needed


def dropped_note(dropped: list[str], width: int, needed: int) -> str:
    """The one line under a table whose columns did not fit."""
    names = ", ".join(repr(" ".join(d.split())) for d in dropped)
    return (f"column{'s' if len(dropped) > 1 else ''} {names} not shown at {width} columns; see --json, or a "
            f"terminal of {needed} columns or more (COLUMNS={needed})")
