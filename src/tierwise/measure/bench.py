"""Run collectives through ``torch.distributed`` and report them the way nccl-tests does.

Method (after nccl-tests ``src/common.cu``, described in collectives-notes.md section 2):

1. for each size, allocate the buffers once (float32) and run ``warmup`` untimed operations;
2. check correctness once: fill inputs with rank-dependent integers whose exact result is known, run the
   operation, count the elements that differ (nccl-tests' ``#wrong`` column), summed over ranks;
3. ``barrier``, then ``iters`` timed operations. On the NCCL backend (asynchronous kernels) the batch is
   timed between two ``cuda.synchronize`` calls and divided by ``iters``, as nccl-tests does. On gloo
   (blocking calls on shared CPU cores) each operation is timed alone, after a barrier so that every rank
   starts it together and no operation overlaps the next (a broadcast's root would otherwise start its next
   send while the receiver still drains the last), and the *median* is kept (``stat``; min and mean are
   recorded too), which is robust to the scheduler noise of a loaded host; this is the one deliberate
   difference from nccl-tests;
4. the per-rank time is averaged over ranks (nccl-tests ``-a 1``, its default);
5. on gloo, before every round, the host memory probe (:func:`_host_memory_probe`): a streaming ``copy_``
   of buffers 4x the last-level cache on every rank at once; each row records the median over the probes
   as ``host_memory_s_per_byte``, the price of the copies outside gloo's algorithms in the shared-host
   model (:mod:`tierwise.measure.hostcopy`);
6. ``algbw = S / t`` and ``busbw = algbw x bus_factor(op, n)``, with nccl-tests' size ``S`` (the whole
   gathered buffer for all-gather, the input for reduce-scatter, each rank's send buffer for all-to-all)
   and its factors (:func:`tierwise.collectives.volumes.bus_factor`).

Launch: run on its own, :func:`run_collectives` spawns ``num_ranks`` local processes
(``torch.multiprocessing``, start method ``spawn``, ``OMP_NUM_THREADS=1``); under ``torchrun`` (``RANK`` and
``WORLD_SIZE`` in the environment) it joins the launcher's world instead, so it spans machines. Only rank 0
returns rows and writes the output file; the file is rewritten after every completed size, so an
interrupted run keeps what it finished.

Note on gloo: the gloo library has no reduce-scatter algorithm (``ProcessGroupGloo.cpp`` includes gloo's
allgather, allreduce, alltoall, broadcast, gather, reduce and scatter only), so torch emulates
reduce-scatter on gloo with other collectives; its busbw is not a reduce-scatter's: report it, never fit it.
"""

from __future__ import annotations

import math
import os
import re
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierwise.atomic import check_writable, merge_rows_locked, read_rows
from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import MeasureError, UnitError
from tierwise.limits import MAX_SWEEP_BYTES, MAX_SWEEP_POINTS, check_float
from tierwise.units import parse_bytes

__all__ = ["BenchConfig", "parse_sizes", "run_collectives", "launch", "TORCH_MISSING", "require_torch",
           "EMULATED"]

TORCH_MISSING = "torch is not installed; pip install 'tierwise[measure]'"
EMULATED = {("gloo", "reduce-scatter"): "gloo has no reduce-scatter; torch emulates it; reported, not fitted"}
_ELEMENT_BYTES = 4  # float32


def require_torch():
    """Import torch, or raise the one-line MeasureError the CLI prints (exit code 2)."""
    try:
        import torch
    except ModuleNotFoundError:
        raise MeasureError(TORCH_MISSING) from None
    return torch


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """What to measure."""

    ops: tuple[str, ...]
    """Canonical collective names, measured one after the other in one launch."""
    sizes_bytes: tuple[int, ...]
    iters: int = 20
    warmup: int = 5
    backend: str = "gloo"
    out: str | None = None
    """JSON file rewritten after each completed size (rank 0 only), merged with other runs' rows there
    (:func:`tierwise.atomic.merge_rows_locked`)."""
    run: str = ""
    """This run's id in ``out`` (every row written there carries it as ``run``); :func:`run_collectives`
    makes one (``<UTC time>-<host>-<pid>``, so ids sort by start time) when empty."""
    stat: str = "median"
    """Which per-operation statistic is ``time_s`` on CPU: median (default), min or mean (all are recorded)."""
    rounds: int = 1
    """Repeat the sweep: in each round every size is measured once per op, the ops of one size one after the
    other (so the ops compared at a size see the same host load); ``time_s`` is the median over the rounds of
    each round's statistic, the round values are kept in ``time_rounds_s``. On a shared host a size's
    median moves between sweeps; the median of several interleaved rounds is steadier than one long run."""

    def __post_init__(self):
        if not self.sizes_bytes:
            raise MeasureError("empty sweep: no sizes to measure; pass e.g. --sizes 1KiB:64MiB")
        if not self.ops:
            raise MeasureError("no collective to measure; pass --op all-reduce")
        if self.rounds < 1:
            raise MeasureError(f"--rounds {self.rounds}: need at least 1 round")
        if self.iters < 1 or self.warmup < 0:
            raise MeasureError(f"iters={self.iters}, warmup={self.warmup}: need iters >= 1 and warmup >= 0")
        if self.stat not in ("median", "min", "mean"):
            raise MeasureError(f"--stat {self.stat!r}: choose median, min or mean")
        if self.backend not in ("gloo", "nccl"):
            raise MeasureError(f"unknown backend {self.backend!r}; use gloo (CPU) or nccl (GPU)")


def parse_sizes(spec: str, factor: float = 2.0) -> tuple[int, ...]:
    """Sizes from ``"1KiB:256MiB"`` (geometric, x ``factor``, ends included), ``"1MiB,4MiB"`` or ``"8MiB"``.

    Each size is 1 B .. 1 TiB and a sweep has at most 64 sizes (:data:`~tierwise.limits.MAX_SWEEP_POINTS`);
    ``factor`` is in (1, 1024]. The point count is worked out before any list is built.

    >>> parse_sizes("1KiB:8KiB")
    (1024, 2048, 4096, 8192)
    """
    text = spec.strip()
    if not text:
        raise MeasureError("empty sweep: --sizes is empty; pass e.g. --sizes 1KiB:64MiB")
    try:
        if ":" in text:
            lo_text, hi_text = text.split(":", 1)
            lo, hi = _sweep_size(lo_text, "--sizes start"), _sweep_size(hi_text, "--sizes end")
            if hi < lo:
                raise MeasureError(f"--sizes {spec}: the range runs backwards; write it as {hi_text}:{lo_text}")
            factor = check_float(factor, "--factor", minimum=1.0, min_open=True, maximum=1024.0,
                                 error=MeasureError, hint=", e.g. --factor 2")
            points = int(math.floor(math.log(hi / lo) / math.log(factor) + 1e-9)) + 1
            if points > MAX_SWEEP_POINTS:
                raise MeasureError(f"--sizes {spec} with --factor {factor:.10g} is {points:,} sizes; a sweep has at most "
                                   f"{MAX_SWEEP_POINTS}: raise --factor or narrow the range")
            sizes, size = [], float(lo)
            while size <= hi * (1 + 1e-9) and len(sizes) < points:
                sizes.append(int(round(size)))
                size *= factor
            return tuple(sizes)
        parts = [part for part in text.split(",") if part.strip()]
        if len(parts) > MAX_SWEEP_POINTS:
            raise MeasureError(f"--sizes lists {len(parts)} sizes; a sweep has at most {MAX_SWEEP_POINTS}")
        return tuple(_sweep_size(part, "--sizes") for part in parts)
    except UnitError as exc:  # from parse_bytes
        raise MeasureError(str(exc)) from None


def _sweep_size(text: str, what: str) -> int:
    """One measured buffer: a whole number of bytes, 1 B .. 1 TiB."""
    size = parse_bytes(text, what=what, maximum=MAX_SWEEP_BYTES)
    if size < 1:
        raise MeasureError(f"{what} {text.strip()!r} is less than one byte; use {what} >= 1 B")
    return int(round(size))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_output_rank() -> bool:
    """True where ``--out`` is written: a local run, or rank 0 under torchrun (the other ranks' machines
    need not have the output's directory)."""
    return not _under_torchrun() or os.environ.get("RANK") == "0"


def _under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _entry(rank: int, world: int, port: int, backend: str, worker: Callable, args: tuple, result_path: str):
    """Body of one spawned rank: join the group, run ``worker``, rank 0 pickles what it returned."""
    import pickle

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)  # one GPU per spawned rank
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        result = worker(rank, world, *args)
        if rank == 0:  # written whole, then renamed: the file exists only once complete
            Path(result_path + ".part").write_bytes(pickle.dumps(result))
            os.replace(result_path + ".part", result_path)
        # no rank tears the group down while a peer still has gloo work in flight (under load a rank
        # that left early aborted its peer: "terminate called without an active exception")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def launch(worker: Callable, args: tuple, num_ranks: int | None, backend: str = "gloo") -> Any:
    """Run ``worker(rank, world, *args)`` on every rank; return what rank 0 returned (None on other ranks).

    Under torchrun the current process is one rank of the launcher's world; otherwise ``num_ranks``
    processes are spawned here. ``worker`` must be a module-level function (it is pickled).
    """
    torch = require_torch()
    import pickle

    import torch.distributed as dist
    import torch.multiprocessing as mp

    if _under_torchrun():
        world = int(os.environ["WORLD_SIZE"])
        if world < 2:
            raise MeasureError(f"WORLD_SIZE={world}: a collective needs >= 2 ranks; torchrun --nproc-per-node 2")
        rank = int(os.environ["RANK"])
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
        try:
            result = worker(rank, world, *args)
            dist.barrier()
        finally:
            dist.destroy_process_group()
        return result if rank == 0 else None
    if num_ranks is None or num_ranks < 2:
        raise MeasureError(f"--ranks {num_ranks}: a collective needs >= 2 ranks; pass --ranks 2 or more")
    if backend == "nccl" and torch.cuda.device_count() < num_ranks:
        raise MeasureError(
            f"--backend nccl --ranks {num_ranks} needs {num_ranks} GPUs; {torch.cuda.device_count()} visible"
        )
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="tierwise-") as tmp:
        result_path = os.path.join(tmp, "result.pkl")
        ctx = mp.start_processes(_entry, args=(num_ranks, _free_port(), backend, worker, args, result_path),
                                 nprocs=num_ranks, join=False, start_method="spawn")
        try:
            while not ctx.join():
                pass
        except KeyboardInterrupt:
            _stop_ranks(ctx.processes)
            raise
        except mp.ProcessRaisedException as exc:
            last = str(exc).strip().splitlines()[-1]
            if "MeasureError" in last or "TierwiseError" in last:
                raise MeasureError(last.split(":", 1)[-1].strip()) from None
            raise
        except mp.ProcessExitedException:
            # a rank killed by a signal after rank 0 wrote its result died in teardown (gloo's worker
            # threads occasionally abort at exit on a loaded host); the measurement itself completed
            _stop_ranks(ctx.processes)
            if not Path(result_path).exists():
                raise
        return pickle.loads(Path(result_path).read_bytes())


def _stop_ranks(processes, grace_s: float = 10.0) -> None:
    """SIGTERM every live rank, wait up to ``grace_s`` for each, then SIGKILL what is left and reap it.

    The spawned ranks are not daemons, so multiprocessing's exit handler joins them without a timeout: a
    rank still alive after its SIGTERM would hang the interrupted command at exit. SIGKILL cannot be
    ignored.
    """
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=grace_s)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=grace_s)


# --- the per-rank benchmark ---------------------------------------------------------------------------


def _buffers(op: str, size_bytes: int, world: int, rank: int, device):
    """(input, output, count) for one size in nccl-tests' convention; size rounded down to whole elements."""
    import torch

    per_rank_ops = ("all-gather", "reduce-scatter", "all-to-all")
    unit = world if op in per_rank_ops else 1
    elements = max(unit, (size_bytes // _ELEMENT_BYTES) // unit * unit)
    if op == "all-gather":
        return torch.zeros(elements // world, device=device), torch.zeros(elements, device=device), elements // world
    if op == "reduce-scatter":
        return torch.zeros(elements, device=device), torch.zeros(elements // world, device=device), elements // world
    if op == "all-to-all":
        return torch.zeros(elements, device=device), torch.zeros(elements, device=device), elements // world
    return torch.zeros(elements, device=device), torch.zeros(elements, device=device), elements


def _operation(op: str, inp, out, world: int, rank: int) -> Callable[[], None]:
    import torch.distributed as dist

    if op == "all-reduce":
        return lambda: dist.all_reduce(inp)
    if op == "all-gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(out, inp)
    if op == "reduce-scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, inp)
    if op == "all-to-all":
        return lambda: dist.all_to_all_single(out, inp)
    if op == "broadcast":
        return lambda: dist.broadcast(inp, src=0)
    if op == "send-recv":
        def sendrecv():
            ops = [dist.P2POp(dist.isend, inp, (rank + 1) % world), dist.P2POp(dist.irecv, out, (rank - 1) % world)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        return sendrecv
    raise MeasureError(f"no benchmark for {op!r}")


def _check(op: str, inp, out, world: int, rank: int, run: Callable[[], None]) -> int:
    """Fill inputs with known integers, run once, count wrong output elements on this rank."""
    import torch

    n = world
    if op == "all-to-all":
        chunk = inp.numel() // n
        inp.copy_(torch.arange(n, device=inp.device).repeat_interleave(chunk).float() + rank * n)
    elif op == "broadcast":
        inp.fill_(7.0 if rank == 0 else 0.0)
    else:
        inp.fill_(rank + 1.0)
    run()
    if op == "all-reduce":
        wrong = inp != n * (n + 1) / 2
    elif op == "reduce-scatter":
        wrong = out != n * (n + 1) / 2
    elif op == "all-gather":
        chunk = out.numel() // n
        wrong = out != torch.arange(1, n + 1, device=out.device).repeat_interleave(chunk).float()
    elif op == "all-to-all":
        chunk = out.numel() // n
        wrong = out != torch.arange(n, device=out.device).repeat_interleave(chunk).float() * n + rank
    elif op == "broadcast":
        wrong = inp != 7.0
    else:  # send-recv
        wrong = out != ((rank - 1) % n) + 1.0
    inp.zero_()
    return int(wrong.sum().item())


def _time_stats(run: Callable[[], None], iters: int, device, barrier: Callable[[], None] | None = None
                ) -> dict[str, float]:
    """Per-operation time: {median, min, mean} of single timed operations (CPU), or the batch mean (GPU).
    On CPU, ``barrier`` (if given) runs untimed before every operation, so that every rank starts each one
    together."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            run()
        torch.cuda.synchronize()
        t = (time.perf_counter() - start) / iters
        return {"median": t, "min": t, "mean": t}
    samples = []
    for _ in range(iters):
        if barrier is not None:
            barrier()
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return {"median": statistics.median(samples), "min": min(samples), "mean": statistics.fmean(samples)}


def _time(run: Callable[[], None], iters: int, device, stat: str = "median") -> float:
    return _time_stats(run, iters, device)[stat]


def _write_rows(path: str, run: str, rows: list[dict]) -> None:
    """This run's rows into ``path``, beside the rows other runs wrote there (atomic, under a lock)."""

    merge_rows_locked(path, run, rows)


def new_run_id() -> str:
    """``<UTC start time>-<host>-<pid>``: unique per run, sorting by start time."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{socket.gethostname()}-{os.getpid()}"


def _measure_one(op: str, size: int, world: int, rank: int, config: BenchConfig, device) -> dict | None:
    """Warm up, check and time ``op`` at ``size`` on every rank; rank 0 gets the row (others None)."""
    import torch
    import torch.distributed as dist

    factor = float(bus_factor(op, world))
    inp, out, count = _buffers(op, size, world, rank, device)
    nbytes = max(inp.numel(), out.numel()) * _ELEMENT_BYTES if op != "all-to-all" else inp.numel() * 4
    run = _operation(op, inp, out, world, rank)
    for _ in range(config.warmup):
        run()
    wrong = _check(op, inp, out, world, rank, run)
    dist.barrier()
    local = _time_stats(run, config.iters, device, barrier=dist.barrier if device.type == "cpu" else None)
    stats = torch.tensor([local["median"], local["min"], local["mean"], float(wrong)],
                         dtype=torch.float64, device=device)
    dist.all_reduce(stats)
    if rank != 0:
        return None
    times = dict(zip(("median", "min", "mean"), (stats[:3] / world).tolist(), strict=True))
    t = times[config.stat]
    row = {
        "op": op, "num_ranks": world, "backend": config.backend,
        "ranks_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", world)), "size_bytes": nbytes,
        "count": count, "type": "float", "time_s": t, "algbw_bytes_per_s": nbytes / t,
        "busbw_bytes_per_s": nbytes / t * factor, "wrong": int(stats[3].item()),
        "iters": config.iters, "stat": config.stat, "time_median_s": times["median"],
        "time_min_s": times["min"], "time_mean_s": times["mean"],
        "in_place": op in ("all-reduce", "broadcast"),
    }
    if (config.backend, op) in EMULATED:
        row["note"] = EMULATED[config.backend, op]
    return row


def _over_rounds(rows: list[dict], world: int) -> dict:
    """One row from the same op and size measured in several rounds: the median of the rounds' times."""
    times = [r["time_s"] for r in rows]
    t = statistics.median(times)
    factor = float(bus_factor(rows[0]["op"], world))
    nbytes = rows[0]["size_bytes"]
    return {**rows[0], "time_s": t, "algbw_bytes_per_s": nbytes / t, "busbw_bytes_per_s": nbytes / t * factor,
            "wrong": sum(r["wrong"] for r in rows), "rounds": len(rows), "time_rounds_s": times,
            **{k: statistics.median(r[k] for r in rows) for k in ("time_median_s", "time_min_s", "time_mean_s")}}


MEMORY_PROBE_MIN_BYTES = 64 * 2**20
MEMORY_PROBE_MAX_BYTES = 512 * 2**20
_MEMORY_PROBE_ITERS = 10


def memory_probe_bytes(llc_bytes: int | None = None) -> int:
    """Size of the host memory probe's buffers: 4x the last-level cache (so the copy streams from DRAM, not
    from a cache), within [64 MiB, 512 MiB]; 256 MiB when the cache size is unknown.

    >>> [memory_probe_bytes(c) // 2**20 for c in (32 * 2**20, 4 * 2**20, 2**30, None)]
    [128, 64, 512, 256]
    """
    if llc_bytes is None:
        return 256 * 2**20
    return int(min(max(4 * llc_bytes, MEMORY_PROBE_MIN_BYTES), MEMORY_PROBE_MAX_BYTES))


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache of cpu0 from Linux sysfs (``/sys/devices/system/cpu/cpu0/cache/index*/size``,
    e.g. ``32768K``); None where sysfs does not say (not Linux, or a container without it)."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = entry.read_text().strip()
        except OSError:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", text)  # the kernel's K, M, G are powers of 1024
        if match:
            sizes.append(int(match[1]) * 1024 ** " KMG".index(match[2] or " "))
    return max(sizes) if sizes else None


def _host_memory_probe(device) -> float:
    """Seconds per byte of memory traffic (read + written) of a streaming ``copy_`` on this rank's core while
    every rank copies at once: buffers of :func:`memory_probe_bytes` (so the copy runs from DRAM), one
    untimed copy, then the median of ``_MEMORY_PROBE_ITERS`` copies each started after a barrier, divided by
    twice the buffer (a copy reads and writes each byte). The rank-mean is the host-copy model's price of the
    copies a collective makes before and after its algorithm (:mod:`tierwise.measure.hostcopy`: the socket
    path streams the payload through the shared cache, so those copies run at the DRAM rate, not a warm
    cache's)."""
    import torch
    import torch.distributed as dist

    elements = memory_probe_bytes(last_level_cache_bytes()) // _ELEMENT_BYTES
    src, dst = torch.ones(elements), torch.zeros(elements)
    dst.copy_(src)
    samples = []
    for _ in range(_MEMORY_PROBE_ITERS):
        dist.barrier()
        start = time.perf_counter()
        dst.copy_(src)
        samples.append(time.perf_counter() - start)
    value = torch.tensor([statistics.median(samples) / (2.0 * elements * _ELEMENT_BYTES)], dtype=torch.float64,
                         device=device)
    dist.all_reduce(value)
    return float(value.item()) / dist.get_world_size()


def bench_worker(rank: int, world: int, config: BenchConfig) -> dict[str, list[dict]]:
    """One rank's sweep over ``config.ops`` x ``config.sizes_bytes`` (x ``config.rounds``); rank 0 returns
    the rows per op. One round: op by op, size by size. Several: round by round, size by size, the ops of a
    size together; the output (rewritten after every measurement) holds every measured (op, size) over the
    rounds completed so far. On gloo the host memory probe (:func:`_host_memory_probe`) runs before every
    round, and every row carries the median of the probes so far as ``host_memory_s_per_byte``."""
    import torch

    device = torch.device("cuda", torch.cuda.current_device()) if config.backend == "nccl" else torch.device("cpu")
    if config.rounds == 1:
        rounds = [[(op, size) for op in config.ops for size in config.sizes_bytes]]
    else:
        rounds = [[(op, size) for size in config.sizes_bytes for op in config.ops]] * config.rounds
    samples: dict[tuple[str, int], list[dict]] = {}
    probes: list[float] = []
    for order in rounds:
        if device.type == "cpu":
            probes.append(_host_memory_probe(device))
        for op, size in order:
            row = _measure_one(op, size, world, rank, config, device)
            if row is None:
                continue
            samples.setdefault((op, size), []).append(row)
            if config.out:
                _write_rows(config.out, config.run, _rows(samples, config, world, probes))
    results: dict[str, list[dict]] = {op: [] for op in config.ops}
    for row in _rows(samples, config, world, probes):
        results[row["op"]].append(row)
    return results


def _rows(samples: dict[tuple[str, int], list[dict]], config: BenchConfig, world: int,
          probes: Sequence[float] = ()) -> list[dict]:
    """The rows so far, op by op in the order asked, sizes ascending; with the host memory probes' median
    (gloo) on each."""
    out = []
    for op in config.ops:
        for size in config.sizes_bytes:
            got = samples.get((op, size))
            if got:
                row = got[0] if config.rounds == 1 else _over_rounds(got, world)
                if probes:
                    row = {**row, "host_memory_s_per_byte": statistics.median(probes),
                           "host_memory_probes": len(probes)}
                out.append(row)
    return out


def run_collectives(config: BenchConfig, num_ranks: int | None) -> dict[str, list[dict]] | None:
    """Measure every op of ``config`` (see the module docstring); rows per op on rank 0, None elsewhere."""
    ops = tuple(normalize_kind(op) for op in config.ops)
    config = BenchConfig(ops=ops, sizes_bytes=config.sizes_bytes, iters=config.iters, warmup=config.warmup,
                         backend=config.backend, out=str(Path(config.out).resolve()) if config.out else None,
                         stat=config.stat, rounds=config.rounds, run=config.run or new_run_id())
    if config.out and is_output_rank():
        # before any process is spawned: a missing, read-only or full place, a directory, or a file that
        # is not a result list fails here, in one line

        check_writable(config.out, "--out")
        read_rows(config.out, "--out")
    return launch(bench_worker, (config,), num_ranks, config.backend)
