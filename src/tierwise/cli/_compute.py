"""``--compute FILE`` and ``--strict``: a measured compute profile for ``estimate``, ``plan``, ``serve``,
``serve-plan``.

The options put the profile in force for the whole command (:func:`tierwise.specs.compute_profile.
compute_profile_in_force`, entered on the command's context so it is left when the command ends); every cluster
the command loads then carries its rates. A profile measured on another part than the cluster's accelerator
is a warning on stderr, or with ``--strict`` the one-line error (exit code 2).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Annotated

import typer

__all__ = ["ComputeOpt", "StrictOpt", "use_compute_profile"]

ComputeOpt = Annotated[str | None, typer.Option(
    "--compute", help="compute profile (a `measure compute --out` file): its measured rates replace the "
                      "cluster's for this command")]
StrictOpt = Annotated[bool, typer.Option(
    "--strict", help="refuse a compute profile measured on another part than the cluster's accelerator")]


@contextlib.contextmanager
def _profile(path: str | None, strict: bool) -> Iterator[None]:
    from tierwise.specs.compute_profile import compute_profile_in_force

    with compute_profile_in_force(path, strict) as prof:
        try:
            yield
        finally:
            for line in dict.fromkeys(prof.warnings):  # once each, on stderr: stdout may hold --json
                print(f"warning: {line}", file=sys.stderr)


def use_compute_profile(ctx: typer.Context, path: str | None, strict: bool) -> None:
    """Put the profile at ``path`` in force until the command of ``ctx`` ends (a bad profile: one line)."""
    if path is None and not strict:
        return
    ctx.with_resource(_profile(path, strict))
