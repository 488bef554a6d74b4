"""How long a ``measure collective`` or ``measure ddp`` run may take, worked out before anything is spawned
(issue 32: every command finishes or refuses within a documented bound).

Each flag is bounded on its own (``--iters`` up to 100,000, 64 sizes up to 1 TiB, ...), but their product is
what takes time: ``--iters 100000`` over the default sizes is hours. So the run's time is estimated from its
sizes and counts with deliberately fast rates (the estimate is a floor: a host slower than these takes
longer, never shorter), and a run whose floor exceeds :data:`MAX_RUN_S` is refused, naming the flags that
lower it. The rates are planning figures, not a model of the host:

* gloo (CPU, loopback TCP between local processes): :data:`RATES` ``gloo`` = 50 us per operation and
  2 GB/s per rank of bus bytes (nccl-tests' bus bandwidth: 2(n-1)/n of the size for an all-reduce); on the
  project's 2-core CI hosts, 4 KiB..256 MiB at 200 iterations takes minutes (tests/measure), i.e. below
  1 GB/s, so 2 GB/s does not refuse what a normal host finishes;
* nccl (GPUs): 10 us per operation and 400 GB/s per GPU, an H100's NVLink one-way figure (450 GB/s,
  hardware.csv) less protocol overhead: the fastest a single node runs it;
* DDP's MLP on the CPU: 6 x batch x width^2 x layers FLOP per step (forward 2, backward 4 per weight and
  sample, the usual dense-training count) at 200 GFLOP/s, and each step's gradients (4 bytes a weight)
  all-reduced at the gloo rate; three phases per step (compute alone, with DDP's sync, the sync alone).
"""

from __future__ import annotations

from tierwise.errors import MeasureError

__all__ = ["MAX_RUN_S", "RATES", "collective_floor_s", "ddp_floor_s", "check_collective_run", "check_ddp_run"]

MAX_RUN_S = 1800.0
"""The longest run (its estimated floor, in seconds) that ``measure collective`` and ``measure ddp`` start."""

RATES = {"gloo": (50e-6, 2e9), "nccl": (10e-6, 400e9)}
"""Per backend: (seconds per operation, bus bytes per second per rank) that no real run beats."""

CPU_FLOPS = 200e9
"""FLOP/s of the MLP's GEMMs on the CPU a DDP rank runs on: above what one process of a server CPU sustains."""


def collective_floor_s(sizes: tuple[int, ...], ops: tuple[str, ...], iters: int, warmup: int, rounds: int,
                       backend: str) -> float:
    """The least time the sweep can take: every operation's latency plus its bus bytes at the rate. Bus bytes
    are nccl-tests' (size x 2(n-1)/n for an all-reduce, x (n-1)/n for the others) at their least, n = 2."""
    latency, rate = RATES.get(backend, RATES["nccl"])
    per_round = sum(len(sizes) * latency + (1.0 if op == "all-reduce" else 0.5) * sum(sizes) / rate for op in ops)
    return (iters + warmup) * rounds * per_round


def check_collective_run(sizes: tuple[int, ...], ops: tuple[str, ...], iters: int, warmup: int, rounds: int,
                         backend: str) -> None:
    """Refuse a sweep whose floor is past :data:`MAX_RUN_S` (one line naming the flags that shorten it)."""
    floor = collective_floor_s(sizes, ops, iters, warmup, rounds, backend)
    if floor > MAX_RUN_S:
        raise MeasureError(f"this sweep takes at least {floor / 60:,.0f} min ({len(ops)} op(s) x {len(sizes)} sizes up to "
                           f"{max(sizes):,} B x {iters + warmup:,} calls x {rounds} round(s) on {backend}); the most "
                           f"measure collective starts is {MAX_RUN_S / 60:.0f} min: lower --iters, --warmup or "
                           "--rounds, or --sizes")


def ddp_floor_s(steps: int, warmup: int, width: int, layers: int, batch: int) -> float:
    """The least time the DDP measurement can take (module docstring)."""
    latency, rate = RATES["gloo"]
    weights = float(width) * width * layers
    per_step = 6.0 * batch * weights / CPU_FLOPS + 2.0 * 4.0 * weights / rate + latency
    return 3.0 * (steps + warmup) * per_step


def check_ddp_run(steps: int, warmup: int, width: int, layers: int, batch: int) -> None:
    floor = ddp_floor_s(steps, warmup, width, layers, batch)
    if floor > MAX_RUN_S:
        raise MeasureError(f"this DDP run takes at least {floor / 60:,.0f} min ({steps + warmup:,} steps of a "
                           f"{layers:,} x {width:,} MLP, batch {batch:,}); the most measure ddp starts is "
                           f"{MAX_RUN_S / 60:.0f} min: lower --steps, --warmup, --width, --layers or --batch")
