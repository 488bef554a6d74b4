"""The exception tree. Every error a user can cause is a :class:`TierwiseError`.

::

    TierwiseError                 bad user input; the CLI prints the message, exit code 2, no traceback
    ├── UnitError                 a quantity that does not parse ("400 Gbs", "-1 GB")
    ├── CatalogError              unknown catalog name (with did-you-mean)
    ├── SpecError                 a malformed spec: YAML syntax (with line), unknown or missing keys, bad values
    │   └── ScenarioError         a scenario file that does not hold together
    ├── PlanError                 degrees that do not fit the model or the cluster (tp not dividing heads, ...)
    ├── TopologyError             a fabric that cannot be built (radix too small, oversubscription < 1, ...)
    ├── MeasureError              a benchmark or log that cannot be used (not nccl-tests output, empty sweep, ...)
    └── OutputError               an output path that cannot be written (missing directory, read-only, full, ...)

A plan that does not fit in memory is *not* an error: the estimate says ``fits: false`` with the numbers.
``assert`` is kept for our own invariants.

Messages name the bad value and how to fix it, e.g.
``PlanError: tp=12 does not divide num_attention_heads=64; try tp in {1, 2, 4, 8, 16, 32, 64}``.
"""

from __future__ import annotations

import difflib

__all__ = [
    "TierwiseError",
    "UnitError",
    "CatalogError",
    "SpecError",
    "ScenarioError",
    "PlanError",
    "TopologyError",
    "MeasureError",
    "OutputError",
    "did_you_mean",
    "one_line",
    "MAX_WORD",
    "named_as_flags",
]

MAX_WORD = 160
"""Longest run of characters without a space a printed message keeps (a value the user gave, echoed)."""
MAX_MESSAGE = 1500
"""Longest message printed (a message that names many choices is cut, with an ellipsis)."""


class TierwiseError(Exception):
    """Bad input from the user. The message is complete: it names the value and the fix."""


class UnitError(TierwiseError, ValueError):
    """A quantity that does not parse or is out of range."""


class CatalogError(TierwiseError, KeyError):
    """An unknown catalog name."""

    def __str__(self) -> str:  # KeyError would add quotes around the message
        return str(self.args[0]) if self.args else ""


class SpecError(TierwiseError, ValueError):
    """A spec (accelerator, cluster, model, plan) that is malformed."""


class ScenarioError(SpecError):
    """A scenario file that does not hold together."""


class PlanError(TierwiseError, ValueError):
    """Parallel degrees that do not fit the model or the cluster."""


class TopologyError(TierwiseError, ValueError):
    """A network topology that cannot be built or simulated as asked."""


class MeasureError(TierwiseError, ValueError):
    """A measurement or a log that cannot be used."""


class OutputError(TierwiseError):
    """An output file that cannot be written where the user asked (checked before the work is done)."""


def did_you_mean(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """A suffix such as ``"; did you mean 'h100-sxm'?"`` (empty when nothing is close).

    >>> did_you_mean("h100", ["h100-sxm", "a100-sxm-80gb"])
    "; did you mean 'h100-sxm'?"
    """
    close = difflib.get_close_matches(name, sorted(choices), n=3, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def one_line(message: str) -> str:
    """``message`` on one line, every word (a run without spaces: an echoed value, a path) cut to
    :data:`MAX_WORD` characters and the whole to :data:`MAX_MESSAGE`, each cut marked ``...``.

    A value the user gave may be any size (a 100 KB string in a YAML file); the line that names it must not
    be. A cut word keeps its head and its last characters (a path's file name, a closing quote).

    >>> line = one_line("bad value '" + "a" * 100_000 + "';  fix it")
    >>> len(line), line[-30:]
    (177, "aaa...aaaaaaaaaaaaaaa'; fix it")
    """
    words = [w if len(w) <= MAX_WORD else w[: MAX_WORD - 20] + "..." + w[-17:] for w in message.split()]
    text = " ".join(words)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def named_as_flags(exc: TierwiseError, flags: dict[str, str]) -> TierwiseError:
    """``exc`` with the fields a command takes as flags named as those flags: ``num_gpus=12`` becomes
    ``--gpus 12`` and ``set ep: 1`` (a scenario file's syntax) ``use --ep 1``, for the fields in ``flags``
    (field -> flag). The same check serves a scenario file (which names ``num_gpus``) and a command line
    (which has ``--gpus``); each user reads the name they wrote. Returns a new exception of the same type.

    >>> str(named_as_flags(PlanError("num_gpus=12 is not divisible by tp=8; set ep: 1"), {"num_gpus": "--gpus",
    ...                                                                                "tp": "--tp", "ep": "--ep"}))
    '--gpus 12 is not divisible by --tp 8; use --ep 1'
    """
    import re

    text = str(exc)
    for field, flag in flags.items():
        text = re.sub(rf"(?<![\w.-]){re.escape(field)}=(?=\S)", f"{flag} ", text)
        text = re.sub(rf"\bset {re.escape(field)}: ", f"use {flag} ", text)
    return type(exc)(text)
