"""Bounds on every number a user gives, and the two checks that enforce them (issue 12, "Numbers").

A count or a figure outside its range is an error naming the value and the range, never an answer that is
NaN, an overflow deep inside numpy, or a loop that runs for minutes. The maximums are far past anything
real (no cluster has 2^20 GPUs; no switch has 4,096 ports) and small enough that the arithmetic behind
them stays exact in int64 and finite in float64.

>>> check_int(8, "--ranks", maximum=MAX_GPUS)
8
>>> check_int(0, "--ranks", maximum=MAX_GPUS)
Traceback (most recent call last):
...
tierwise.errors.UnitError: --ranks 0 is out of range; use 1 <= --ranks <= 1,048,576
"""

from __future__ import annotations

import math
from typing import Any

from tierwise.errors import TierwiseError, UnitError

__all__ = [
    "MAX_GPUS", "MAX_BATCH", "MAX_SEQ", "MAX_DIM", "MAX_LAYERS", "MAX_RADIX", "MAX_BYTES", "MAX_SWEEP_POINTS",
    "MAX_SWEEP_BYTES", "MAX_BANDWIDTH", "MIN_BANDWIDTH", "MAX_LATENCY_S", "MAX_OVERSUBSCRIPTION", "MAX_FABRIC_GPUS", "MAX_SIM_GPUS", "MAX_ITERS", "MAX_ROUNDS",
    "MAX_MEASURE_RANKS", "check_int", "check_float", "range_text", "show_value",
]

MAX_GPUS = 2**20
"""GPUs, ranks and parallel degrees: 1,048,576, a bound no cluster reaches (the largest have ~10^5)."""
MAX_BATCH = 2**24
"""Global and micro batch sizes in sequences (16,777,216)."""
MAX_SEQ = 2**24
"""Sequence length in tokens (16,777,216)."""
MAX_DIM = 2**24
"""Model widths: hidden size, FFN size, heads, vocabulary, experts (16,777,216)."""
MAX_LAYERS = 2**16
"""Model layers (65,536)."""
MAX_RADIX = 4096
"""Switch ports (the largest switch ASICs have 512 ports at their lowest speed)."""
MAX_FABRIC_GPUS = 2**20
"""GPUs of a fabric built link by link (``topo``, ``design``, the fabric every command chooses): 1,048,576, the
frontier clusters' scale (a 3-tier radix-128 fabric of 2^20 NICs builds in about 3 s, issue 28)."""
MAX_SIM_GPUS = 2**17
"""GPUs a flow-level simulation runs on (``simulate``): 131,072; an all-to-all on a larger fabric takes minutes
(docs/topology.md, benchmarks)."""
MAX_BYTES = 2**50
"""One collective's buffer: 1 PiB, more than any cluster's memory holds."""
MAX_SWEEP_POINTS = 64
"""Sizes of one measured sweep (a doubling sweep from 1 B to 1 TiB has 41)."""
MAX_SWEEP_BYTES = 2**40
"""One measured buffer: 1 TiB."""
MAX_BANDWIDTH = 1e15
"""One link's rate in bytes/s: 1 PB/s, a thousand times NVLink 5's 900 GB/s one way."""
MIN_BANDWIDTH = 1e3
"""One link's rate in bytes/s at least: 1 kB/s (a slower one turns a training step into years)."""
MAX_LATENCY_S = 1.0
"""One hop or link latency: a second is a million times any switch's."""
MAX_OVERSUBSCRIPTION = 1024.0
MAX_ITERS = 100_000
"""Timed or warm-up operations (or steps) per measured point."""
MAX_ROUNDS = 1_000
MAX_MEASURE_RANKS = 256
"""Local processes a measuring command spawns on one machine."""


def _fmt(x: float) -> str:
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 2**63):
        return f"{int(x):,}"
    return f"{x:g}"


def range_text(what: str, minimum: float | None, maximum: float | None, *, min_open: bool = False,
               max_open: bool = False) -> str:
    """``"1 <= --ranks <= 1,048,576"``, ``"--factor > 1"``, ..."""
    parts = []
    if minimum is not None:
        parts.append(f"{_fmt(minimum)} {'<' if min_open else '<='} ")
    parts.append(what)
    if maximum is not None:
        parts.append(f" {'<' if max_open else '<='} {_fmt(maximum)}")
    return "".join(parts)


def show_value(value: Any) -> str:
    """A user's value for a message: strings quoted, anything longer than 40 characters cut."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_int(value: Any, what: str, *, minimum: int = 1, maximum: int = MAX_GPUS,
              error: type[TierwiseError] = UnitError, hint: str = "", sep: str = " ", where: str = "") -> int:
    """``value`` as an int in ``[minimum, maximum]``; otherwise ``error`` naming ``what``, the value, the range.

    Accepts ints and whole floats (YAML ``8.0``); rejects bools, NaN, infinities and fractions. ``sep`` joins
    the name and the value (``"="`` for spec fields: ``tp=0``); ``where`` (e.g. ``"in scenario 'a.yaml'"``)
    follows the value.
    """
    rng = range_text(what, minimum, maximum)
    head = f"{what}{sep}{show_value(value)}{' ' + where if where else ''}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{head} is not a whole number; use {rng}{hint}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise error(f"{head} is not a whole number; use {rng}{hint}")
    if not minimum <= value <= maximum:
        raise error(f"{head} is out of range; use {rng}{hint}")
    return int(value)


def check_float(value: Any, what: str, *, minimum: float | None = None, maximum: float | None = None,
                min_open: bool = False, max_open: bool = False, error: type[TierwiseError] = UnitError,
                hint: str = "", sep: str = " ", where: str = "") -> float:
    """``value`` as a finite float in the range (open or closed ends); NaN and infinities are errors."""
    rng = range_text(what, minimum, maximum, min_open=min_open, max_open=max_open)
    head = f"{what}{sep}{show_value(value)}{' ' + where if where else ''}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{head} is not a number; use {rng}{hint}")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        number = math.inf if value > 0 else -math.inf
    if not math.isfinite(number):
        raise error(f"{head} is not a finite number; use {rng}{hint}")
    low_bad = minimum is not None and (number <= minimum if min_open else number < minimum)
    high_bad = maximum is not None and (number >= maximum if max_open else number > maximum)
    if low_bad or high_bad:
        raise error(f"{head} is out of range; use {rng}{hint}")
    return number
