"""Shared rendering for commands: one JSON document on stdout with ``--json``, rich tables otherwise.

The console never interprets rich markup: names and text come from the user's files (a model called
``x[/bold]``, a config file ``[red].json``, an error string), so every string prints as it is. Styles are
given with ``style=`` or :class:`rich.text.Text`, never as ``[dim]...[/dim]`` inside a string. The width
follows the terminal (rich asks the terminal; ``COLUMNS`` when set; 80 when there is none). A ``COLUMNS``
narrower than :data:`MIN_COLUMNS` (``COLUMNS=0`` prints nothing at all) is one line, exit 2, before anything
is printed; ``--json`` does not depend on the width and is unaffected.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

from tierwise.errors import TierwiseError

__all__ = ["emit", "console", "kv_table", "print_table", "to_jsonable", "MIN_COLUMNS"]

MIN_COLUMNS = 40
"""The narrowest terminal a table is printed on (the widest label and one number)."""


def to_jsonable(value: Any) -> Any:
    """Plain JSON types from numpy scalars/arrays, dataclasses and tuples; NaN/inf become null."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def console():
    """The console every command renders on: no markup, no highlighting, the terminal's width.

    ``COLUMNS`` set to a whole number below :data:`MIN_COLUMNS` is a :class:`TierwiseError` (a width of 0
    would print nothing and say nothing); a value that is not a whole number is ignored, as rich does.
    """
    from rich.console import Console

    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and int(text) < MIN_COLUMNS:
        raise TierwiseError(f"COLUMNS={text[:20]} is too narrow for a table; set COLUMNS to {MIN_COLUMNS} or more "
                            "(or unset it to use the terminal's width), or add --json")
    return Console(highlight=False, soft_wrap=False, markup=False, emoji=False)


def kv_table(title: str, key_style: str = "bold", value_overflow: str = "ellipsis"):
    """A two-column ``metric | value`` table with a title and no header, for rows of ``(name, value)``.

    ``key_style`` styles the name column ("" for none); ``value_overflow`` is rich's overflow for the values
    ("fold" wraps a long value instead of cutting it). Rows are added with ``table.add_row(name, value)``.
    """
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("metric", style=key_style)
    table.add_column("value", overflow=value_overflow)
    return table


def print_table(console, table) -> None:
    """Print a table: on a terminal (or with ``COLUMNS`` set) fitted to that width by one rule for every
    command (:mod:`tierwise.cli._tables`: numbers whole, headers wrapped, the last columns dropped with a note
    when they cannot fit); into a file or a pipe, where no width applies, at its natural width."""
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        from tierwise.cli._tables import dropped_note, fit_table

        dropped, needed = fit_table(console, table, console.width)
        console.print(table)
        if dropped:
            console.print(dropped_note(dropped, console.width, needed), style="dim")
        return
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update(max_width=1000), table).maximum
    if natural > console.width:
        width = console.width
        console.width = natural  # print(width=...) cannot exceed the console's own width
        try:
            console.print(table)
        finally:
            console.width = width
        return
    console.print(table)


def emit(data: Any, as_json: bool, render: Callable[[Any], None], *, document: str) -> None:
    """Print ``data`` as the JSON document ``document`` (:func:`tierwise.documents.finish`: stamped with its
    name and schema version, the one shape its schema in docs/schema/ gives), or call ``render(console)``
    for the human view."""
    if as_json:
        from tierwise.documents import finish

        print(json.dumps(finish(document, to_jsonable(data)), indent=2, sort_keys=False))
    else:
        render(console())
