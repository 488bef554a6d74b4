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

import re
from dataclasses import dataclass, field
from pathlib import Path

from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import MeasureError, SpecError

__all__ = ["NcclRow", "NcclSweep", "parse_nccl_log", "parse_nccl_text"]

# launcher prefixes: OpenMPI --tag-output "[1,0]<stdout>:", Slurm srun -l "0: " / "12:"
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s))")
_START = re.compile(r"#\s*Collective test starting:\s*(\w+?)_perf")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_VERSION = re.compile(r"^\s*NCCL version\s+(\d\S*)")
_LIBRARY = re.compile(r"nccl-library=(\d+)")
_NUM = r"[0-9][0-9_]*(?:\.[0-9]*)?(?:[eE][+-]?\d+)?"
# full row: size count type redop root, then 4 (out-of-place) and optionally 4 (in-place) columns
_FULL = re.compile(
    rf"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>[a-z0-9_]+)\s+(?P<redop>[a-z]+)\s+(?P<root>-?\d+)"
    rf"\s+(?P<t>{_NUM}|N/A)\s+(?P<alg>{_NUM}|N/A)\s+(?P<bus>{_NUM}|N/A)\s+(?P<wrong>\d+|N/A)"
    rf"(?:\s+(?P<t2>{_NUM}|N/A)\s+(?P<alg2>{_NUM}|N/A)\s+(?P<bus2>{_NUM}|N/A)\s+(?P<wrong2>\d+|N/A))?\s*$"
)
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


def _row_full(m: re.Match) -> NcclRow:
    size = float(m["size"])
    t = _num(m["t"])
    if t is None:
        raise MeasureError(f"row for size {int(size)} has no time (N/A); was that size skipped by nccl-tests?")
    t2 = _num(m["t2"])
    bus2 = _num(m["bus2"])
    return NcclRow(
        size_bytes=size,
        time_s=t * 1e-6,
        algbw_bytes_per_s=(_num(m["alg"]) or 0.0) * 1e9,
        busbw_bytes_per_s=(_num(m["bus"]) or 0.0) * 1e9,
        wrong=int(m["wrong"]) if m["wrong"] not in (None, "N/A") else None,
        in_place_time_s=t2 * 1e-6 if t2 is not None else None,
        in_place_busbw_bytes_per_s=bus2 * 1e9 if bus2 is not None else None,
        in_place_wrong=int(m["wrong2"]) if m["wrong2"] not in (None, "N/A") else None,
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
    """Parse one log's text into sweeps (one for a nccl-tests log, one per column for a busbw table).

    Raises :class:`MeasureError` when the text holds no nccl-tests rows.
    """
    lines = [_strip(line) for line in text.splitlines()]
    if any(line.startswith("size_label") for line in lines):
        return _parse_busbw_table(lines, source, op=op)
    started: str | None = None
    hosts: dict[int, str] = {}
    version = None
    rows: list[NcclRow] = []
    sizes_seen: set[float] = set()
    for line in lines:
        if (m := _START.search(line)) is not None:
            if started is not None and rows:
                break  # a second test in the same file: keep the first (one sweep per log)
            started = m[1]
            continue
        if (m := _RANK.search(line)) is not None:
            hosts[int(m[1])] = m[2]
            continue
        if (m := _VERSION.search(line)) is not None:
            version = m[1]
            continue
        if (m := _LIBRARY.search(line)) is not None and version is None:
            code = int(m[1])  # NCCL_VERSION_CODE = major*10000 + minor*100 + patch (nccl.h)
            version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            continue
        if line.lstrip().startswith("#") or not line.strip():
            continue
        m = _FULL.match(line) or _SHORT.match(line)
        if m is None:
            continue  # warnings, NCCL INFO lines, launcher chatter
        row = _row_full(m) if m.re is _FULL else _row_short(m)
        if row.size_bytes in sizes_seen:
            continue  # the same row printed by several ranks under a launcher
        sizes_seen.add(row.size_bytes)
        rows.append(row)
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
        )
    ]


def _size_label(label: str) -> float:
    """Azure's labels are powers of two printed loosely ('65K' = 65536, '132K' = 131072, '33M' = 2**25)."""
    m = _SIZE_LABEL.match(label.strip())
    if m is None:
        raise MeasureError(f"unreadable size label {label!r} in busbw table")
    value = float(m["num"])
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m["unit"]]
    # round to the nearest power of two in the label's unit, which is what the sweep (-f 2) ran
    import math

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
    from tierwise.files import MAX_LOG_BYTES, read_user_text

    return read_user_text(path, what=what, max_bytes=MAX_LOG_BYTES, error=MeasureError, strict_utf8=False)


def parse_nccl_log(path: str | Path, *, op: str | None = None, num_ranks: int | None = None) -> list[NcclSweep]:
    """Read and parse one nccl-tests log file (see the module docstring for the accepted formats)."""
    return parse_nccl_text(read_text(path), str(path), op=op, num_ranks=num_ranks)
