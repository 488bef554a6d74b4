"""Ctrl-C on any command: one line on stderr saying what was kept, and exit code 130 (issue 32).

typer turns a :class:`KeyboardInterrupt` into a silent exit 130 before :func:`tierwise.cli.main` sees it. So
:func:`run` wraps the root command's ``invoke``: a ``KeyboardInterrupt`` raised anywhere in a command
becomes :class:`Interrupted`, which typer lets through, and ``main`` prints ``interrupted: WHAT`` and returns
130. A command that keeps partial results says what and where by running its work inside
:func:`keeping` (``sweep run``: "704 of 1,000 points saved in r/; rerun to resume"); every other command
says "nothing written". Worker processes ignore SIGINT (the sweep's and the cross-validation's pools), so a
terminal's Ctrl-C, which reaches the whole process group, prints no worker traceback: the parent stops them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

__all__ = ["Interrupted", "keeping", "run", "NOTHING"]

NOTHING = "nothing written"


class Interrupted(BaseException):  # noqa: N818 - the user's Ctrl-C, not an error
    """Ctrl-C, carrying what was kept (``"nothing written"`` when nothing was)."""

    def __init__(self, kept: str | None = None):
        super().__init__(kept or NOTHING)
        self.kept = kept or NOTHING

    def line(self) -> str:
        return f"interrupted: {self.kept}"


@contextlib.contextmanager
def keeping(describe: Callable[[KeyboardInterrupt], str | None]) -> Iterator[None]:
    """Run a command's work; on Ctrl-C, ``describe(the interrupt)`` says what was kept (None: nothing)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        raise Interrupted(describe(exc)) from None


def run(app, argv: Sequence[str] | None, prog_name: str):
    """``app(args=argv, standalone_mode=False)``, but a ``KeyboardInterrupt`` in a command raises
    :class:`Interrupted` instead of typer's silent exit 130."""
    import typer.main

    command = typer.main.get_command(app)
    invoke = command.invoke

    def guarded(ctx):
        try:
            return invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None

    command.invoke = guarded
    return command.main(args=None if argv is None else list(argv), prog_name=prog_name, standalone_mode=False)
