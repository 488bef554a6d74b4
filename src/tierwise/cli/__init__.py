"""The ``tierwise`` command line: thin wrappers that parse arguments, call the library, and render.

Each command group lives in its own module exposing ``register(app)``; heavy modules (numpy, the
estimator, the simulator) are imported inside the command bodies so that ``tierwise --help`` starts fast.
Errors that are the user's (:class:`tierwise.errors.TierwiseError`) print one line and exit with code 2.
"""

from __future__ import annotations

import importlib
import sys

import typer

from tierwise.errors import TierwiseError

__all__ = ["app", "main"]

app = typer.Typer(
    name="tierwise",
    help="How to carve up a model over a cluster's interconnect tiers, and how fast it will run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# one module per command group; each defines register(app)
_COMMAND_MODULES = ("catalog", "tiers", "collective", "estimate", "plan", "validate", "topo", "measure")


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(f"tierwise.cli.{name}").register(app)


_register_all()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line on stderr and return exit code 2 (no traceback)."""
    try:
        # with standalone_mode=False click returns the code of a typer.Exit instead of raising it
        result = app(args=argv, prog_name="tierwise", standalone_mode=False)
    except TierwiseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return 2
        raise
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
