"""Parse nccl-tests output exactly as the tool prints it, and the busbw tables some vendors publish.

What a nccl-tests log looks like (NVIDIA/nccl-tests ``src/common.cu``, v2.17-2.19): ``#`` header lines
(version, ``# Collective test starting: all_reduce_perf``, ``nThread .. nGpus ..``, one ``#  Rank  i Group
.. on HOST device ..`` line per rank), an ``NCCL version`` line, a two-block column header
(out-of-place and in-place), then one row per size::

    size  count  type  redop  root  | time algbw busbw #wrong | time algbw busbw #wrong

with time in microseconds and algbw/busbw in GB/s (1e9 B/s). Collectives without a reduction print ``none``
as redop; ``alltoall``/``sendrecv`` print ``-1`` as root. Under a launcher every line may carry a rank
prefix: OpenMPI ``--tag-output`` writes ``[1,0]<stdout>:``, Slurm ``srun -l`` writes ``0: ``. Warnings
(``NCCL WARN``, ``NCCL INFO`` lines, MPI chatter) are skipped.

Also accepted:

* a *reformatted* table (size, time, algbw, busbw only, digit-group underscores such as ``1_073_741_824``),
  as in stas00/ml-engineering's ``network/README.md``;
* the Azure AI-benchmarking-guide busbw table (tab-separated: ``size_label`` then one busbw column per
  system named ``..._<acc>x<N>_busbw``). That table has no time; we derive
  ``time = size x bus_factor / busbw`` from the nccl-tests definition (PERFORMANCE.md), so its times carry
  the rounding of a two-decimal busbw.

The collective comes from ``# Collective test starting: X_perf``, else from the file name
(``allreduce``, ``all_gather``, ...), else from ``op=`` given by the caller. The number of ranks comes from
the ``# Rank`` lines, else from busbw/algbw of the largest row (busbw/algbw = 2(n-1)/n for all-reduce,
(n-1)/n for gathers, so n = 2/(2-r) or 1/(1-r)), else from ``num_ranks=``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import MeasureError, SpecError
from tierwise.files import MAX_LOG_BYTES, read_user_text

__all__ = ["NcclRow", "NcclSweep", "parse_nccl_log", "parse_nccl_text", "parse_nccl_json", "parse_nccl_json_text"]

# launcher prefixes: OpenMPI --tag-output "[1,0]<stdout>:", Slurm srun -l "0: " / "12:"
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s))")
_START = re.compile(r"#\s*Collective test starting:\s*(\w+?)_perf")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device"
                   r"(?:\s+\d+\s+\[[^\]]*\]\s+(?P<gpu>.+?))?\s*$")
_VERSION = re.compile(r"^\s*NCCL version\s+(\d\S*)")
_LIBRARY = re.compile(r"nccl-library=(\d+)")
_NUM = r"[0-9][0-9_]*(?:\.[0-9]*)?(?:[eE][+-]?\d+)?"
# full row: size count type redop root, then a block of columns per placement (out-of-place, optionally
# in-place): time algbw busbw #wrong (4), or with -I also i_min i_max i_p99 i_cv% (8); with -S a trailing
# "YYYY-MM-DD HH:MM:SS" timestamp
_HEAD = re.compile(r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>[a-z0-9_]+)\s+(?P<redop>[a-z]+)\s+"
                   r"(?P<root>-?\d+)\s+(?P<rest>.*?)\s*$")
_STAMP = re.compile(r"(?:^|\s+)(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)$")
_CELL = re.compile(rf"^(?:{_NUM}|N/A|nan|-?inf)$")
_PER_ITER = re.compile(r"i_min|Per-Iteration Report")
_TIERWISE = re.compile(r"#\s*tierwise measure collective:\s*(?P<op>[a-z-]+),\s*(?P<n>\d+) ranks"
                       r"(?:,\s*backend (?P<backend>\w+))?")
_NOTE = re.compile(r"#\s*NOTE:\s*(?P<note>.+?)\s*$")
# reformatted 4-column row: size time algbw busbw
_SHORT = re.compile(rf"^\s*(?P<size>[0-9][0-9_]*)\s+(?P<t>{_NUM})\s+(?P<alg>{_NUM})\s+(?P<bus>{_NUM})\s*$")
_SIZE_LABEL = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>[KMGT]?)$")

_FILENAME_OPS = (
    ("all_reduce", "all-reduce"),
    ("allreduce", "all-reduce"),
    ("reduce_scatter", "reduce-scatter"),
    ("reducescatter", "reduce-scatter"),
    ("all_gather", "all-gather"),
    ("allgather", "all-gather"),
    ("alltoall", "all-to-all"),
    ("all_to_all", "all-to-all"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send-recv"),
)


@dataclass(frozen=True, kw_only=True)
class NcclRow:
    """One size of a sweep, in SI units (seconds, bytes/s)."""

    size_bytes: float
    """nccl-tests' size column: max(send, recv) bytes, i.e. the whole gathered buffer for all-gather."""
    time_s: float
    """Out-of-place time per operation (nccl-tests: batch time / iters, averaged over ranks)."""
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    wrong: int | None = None
    """nccl-tests' #wrong column (elements that failed validation); None when not printed."""
    in_place_time_s: float | None = None
    in_place_busbw_bytes_per_s: float | None = None
    in_place_wrong: int | None = None
    iter_min_s: float | None = None
    """nccl-tests ``-I`` (per-iteration timing): the out-of-place columns i_min, i_max, i_p99 (seconds) and
    i_cv% (percent); None when not printed."""
    iter_max_s: float | None = None
    iter_p99_s: float | None = None
    iter_cv_pct: float | None = None
    timestamp: str | None = None
    """nccl-tests ``-S``: when the row was printed (``YYYY-MM-DD HH:MM:SS``, the host's local time)."""
    host_memory_s_per_byte: float | None = None
    """tierwise gloo results only: seconds per byte of memory traffic of a streaming (DRAM) copy on the same
    host in the same run, every rank copying at once (``measure collective``'s host memory probe; the
    host-copy model's price of copies outside gloo's algorithm)."""


@dataclass(frozen=True, kw_only=True)
class NcclSweep:
    """One collective swept over sizes, as read from one log (or one column of a table)."""

    op: str
    """Canonical collective name (:func:`tierwise.collectives.volumes.normalize_kind`)."""
    num_ranks: int
    rows: tuple[NcclRow, ...]
    source: str
    """The file (and column) it came from."""
    ranks_per_node: int | None = None
    """Largest number of ranks on one host, from the ``# Rank .. on HOST`` lines; None if not printed."""
    nccl_version: str | None = None
    label: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    backend: str = ""
    """torch.distributed backend of a tierwise result (``gloo``, ``nccl``); empty for nccl-tests logs."""
    device: str = ""
    """The GPU the log names (``# Rank .. device 0 [..] NVIDIA H100 80GB HBM3``, or the -J document's
    ``device_info``); empty when it names none."""
    run: str = ""
    """The ``measure collective`` run a tierwise result's rows came from (their ``run`` key: several runs
    may share one ``--out`` file); empty for nccl-tests logs and older results."""

    @property
    def num_nodes(self) -> int | None:
        if self.ranks_per_node is None:
            return None
        return -(-self.num_ranks // self.ranks_per_node)


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1).rstrip("\n")


def _num(text: str | None) -> float | None:
    if text is None or text == "N/A":
        return None
    return float(text.replace("_", ""))


def _op_from_name(name: str) -> str | None:
    low = name.lower()
    for key, op in _FILENAME_OPS:
        if key in low:
            return op
    return None


def _infer_ranks(op: str, rows: list[NcclRow]) -> int | None:
    """n from busbw/algbw of the largest row (most significant digits); None for factor-1 collectives."""
    if op in ("broadcast", "send-recv"):
        return None
    big = max(rows, key=lambda r: r.size_bytes)
    if big.algbw_bytes_per_s <= 0:
        return None
    ratio = big.busbw_bytes_per_s / big.algbw_bytes_per_s
    denom = (2.0 - ratio) if op == "all-reduce" else (1.0 - ratio)
    if denom <= 0:
        return None
    n = round((2.0 if op == "all-reduce" else 1.0) / denom)
    return n if n >= 2 else None


def _match_full(line: str, per_iter: bool) -> dict | None:
    """The cells of a full nccl-tests row (plain, ``-I`` per-iteration, ``-S`` timestamped), or None.

    Keys: size, t, alg, bus, wrong, t2, bus2, wrong2 (in-place, None when absent), i_min, i_max, i_p99, i_cv
    (out-of-place per-iteration, None when absent), ts. ``per_iter`` says the header announced ``-I``
    columns; 16 cells mean them even without the header (two blocks of 8).
    """
    m = _HEAD.match(line)
    if m is None:
        return None
    rest, ts = m["rest"], None
    if (stamp := _STAMP.search(rest)) is not None:
        ts, rest = stamp["ts"], rest[: stamp.start()]
    cells = rest.split()
    if not cells or not all(_CELL.match(c) for c in cells):
        return None
    block = 8 if per_iter or len(cells) == 16 else 4
    if len(cells) not in (block, 2 * block):
        return None
    first, second = cells[:block], cells[block:]
    out = {"size": m["size"], "t": first[0], "alg": first[1], "bus": first[2], "wrong": first[3],
           "t2": second[0] if second else None, "bus2": second[2] if second else None,
           "wrong2": second[3] if second else None, "ts": ts,
           "i_min": None, "i_max": None, "i_p99": None, "i_cv": None}
    if block == 8:
        out.update(i_min=first[4], i_max=first[5], i_p99=first[6], i_cv=first[7])
    return out


def _count(text: str | None) -> int | None:
    value = _num(text)
    return None if value is None or value != value else int(value)


def _num_or_none(text: str | None) -> float | None:
    if text is None or text in ("N/A", "nan", "-nan", "inf", "-inf"):
        return None
    return _num(text)


def _row_full(m: dict) -> NcclRow:
    size = float(m["size"])
    t = _num_or_none(m["t"])
    if t is None:
        raise MeasureError(f"row for size {int(size)} has no time ({m['t']}); was that size skipped by nccl-tests?")
    t2 = _num_or_none(m["t2"])
    bus2 = _num_or_none(m["bus2"])
    us = {k: _num_or_none(m[k]) for k in ("i_min", "i_max", "i_p99")}
    return NcclRow(
        size_bytes=size,
        time_s=t * 1e-6,
        algbw_bytes_per_s=(_num_or_none(m["alg"]) or 0.0) * 1e9,
        busbw_bytes_per_s=(_num_or_none(m["bus"]) or 0.0) * 1e9,
        wrong=_count(m["wrong"]),
        in_place_time_s=t2 * 1e-6 if t2 is not None else None,
        in_place_busbw_bytes_per_s=bus2 * 1e9 if bus2 is not None else None,
        in_place_wrong=_count(m["wrong2"]),
        iter_min_s=us["i_min"] * 1e-6 if us["i_min"] is not None else None,
        iter_max_s=us["i_max"] * 1e-6 if us["i_max"] is not None else None,
        iter_p99_s=us["i_p99"] * 1e-6 if us["i_p99"] is not None else None,
        iter_cv_pct=_num_or_none(m["i_cv"]),
        timestamp=m["ts"],
    )


def _row_short(m: re.Match) -> NcclRow:
    return NcclRow(
        size_bytes=float(m["size"].replace("_", "")),
        time_s=float(m["t"]) * 1e-6,
        algbw_bytes_per_s=float(m["alg"]) * 1e9,
        busbw_bytes_per_s=float(m["bus"]) * 1e9,
    )


def _resolve_op(found: str | None, source: str, op: str | None) -> str:
    if op is not None:
        try:
            return normalize_kind(op)
        except SpecError as exc:
            raise MeasureError(str(exc)) from None
    if found:
        return normalize_kind(found)
    by_name = _op_from_name(Path(source).name)
    if by_name:
        return by_name
    raise MeasureError(
        f"{source}: cannot tell which collective this log measured (no '# Collective test starting' line "
        "and none in the file name); pass --op all-reduce (or all-gather, ...)"
    )


def parse_nccl_text(text: str, source: str = "<text>", *, op: str | None = None,
                    num_ranks: int | None = None) -> list[NcclSweep]:
    """Parse one log's text into sweeps (one for a nccl-tests log, one per column for a busbw table, one per
    block of ``tierwise measure collective``'s table, the document of nccl-tests ``-J``).

    Raises :class:`MeasureError` when the text holds no nccl-tests rows.
    """
    if text.lstrip().startswith("{"):
        return parse_nccl_json_text(text, source, op=op, num_ranks=num_ranks)
    lines = [_strip(line) for line in text.splitlines()]
    if any(line.startswith("size_label") for line in lines):
        return _parse_busbw_table(lines, source, op=op)
    scan = _scan_log(lines, source)
    if scan.ours is not None:
        return _tierwise_sweeps(scan.blocks, source, op=op, num_ranks=num_ranks)
    started, hosts, version, rows, gpus = scan.started, scan.hosts, scan.version, scan.rows, scan.gpus
    if not rows:
        raise MeasureError(
            f"{source}: no nccl-tests result rows found; expected lines like "
            "'  1048576  262144  float  sum  -1  92.47  11.34  21.97  0 ...' (is this an nccl-tests log?)"
        )
    kind = _resolve_op(started, source, op)
    n = num_ranks or (len(hosts) if hosts else None) or _infer_ranks(kind, rows)
    if n is None or n < 2:
        raise MeasureError(f"{source}: cannot tell the number of ranks (no '# Rank' lines); pass --ranks N")
    per_host: dict[str, int] = {}
    for host in hosts.values():
        per_host[host] = per_host.get(host, 0) + 1
    rows.sort(key=lambda r: r.size_bytes)
    return [
        NcclSweep(
            op=kind,
            num_ranks=int(n),
            rows=tuple(rows),
            source=source,
            ranks_per_node=max(per_host.values()) if per_host else None,
            nccl_version=version,
            label=Path(source).stem,
            device=gpus.pop() if len(gpus) == 1 else "",
        )
    ]


class _LogScan(NamedTuple):
    """What one pass over a log's lines found (see :func:`_scan_log`)."""

    started: str | None
    hosts: dict[int, str]
    version: str | None
    rows: list[NcclRow]
    gpus: set[str]
    ours: dict | None
    blocks: list[tuple[dict, list[NcclRow]]]


def _scan_log(lines: list[str], source: str) -> _LogScan:
    """One pass over a text log: its test name, ranks' hosts and GPUs, NCCL version and result rows, or the
    blocks of a ``tierwise measure collective`` table (``ours`` is then its last block's header)."""
    started: str | None = None
    hosts: dict[int, str] = {}
    version = None
    rows: list[NcclRow] = []
    sizes_seen: set[float] = set()
    gpus: set[str] = set()
    per_iter = False
    ours: dict | None = None  # the current block of a `tierwise measure collective` table
    blocks: list[tuple[dict, list[NcclRow]]] = []
    for line in lines:
        if (m := _TIERWISE.search(line)) is not None:
            if ours is not None and rows:
                blocks.append((ours, rows))
            ours, rows, sizes_seen = {"op": m["op"], "n": int(m["n"]), "backend": m["backend"] or "", "notes": []}, \
                [], set()
            continue
        if ours is not None and (m := _NOTE.search(line)) is not None:
            ours["notes"].append(m["note"])
            continue
        if (m := _START.search(line)) is not None:
            if started is not None and rows:
                break  # a second test in the same file: keep the first (one sweep per log)
            started = m[1]
            continue
        if (m := _RANK.search(line)) is not None:
            hosts[int(m[1])] = m[2]
            gpus.add(m["gpu"] or "")
            continue
        if (m := _VERSION.search(line)) is not None:
            version = m[1]
            continue
        if (m := _LIBRARY.search(line)) is not None and version is None:
            code = int(m[1])  # NCCL_VERSION_CODE = major*10000 + minor*100 + patch (nccl.h)
            version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            continue
        if _PER_ITER.search(line) and line.lstrip().startswith("#"):
            per_iter = True  # -I: 8 columns per placement
            continue
        if line.lstrip().startswith("#") or not line.strip():
            continue
        row = _result_row(line, per_iter, source)
        if row is None:
            continue  # warnings, NCCL INFO lines, launcher chatter
        if row.size_bytes in sizes_seen:
            continue  # the same row printed by several ranks under a launcher
        sizes_seen.add(row.size_bytes)
        rows.append(row)
    if ours is not None and rows:
        blocks.append((ours, rows))
    return _LogScan(started, hosts, version, rows, gpus, ours, blocks)


def _result_row(line: str, per_iter: bool, source: str) -> NcclRow | None:
    """The result row on ``line`` (nccl-tests' full columns or the short form); None for any other line."""
    full = _match_full(line, per_iter)
    short = None if full is not None else _SHORT.match(line)
    if full is None and short is None:
        return None
    try:
        return _row_full(full) if full is not None else _row_short(short)
    except MeasureError as exc:
        raise MeasureError(f"{source}: {exc}") from None


def _tierwise_sweeps(blocks: list[tuple[dict, list[NcclRow]]], source: str, *, op: str | None,
                     num_ranks: int | None) -> list[NcclSweep]:
    """One sweep per block of ``tierwise measure collective``'s printed table (its header names the op, the
    ranks and the backend; a local run is one host). ``op``/``num_ranks`` given by the caller win."""
    if not blocks:
        raise MeasureError(f"{source}: a tierwise measure collective table with no result rows; measure again "
                           "(or use the --out JSON, which keeps the completed sizes)")
    sweeps = []
    for head, rows in blocks:
        try:
            kind = normalize_kind(op or head["op"])
        except SpecError as exc:
            raise MeasureError(f"{source}: {exc}") from None
        n = num_ranks or head["n"]
        if n < 2:
            raise MeasureError(f"{source}: a collective on {n} rank(s); pass --ranks N")
        rows.sort(key=lambda r: r.size_bytes)
        sweeps.append(NcclSweep(op=kind, num_ranks=int(n), rows=tuple(rows), source=source,
                                ranks_per_node=int(n), label=f"{head['backend'] or 'tierwise'}-{kind}-{n}",
                                notes=tuple(head["notes"]), backend=head["backend"]))
    return sweeps


_JSON_HINT = "nccl-tests writes its -J file when the run ends: was the run interrupted?"


def parse_nccl_json_text(text: str, source: str = "<text>", *, op: str | None = None,
                         num_ranks: int | None = None) -> list[NcclSweep]:
    """Parse the JSON document nccl-tests writes with ``-J FILE`` (see :func:`parse_nccl_json`)."""
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MeasureError(f"{source}: malformed JSON at line {exc.lineno}: {exc.msg}; {_JSON_HINT}") from None
    except (RecursionError, ValueError) as exc:  # nesting; an integer of more than 4300 digits
        raise MeasureError(f"{source}: unreadable JSON ({type(exc).__name__}); not an nccl-tests -J document") \
            from None
    return parse_nccl_json(data, source, op=op, num_ranks=num_ranks)


def _json_number(value, where: str) -> float | None:
    """A number of the document; nccl-tests writes NaN as the string "nan"; None for null/nan."""
    if value is None or value == "nan":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MeasureError(f"{where} is {str(value)[:40]!r}, not a number; is this an nccl-tests -J document?")
    try:
        value = float(value)
    except OverflowError:
        raise MeasureError(f"{where} is a number too large for a float; is this an nccl-tests -J document?") from None
    return value if math.isfinite(value) else None


def parse_nccl_json(data, source: str = "<json>", *, op: str | None = None,
                    num_ranks: int | None = None) -> list[NcclSweep]:
    """One sweep from nccl-tests' ``-J`` document (``src/util.cu``, JSON_FILE_VERSION 2)::

        {"version": 2, "start_time": .., "args": ["./all_reduce_perf", ..], "env": [..], "nccl_version": 22403,
         "config": {"nthreads": 1, "ngpus": 8, .., "devices": [{"rank", "hostname", "device_info", ..}]},
         "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
                      "out_of_place": {"time": 33.18, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                      "in_place": {..}, ["out_of_place_per_iter": {"min_us", "max_us", "p99_us", "cv_pct", ..}]
                      "actual_iterations": 20, "experiment_name": ..}, ..], ..}

    Times are microseconds (``cpu_time`` instead of ``time`` under ``-C``), bandwidths GB/s; ``"nan"`` is NaN.
    The collective comes from the program in ``args[0]`` (``all_reduce_perf``), else the file name, else
    ``op``. Ranks: one ``devices`` entry per process (nccl-tests records each process's first GPU), times
    ``nthreads x ngpus``; else the busbw/algbw ratio; else ``num_ranks``.
    """
    if not isinstance(data, dict) or "results" not in data:
        raise MeasureError(f"{source}: a JSON object without 'results'; expected nccl-tests' -J document or a "
                           "tierwise result list")
    results = data["results"]
    if not isinstance(results, list):
        raise MeasureError(f"{source}: 'results' is {type(results).__name__}, not a list; is this an nccl-tests "
                           "-J document?")
    rows: list[NcclRow] = []
    seen: set[float] = set()
    for i, item in enumerate(results):
        row = _json_row(item, f"{source}: results[{i}]", seen)
        if row is not None:
            rows.append(row)
    if not rows:
        raise MeasureError(f"{source}: an nccl-tests -J document with no results; {_JSON_HINT}")
    kind = _json_op(data, source, op)
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    devices = config.get("devices") if isinstance(config.get("devices"), list) else []
    devices = [d for d in devices if isinstance(d, dict)]
    per_process = 1
    for key in ("nthreads", "ngpus"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            per_process *= value
    counted = len(devices) * per_process if devices else None
    n = num_ranks or (counted if counted and counted >= 2 else None) or _infer_ranks(kind, rows)
    if n is None or n < 2:
        raise MeasureError(f"{source}: cannot tell the number of ranks (no config.devices); pass --ranks N")
    per_host: dict[str, int] = {}
    for d in devices:
        host = str(d.get("hostname", ""))
        per_host[host] = per_host.get(host, 0) + per_process
    code = data.get("nccl_version")
    version = (f"{code // 10000}.{code // 100 % 100}.{code % 100}"
               if isinstance(code, int) and not isinstance(code, bool) and code > 0 else None)
    rows.sort(key=lambda r: r.size_bytes)
    gpus = {str(d.get("device_info", "")).strip() for d in devices}
    return [NcclSweep(op=kind, num_ranks=int(n), rows=tuple(rows), source=source,
                      ranks_per_node=max(per_host.values()) if per_host else None, nccl_version=version,
                      label=Path(source).stem, device=gpus.pop() if len(gpus) == 1 else "")]


def _json_row(item, where: str, seen: set[float]) -> NcclRow | None:
    """One entry of a -J document's ``results`` (see :func:`parse_nccl_json`) as a row; ``where`` names it.
    None for a size already in ``seen`` (the same row written twice); a new size is added to ``seen``."""
    if not isinstance(item, dict):
        raise MeasureError(f"{where} is {type(item).__name__}, not an object; is this an nccl-tests -J document?")
    size = _json_number(item.get("size"), f"{where}.size")
    if size is None or not math.isfinite(size) or size < 0 or size != int(size):
        raise MeasureError(f"{where}.size is {item.get('size')!r}; expected a byte count")
    out_place, in_place = item.get("out_of_place"), item.get("in_place")
    block = out_place if isinstance(out_place, dict) else in_place
    if not isinstance(block, dict):
        raise MeasureError(f"{where} has neither out_of_place nor in_place timings; is this an nccl-tests -J "
                           "document?")
    t = _json_number(block.get("time", block.get("cpu_time")), f"{where} time")
    if t is None or t <= 0:
        raise MeasureError(f"{where} (size {int(size)}) has no usable time ({t}); was that size skipped?")
    alg = _json_number(block.get("alg_bw"), f"{where}.alg_bw") or 0.0
    bus = _json_number(block.get("bus_bw"), f"{where}.bus_bw") or 0.0
    wrong = _json_number(block.get("nwrong"), f"{where}.nwrong")
    ip = in_place if isinstance(in_place, dict) and block is out_place else None
    t2 = _json_number(ip.get("time", ip.get("cpu_time")), f"{where}.in_place time") if ip else None
    bus2 = _json_number(ip.get("bus_bw"), f"{where}.in_place.bus_bw") if ip else None
    wrong2 = _json_number(ip.get("nwrong"), f"{where}.in_place.nwrong") if ip else None
    it = item.get("out_of_place_per_iter") if block is out_place else item.get("in_place_per_iter")
    it = it if isinstance(it, dict) else {}
    us = {k: _json_number(it.get(k), f"{where} per-iteration {k}") for k in ("min_us", "max_us", "p99_us")}
    if size in seen:
        return None
    seen.add(size)
    return NcclRow(
        size_bytes=size, time_s=t * 1e-6, algbw_bytes_per_s=alg * 1e9, busbw_bytes_per_s=bus * 1e9,
        wrong=None if wrong is None else int(wrong),
        in_place_time_s=None if t2 is None else t2 * 1e-6,
        in_place_busbw_bytes_per_s=None if bus2 is None else bus2 * 1e9,
        in_place_wrong=None if wrong2 is None else int(wrong2),
        iter_min_s=None if us["min_us"] is None else us["min_us"] * 1e-6,
        iter_max_s=None if us["max_us"] is None else us["max_us"] * 1e-6,
        iter_p99_s=None if us["p99_us"] is None else us["p99_us"] * 1e-6,
        iter_cv_pct=_json_number(it.get("cv_pct"), f"{where} per-iteration cv_pct"),
    )


def _json_op(data: dict, source: str, op: str | None) -> str:
    """The collective of a -J document: its program in ``args[0]`` (``all_reduce_perf``), else as
    :func:`_resolve_op` finds it."""
    args = data.get("args")
    program = Path(str(args[0])).name if isinstance(args, list) and args and isinstance(args[0], str) else ""
    found = m[1] if (m := re.match(r"(\w+?)_perf", program)) else None
    if found is not None and op is None:
        try:
            normalize_kind(found)
        except SpecError:
            found = _op_from_name(found)
    return _resolve_op(found, source, op)


def _size_label(label: str) -> float:
    """Azure's labels are powers of two printed loosely ('65K' = 65536, '132K' = 131072, '33M' = 2**25)."""
    m = _SIZE_LABEL.match(label.strip())
    if m is None:
        raise MeasureError(f"unreadable size label {label!r} in busbw table")
    value = float(m["num"])
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m["unit"]]
    # round to the nearest power of two in the label's unit, which is what the sweep (-f 2) ran
    return float(2 ** round(math.log2(value))) * scale


def _parse_busbw_table(lines: list[str], source: str, *, op: str | None) -> list[NcclSweep]:
    header_i = next(i for i, line in enumerate(lines) if line.startswith("size_label"))
    columns = lines[header_i].split("\t")
    kind = _resolve_op(None, source, op)
    data = [line.split("\t") for line in lines[header_i + 1 :] if line.strip() and not line.startswith("#")]
    sweeps = []
    for j, name in enumerate(columns[1:], start=1):
        m = re.search(r"x(\d+)_busbw$", name)
        if m is None:
            raise MeasureError(f"{source}: column {name!r} does not name its rank count ('..x8_busbw')")
        n = int(m[1])
        factor = float(bus_factor(kind, n))
        rows = []
        for cells in data:
            size = _size_label(cells[0])
            busbw = float(cells[j]) * 1e9
            if busbw <= 0:
                continue
            rows.append(NcclRow(size_bytes=size, time_s=size * factor / busbw,
                                algbw_bytes_per_s=busbw / factor, busbw_bytes_per_s=busbw))
        if not rows:
            raise MeasureError(f"{source}: column {name!r} has no rows")
        sweeps.append(NcclSweep(op=kind, num_ranks=n, rows=tuple(rows), source=f"{source}#{name}",
                                ranks_per_node=n, label=name,
                                notes=("time derived from busbw (table has no time column)",)))
    return sweeps


def read_text(path: str | Path, what: str = "log") -> str:
    """A file's text through :func:`tierwise.files.read_user_text`: a missing file, a directory, a FIFO or a
    device, a file over 256 MiB or a binary file (NUL bytes) is a one-line :class:`MeasureError`; bytes that
    are not UTF-8 become U+FFFD (logs are read as they are)."""

    return read_user_text(path, what=what, max_bytes=MAX_LOG_BYTES, error=MeasureError, strict_utf8=False)


def parse_nccl_log(path: str | Path, *, op: str | None = None, num_ranks: int | None = None) -> list[NcclSweep]:
    """Read and parse one nccl-tests log file (see the module docstring for the accepted formats)."""
    return parse_nccl_text(read_text(path), str(path), op=op, num_ranks=num_ranks)
