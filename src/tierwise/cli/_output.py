"""Shared rendering for commands: one JSON document on stdout with ``--json``, rich tables otherwise."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["emit", "console", "to_jsonable"]


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
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=160)


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """Print ``data`` as JSON, or call ``render(console)`` for the human view."""
    if as_json:
        print(json.dumps(to_jsonable(data), indent=2, sort_keys=False))
    else:
        render(console())
