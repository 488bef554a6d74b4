"""Request arrivals for ``serve --simulate``: Poisson, bursty (gamma inter-arrival times), or a trace file.

* **Poisson**: exponential inter-arrival times at ``rate`` requests/s.
* **Bursty**: gamma inter-arrival times of mean ``1/rate`` and coefficient of variation ``cv`` (shape
  ``1/cv^2``): ``cv`` 1 is Poisson, larger is burstier (the arrival model of Vidur, Agrawal et al. MLSys 2024,
  and of DistServe's synthetic workloads, Zhong et al. OSDI 2024).
* **Trace**: CSV (a header row) or JSONL (one object per line) with an arrival time, a prompt length and an output
  length per request, under the column names public traces use: ``arrival_s`` / ``arrival_time`` (seconds) or
  ``timestamp`` (milliseconds: Mooncake's ``mooncake_trace.jsonl``); ``input_len`` / ``input_length`` /
  ``prompt_tokens`` / ``ContextTokens`` (Azure LLM inference trace, whose ``TIMESTAMP`` is an ISO date-time); ``output_len`` / ``output_length`` /
  ``output_tokens`` / ``GeneratedTokens``. Read through :func:`tierwise.files.read_user_text` (strict UTF-8,
  size bound); any bad value is one line naming the row and the column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from tierwise.errors import ScenarioError
from tierwise.files import read_user_text, short_repr

__all__ = ["Arrivals", "synthetic_arrivals", "read_trace", "MAX_TRACE_ROWS", "MAX_TRACE_BYTES"]

MAX_TRACE_ROWS = 10_000_000
"""Most requests a trace may hold (10^7: a simulation of that many runs for minutes)."""
MAX_TRACE_BYTES = 1024 * 2**20
"""Largest trace file read: 1 GiB."""
_ARRIVAL = (("arrival_s", 1.0), ("arrival_time", 1.0), ("arrival_time_s", 1.0), ("timestamp", 1e-3))
_INPUT = ("input_len", "input_length", "prompt_tokens", "prompt_len", "contexttokens")
_OUTPUT = ("output_len", "output_length", "output_tokens", "generatedtokens")


@dataclass(frozen=True)
class Arrivals:
    """Requests in arrival order: times (s, from 0), prompt and output lengths (tokens)."""

    time_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.time_s)


def synthetic_arrivals(n: int, rate: float, input_len: int, output_len: int, *, cv: float = 1.0,
                       seed: int = 0) -> Arrivals:
    """``n`` requests at ``rate``/s with gamma inter-arrival times of coefficient of variation ``cv`` (1 =
    Poisson), all of ``input_len`` / ``output_len`` tokens."""
    rng = np.random.default_rng(seed)
    if cv == 1.0:
        gaps = rng.exponential(1.0 / rate, n)
        kind = f"Poisson, {rate:g} requests/s"
    else:
        shape = 1.0 / cv**2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), n)
        kind = f"gamma (CV {cv:g}), {rate:g} requests/s"
    t = np.cumsum(gaps) - gaps[0]
    return Arrivals(t, np.full(n, int(input_len)), np.full(n, int(output_len)), kind)


def _pick(header: dict[str, str], names, what: str, where: str) -> str:
    for n in names:
        if n in header:
            return header[n]
    raise ScenarioError(f"{where}: no {what} column; name one of {', '.join(names)}")


def _records(text: str, where: str, jsonl: bool):
    """(row number, mapping) per request; row numbers as a person counts them (CSV: the header is row 1)."""
    if jsonl:
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"{where} line {i}: not JSON ({exc.msg}); write one object per line") from None
            if not isinstance(obj, dict):
                raise ScenarioError(f"{where} line {i}: not an object; write one {{...}} per line")
            yield i, obj
        return
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        for i, row in enumerate(reader, start=2):
            yield i, row
    except csv.Error as exc:
        raise ScenarioError(f"{where}: not a readable CSV ({exc}); fix the quoting") from None


def _number(value, row: int, col: str, where: str, *, positive: bool) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ScenarioError(f"{where} row {row}, column {col}: {short_repr(value)} is not a number") from None
    if not math.isfinite(x) or (x <= 0 if positive else x < 0):
        need = "a positive whole number of tokens" if positive else "a time >= 0"
        raise ScenarioError(f"{where} row {row}, column {col}: {short_repr(value)}; write {need}")
    return x


def _time(value, scale: float, row: int, col: str, where: str) -> float:
    """An arrival time in seconds: a number (times ``scale``) or an ISO date-time (the Azure LLM inference trace's
    ``TIMESTAMP``, e.g. ``2023-11-16 18:15:46.6805900``)."""
    if isinstance(value, str) and any(c in value for c in "-:") and not value.strip().startswith("-"):
        try:
            return datetime.fromisoformat(value.strip()).timestamp()
        except ValueError:
            raise ScenarioError(f"{where} row {row}, column {col}: {short_repr(value)} is not a number or an ISO "
                                "date-time") from None
    return _number(value, row, col, where, positive=False) * scale


def read_trace(path: str | Path) -> Arrivals:
    """A trace file (module docstring) -> :class:`Arrivals` (times shifted to start at 0)."""
    where = f"trace {str(path)!r}"
    text = read_user_text(path, what="trace file", max_bytes=MAX_TRACE_BYTES, error=ScenarioError)
    jsonl = str(path).lower().endswith((".jsonl", ".json", ".ndjson"))
    cols = None
    t, inp, out = [], [], []
    for row, rec in _records(text, where, jsonl):
        if cols is None or jsonl:
            header = {str(k).strip().lower(): k for k in rec if k is not None}
            names = [a for a, _ in _ARRIVAL]
            akey = _pick(header, names, "arrival time", where)
            scale = dict(_ARRIVAL)[next(a for a in names if a in header)]
            cols = (akey, scale, _pick(header, _INPUT, "prompt length", where),
                    _pick(header, _OUTPUT, "output length", where))
        if len(t) >= MAX_TRACE_ROWS:
            raise ScenarioError(f"{where} row {row}: more than {MAX_TRACE_ROWS:,} requests; cut the trace")
        akey, scale, ikey, okey = cols
        ti = _time(rec.get(akey), scale, row, akey, where)
        if t and ti < t[-1]:
            raise ScenarioError(f"{where} row {row}, column {akey}: {rec.get(akey)} is earlier than the row before; "
                                "sort the trace by arrival time")
        t.append(ti)
        inp.append(int(_number(rec.get(ikey), row, ikey, where, positive=True)))
        out.append(int(_number(rec.get(okey), row, okey, where, positive=True)))
    if not t:
        raise ScenarioError(f"{where} holds no requests; write a header and one row per request")
    ta = np.asarray(t)
    return Arrivals(ta - ta[0], np.asarray(inp), np.asarray(out), f"trace {Path(path).name}")
