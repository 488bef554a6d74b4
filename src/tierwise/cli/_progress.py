"""Progress bars for commands that can run longer than a couple of seconds (rich, on stderr).

Shown only when stderr is a terminal, so pipes, files, CI logs and tests never see them, and never on
stdout, so ``--json`` output stays one clean document (a progress bar on stderr does not touch it; with
``--json`` piped into ``jq`` from a terminal the bar still shows on the terminal and is erased when done).
``TIERWISE_PROGRESS=0`` turns them off everywhere. A step with no count of its own (one planner search, one
simulation) shows a spinner with the elapsed time; a sweep shows points done of points to run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["progress", "enabled"]


def enabled() -> bool:
    if os.environ.get("TIERWISE_PROGRESS", "").strip() == "0":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Bar:
    def __init__(self, prog=None, task=None):
        self._prog, self._task = prog, task

    def update(self, completed: int, total: int | None = None) -> None:
        if self._prog is not None:
            self._prog.update(self._task, completed=completed, total=total)

    def describe(self, text: str) -> None:
        if self._prog is not None:
            self._prog.update(self._task, description=text)


@contextlib.contextmanager
def progress(description: str, total: int | None = None) -> Iterator[_Bar]:
    """A transient progress bar on stderr (a spinner while ``total`` is None); a no-op off a terminal."""
    if not enabled():
        yield _Bar()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True, markup=False, highlight=False), transient=True) as prog:
        yield _Bar(prog, prog.add_task(description, total=total))
