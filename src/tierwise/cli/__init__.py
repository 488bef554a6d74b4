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
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from tierwise import __version__

        print(f"tierwise {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="print the version and exit", is_eager=True,
                                 callback=_print_version),
) -> None:
    """How to carve up a model over a cluster's interconnect tiers, and how fast it will run."""

# one module per command group; each defines register(app)
_COMMAND_MODULES = ("catalog", "tiers", "collective", "estimate", "plan", "validate", "topo", "measure")


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(f"tierwise.cli.{name}").register(app)


_register_all()


def _click_exception_type() -> type[BaseException]:
    """click's ``ClickException``, found through typer (newer typer vendors click; older ones depend on it).

    ``typer.BadParameter`` derives from it in every typer this project allows, so no ``import click`` is
    needed, and the CLI does not break when typer stops depending on click (typer >= 0.26 bundles it).
    """
    for klass in typer.BadParameter.__mro__:
        if klass.__name__ == "ClickException":
            return klass
    raise AssertionError("typer.BadParameter does not derive from ClickException")  # pragma: no cover


def _usage_line(exc: BaseException) -> str:
    """One line for a usage error: the message (names the bad value) and where to look for the fix."""
    message = " ".join(str(exc.format_message()).split()).rstrip(".")  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None) or "tierwise"
    if type(exc).__name__ in ("UsageError", "NoSuchOption", "BadOptionUsage", "BadArgumentUsage",
                              "BadParameter", "MissingParameter") or ctx is not None:
        return f"error: {message}; see '{path} --help'"
    return f"error: {message}"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every error the user can cause prints one line on stderr and returns exit code 2.

    User errors are :class:`TierwiseError` (raised by the library) and click's usage errors (unknown
    option or command, a value of the wrong type, a missing option); both print ``error: ...`` on one
    line. Ctrl-C prints one line and returns 130, leaving stdout empty of partial JSON.
    """
    click_exception = _click_exception_type()
    try:
        # with standalone_mode=False click returns the code of a typer.Exit instead of raising it
        result = app(args=argv, prog_name="tierwise", standalone_mode=False)
    except TierwiseError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        return 130
    except click_exception as exc:
        print(_usage_line(exc), file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
