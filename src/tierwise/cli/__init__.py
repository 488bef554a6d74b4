"""The ``tierwise`` command line: thin wrappers that parse arguments, call the library, and render.

Each command group lives in its own module exposing ``register(app)``; heavy modules (numpy, the
estimator, the simulator) are imported inside the command bodies so that ``tierwise --help`` starts fast.
Errors that are the user's (:class:`tierwise.errors.TierwiseError`) print one line and exit with code 2.
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys

import typer

from tierwise.errors import TierwiseError, one_line

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
        from tierwise._version import __version__

        print(f"tierwise {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="print the version and exit", is_eager=True,
                                 callback=_print_version),
) -> None:
    """How to carve up a model over a cluster's interconnect tiers, and how fast it will run."""

# one module per command group; each defines register(app)
_COMMAND_MODULES = ("catalog", "tiers", "collective", "estimate", "plan", "validate", "topo", "measure", "design",
                    "bandwidth",
                    "goodput", "serve", "sweep", "testbed")


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


def _option_names(ctx) -> list[str]:
    """Every ``--option`` spelling of the command that failed (for did-you-mean)."""
    command = getattr(ctx, "command", None)
    names: list[str] = []
    for param in getattr(command, "params", ()):
        names += [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
    return [n for n in names if n.startswith("-")]


def _usage_line(exc: BaseException) -> str:
    """One line for a usage error: the message (names the bad value) and where to look for the fix.

    An unknown option or command is worded the same whichever typer/click is installed (their wordings and
    suggestions differ between releases): ``no such option --modle; did you mean '--model'?``.
    """
    ctx = getattr(exc, "ctx", None)
    option = getattr(exc, "option_name", None)
    if type(exc).__name__ == "NoSuchOption" and option:
        choices = set(getattr(exc, "possibilities", None) or ()) | set(_option_names(ctx))
        close = difflib.get_close_matches(option, sorted(choices), n=1, cutoff=0.6)
        message = f"no such option {option}" + (f"; did you mean {close[0]!r}?" if close else "")
    elif (match := re.match(r"No such command '(.*?)'", str(exc.format_message()))):  # type: ignore[attr-defined]
        name = match.group(1)
        close = difflib.get_close_matches(name, sorted(getattr(getattr(ctx, "command", None), "commands", {})),
                                          n=2, cutoff=0.6)
        message = f"no such command {name!r}" + (f"; did you mean {' or '.join(map(repr, close))}?" if close else "")
    else:
        message = " ".join(str(exc.format_message()).split()).rstrip(".")  # type: ignore[attr-defined]
    path = getattr(ctx, "command_path", None) or "tierwise"
    return f"error: {one_line(message)}; see '{path} --help'"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every error the user can cause prints one line on stderr and returns exit code 2.

    User errors are :class:`TierwiseError` (raised by the library) and click's usage errors (unknown
    option or command, a value of the wrong type, a missing option); both print ``error: ...`` on one
    line. Ctrl-C prints one line saying what was kept (:mod:`tierwise.cli._interrupt`) and returns 130,
    leaving stdout empty of partial JSON.
    """
    from tierwise.cli._interrupt import Interrupted, run

    click_exception = _click_exception_type()
    try:
        # with standalone_mode=False click returns the code of a typer.Exit instead of raising it
        result = run(app, argv, "tierwise")
    except Interrupted as exc:
        print(exc.line(), file=sys.stderr, flush=True)
        return 130
    except TierwiseError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # last resort: a path the system refused where no guard looked; still one line
        name = str(exc.filename or "")
        name = name if len(name) <= 80 else name[:60] + "..." + name[-17:]
        print(f"error: {exc.strerror or exc}" + (f": {name!r}" if name else "") + "; check the path",
              file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):  # Abort: end of input at a prompt; the interrupt: outside a command
        print(Interrupted().line(), file=sys.stderr, flush=True)
        return 130
    except click_exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group run bare: its help is printed, as with click < 8.2
            return 0
        print(_usage_line(exc), file=sys.stderr)
        return 2
    if result == 130:  # typer's exit for a Ctrl-C while the arguments were parsed, before any command ran
        print(Interrupted().line(), file=sys.stderr, flush=True)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
