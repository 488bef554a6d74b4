"""``measure ddp``: a real DistributedDataParallel training step, split into compute, communication and the
communication left exposed after overlap, with tierwise's prediction of the exposed part beside it.

What runs (per rank, gloo, one thread): an MLP of ``layers`` square ``Linear(width, width)`` + ReLU, MSE loss
on random data, SGD, ``gradient_as_bucket_view=True`` (no gradient copies into buckets). Three phases, timed
interleaved (one of each per step, after a barrier) over ``steps`` steps after ``warmup`` untimed ones,
medians (then averaged over ranks):

* ``compute_s``: forward + backward + optimizer under ``ddp.no_sync()`` (DDP skips the all-reduce);
* ``step_s``: the same with synchronization: DDP all-reduces gradient buckets as they become ready during
  backward, and ``backward()`` returns once all buckets are reduced;
* ``comm_s``: the same buckets all-reduced back to back with no compute (the serialized communication);
* ``exposed_s = step_s - compute_s``: the communication backward did not hide (plus DDP bookkeeping:
  hooks and the division of each bucket by the world size).

Prediction (PyTorch DDP paper, Li et al., VLDB 2020, sections 3.2.3 and 4.2; DDP docs for the caps):
after the first iteration DDP rebuilds its buckets in the order gradients became ready (reverse layer
order here), each capped at ``bucket_cap_mb`` (torch passes an explicit cap to the first bucket too; only
DDP's own default uses a 1 MiB first bucket, ``nn/parallel/distributed.py``), a parameter never split; a
bucket's all-reduce starts when its last gradient is ready and after the previous bucket's all-reduce (one
communication stream, buckets in order). With ``T_b`` the measured backward time (no_sync), gradient ``i``
(reverse order) is ready at ``T_b x (params up to i) / (all params)`` (a Linear layer's backward FLOPs,
``4 x batch x in x out``, are proportional to its parameters), and a bucket of ``B`` bytes takes
``predict_time(regimes, "all-reduce", B, n)`` from a calibrated alpha-beta fit
(:func:`tierwise.measure.fit.predict_time`). Then::

    end_k = max(ready_k, end_{k-1}) + t_allreduce(B_k);   exposed = max(0, end_last - T_b)

That overlap assumes communication runs on resources compute does not use. On gloo over loopback TCP,
moving bytes is CPU work (kernel copies, the reduction), so it overlaps compute only where a core is idle.
The overlap model is therefore a named switch, ``overlap``:

* ``"buckets"`` (the formula above) when the host has at least one idle core per rank beyond one compute
  thread per rank;
* ``"cpu-share"`` otherwise: the measured CPU share ``u`` of communication (CPU seconds of the process per
  second of a communication-only step, ``time.process_time``) cannot overlap compute that already holds
  every core, so it adds to the step; the rest (waiting on the peer and the kernel) overlaps as in
  ``"buckets"``: ``exposed = u x sum_k t(B_k) + (1 - u) x exposed_buckets``.

``"serialized"`` (``u = 1``: ``exposed = sum_k t(B_k)``) is reported beside them as the upper bound, and
``"buckets"`` is the lower bound (docs/measure.md shows what each predicted here).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import asdict, dataclass

from tierwise.errors import MeasureError
from tierwise.measure.bench import _buffers, _operation, _time, launch
from tierwise.measure.calibrate import calibrate
from tierwise.measure.fit import fit_regimes, predict_time
from tierwise.specs.catalog import load_yaml_file

__all__ = ["DdpConfig", "run_ddp", "load_calibration", "predict_exposed", "bucket_sizes", "render_ddp", "overlap_switch"]

_FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


@dataclass(frozen=True, kw_only=True)
class DdpConfig:
    """The model and the measurement."""

    steps: int = 7
    """Measured steps per phase; medians over them (>= 5)."""
    warmup: int = 2
    width: int = 1024
    layers: int = 6
    batch: int = 32
    bucket_cap_mb: float = 25.0
    """DDP's ``bucket_cap_mb`` (MiB); 25 is DDP's default."""
    calib_sizes: tuple[int, ...] = tuple(2**k for k in range(16, 26))
    """All-reduce sizes of the calibration sweep run first when no calibration is given (64 KiB..32 MiB)."""
    calib_iters: int = 20

    def __post_init__(self):
        if self.steps < 5:
            raise MeasureError(f"--steps {self.steps}: medians need >= 5 measured steps")
        if self.width < 1 or self.layers < 1 or self.batch < 1:
            raise MeasureError("--width, --layers and --batch must be >= 1")
        if self.warmup < 0:
            raise MeasureError(f"--warmup {self.warmup} is out of range; use --warmup >= 0")
        if not 0 < self.bucket_cap_mb < math.inf:  # also NaN
            raise MeasureError(f"--bucket-cap-mb {self.bucket_cap_mb} is out of range; use a finite --bucket-cap-mb > 0")


def bucket_sizes(param_bytes_reverse: list[int], cap_bytes: float, first_cap_bytes: float = _FIRST_BUCKET_BYTES):
    """Group parameter sizes (in reverse registration order) into DDP buckets; returns (bytes, last index).

    A bucket closes once it reaches its cap (the first bucket's cap is ``first_cap_bytes``); a parameter is
    never split, so one larger than the cap fills a bucket alone.

    >>> bucket_sizes([4, 4096, 4, 4096], cap_bytes=5000, first_cap_bytes=100)
    [(4100, 1), (4100, 3)]
    """
    buckets, current, cap = [], 0, first_cap_bytes
    for i, size in enumerate(param_bytes_reverse):
        current += size
        if current >= cap:
            buckets.append((current, i))
            current, cap = 0, cap_bytes
    if current:
        buckets.append((current, len(param_bytes_reverse) - 1))
    return buckets


def predict_exposed(param_bytes_reverse: list[int], backward_s: float, regimes, num_ranks: int,
                    cap_bytes: float, first_cap_bytes: float = _FIRST_BUCKET_BYTES) -> dict:
    """Predicted exposed communication of one DDP backward (module docstring formula).

    >>> from tierwise.measure.fit import Regime
    >>> r = [Regime(name="all", min_bytes=0, max_bytes=None, latency_s=0.0, busbw_bytes_per_s=1e9)]
    >>> p = predict_exposed([10**6, 10**6], backward_s=2e-3, regimes=r, num_ranks=2, cap_bytes=10**6,
    ...                     first_cap_bytes=10**6)
    >>> round(p["exposed_s"] * 1e3, 6)  # bucket 1 ready at 1 ms, ends at 2 ms; bucket 2 ends at 3 ms
    1.0
    """

    total = float(sum(param_bytes_reverse))
    cumulative, ready = 0.0, []
    for size in param_bytes_reverse:
        cumulative += size
        ready.append(backward_s * cumulative / total)
    end, comm, buckets = 0.0, 0.0, []
    for nbytes, last in bucket_sizes(param_bytes_reverse, cap_bytes, first_cap_bytes):
        t = float(predict_time(regimes, "all-reduce", nbytes, num_ranks))
        start = max(ready[last], end)
        end = start + t
        comm += t
        buckets.append({"bytes": nbytes, "ready_s": ready[last], "start_s": start, "end_s": end})
    return {"exposed_s": max(0.0, end - backward_s), "comm_s": comm, "buckets": buckets}


def _host_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def overlap_switch(ranks_on_host: int, host_cpus: int | None = None) -> str:
    """``"buckets"`` if every rank on the host has an idle core for its communication besides the core of
    its compute thread, else ``"cpu-share"`` (module docstring)."""
    cpus = _host_cpus() if host_cpus is None else host_cpus
    return "buckets" if cpus - ranks_on_host >= ranks_on_host else "cpu-share"


def _model(config: DdpConfig):
    import torch

    torch.manual_seed(0)
    blocks = []
    for _ in range(config.layers):
        blocks += [torch.nn.Linear(config.width, config.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks)


def _calibration_rows(world: int, rank: int, config: DdpConfig) -> list[dict]:
    """An all-reduce sweep with the collective benchmark's own method (bench.py)."""
    import torch
    import torch.distributed as dist

    rows = []
    for size in config.calib_sizes:
        inp, out, _ = _buffers("all-reduce", size, world, rank, torch.device("cpu"))
        run = _operation("all-reduce", inp, out, world, rank)
        for _ in range(2):
            run()
        dist.barrier()
        local = torch.tensor([_time(run, config.calib_iters, torch.device("cpu"))], dtype=torch.float64)
        dist.all_reduce(local)
        rows.append({"op": "all-reduce", "num_ranks": world, "backend": "gloo", "size_bytes": inp.numel() * 4,
                     "time_s": local.item() / world})
    return rows


def ddp_worker(rank: int, world: int, config: DdpConfig, calibration_rows: list[dict] | None) -> dict | None:
    """One rank: calibrate (unless given), then time the three phases; rank 0 returns the result."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    calib = calibration_rows if calibration_rows is not None else _calibration_rows(world, rank, config)
    model = DistributedDataParallel(_model(config), bucket_cap_mb=config.bucket_cap_mb, gradient_as_bucket_view=True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(config.batch, config.width, generator=gen)
    y = torch.randn(config.batch, config.width, generator=gen)
    fwd_times, bwd_times = [], []

    def train_step(sync: bool):
        opt.zero_grad(set_to_none=True)
        start = time.perf_counter()
        if sync:
            loss = torch.nn.functional.mse_loss(model(x), y)
            mid = time.perf_counter()
            loss.backward()
        else:
            with model.no_sync():
                loss = torch.nn.functional.mse_loss(model(x), y)
                mid = time.perf_counter()
                loss.backward()
            fwd_times.append(mid - start)
            bwd_times.append(time.perf_counter() - mid)
        opt.step()

    params_reverse = [p.numel() * p.element_size() for p in reversed(list(model.parameters()))]
    cap = config.bucket_cap_mb * 2**20
    grads = [torch.zeros(n // 4) for n, _ in bucket_sizes(params_reverse, cap, cap)]

    def comm_only():
        for g in grads:
            dist.all_reduce(g)

    # the three phases are interleaved step by step, so that a slow spell of a shared host hits all three
    phases = {"compute": lambda: train_step(False), "step": lambda: train_step(True), "comm": comm_only}
    compute_s, step_s, comm_s, backward_s, forward_s, comm_cpu = _time_phases(
        phases, config, world, fwd_times=fwd_times, bwd_times=bwd_times)
    logged = {}
    try:
        logged = model._get_ddp_logging_data()
    except Exception:  # private API; only used to cross-check the bucket model
        logged = {}
    if rank != 0:
        return None
    return {
        "params_reverse_bytes": params_reverse, "compute_s": compute_s, "step_s": step_s, "comm_s": comm_s,
        "backward_s": backward_s, "forward_s": forward_s, "calibration_rows": calib,
        "ddp_bucket_sizes": logged.get("rebuilt_bucket_sizes") or logged.get("bucket_sizes"),
        "ranks_on_host": int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        "comm_cpu_share": comm_cpu,
    }


def _time_phases(phases: dict, config: DdpConfig, world: int, *, fwd_times: list[float],
                 bwd_times: list[float]) -> list[float]:
    """Run ``phases`` interleaved step by step; the medians over steps after warm-up, averaged over ranks:
    [compute_s, step_s, comm_s, backward_s, forward_s, comm_cpu_share]. ``fwd_times``/``bwd_times`` are filled
    by the compute phase as it runs."""
    import torch
    import torch.distributed as dist

    samples: dict[str, list[float]] = {name: [] for name in phases}
    cpu_share: list[float] = []
    for i in range(config.warmup + config.steps):
        for name, fn in phases.items():
            dist.barrier()
            start, cpu_start = time.perf_counter(), time.process_time()
            fn()
            if i >= config.warmup:
                samples[name].append(time.perf_counter() - start)
                if name == "comm":  # CPU seconds of all this process's threads per second of communication
                    cpu_share.append((time.process_time() - cpu_start) / samples[name][-1])
    compute_s, step_s, comm_s = (statistics.median(samples[name]) for name in ("compute", "step", "comm"))
    backward_s = statistics.median(bwd_times[config.warmup:])
    forward_s = statistics.median(fwd_times[config.warmup:])
    comm_cpu = min(1.0, statistics.median(cpu_share))
    local = torch.tensor([compute_s, step_s, comm_s, backward_s, forward_s, comm_cpu], dtype=torch.float64)
    dist.all_reduce(local)
    return (local / world).tolist()


def _regimes_from(calibration: str | None, rows: list[dict], world: int):
    """Regimes from a calibrated YAML (its all-reduce tier), a result JSON, or the rows just measured."""

    if calibration and calibration.endswith((".yaml", ".yml")):

        doc = load_yaml_file(calibration, what="calibration file") or {}
        fitted = (doc.get("fitted") or {}) if isinstance(doc, dict) else {}
        tier = (fitted.get("scale_up") or next(iter(fitted.values()), None)) if isinstance(fitted, dict) else None
        if not isinstance(tier, dict) or "regimes" not in tier:
            raise MeasureError(f"{calibration}: no fitted regimes; write it with `tierwise calibrate`")
        return tier["regimes"], f"{calibration} ({tier.get('op')}, {tier.get('num_ranks')} ranks)"
    if calibration:
        fit = calibrate([calibration]).fits
        return next(iter(fit.values())).regimes, calibration
    fit = fit_regimes([r["size_bytes"] for r in rows], [r["time_s"] for r in rows], "all-reduce", world)
    return fit.regimes, "all-reduce sweep measured before the steps"


def _world(num_ranks: int | None) -> int:
    return int(os.environ.get("WORLD_SIZE", num_ranks or 0)) if "RANK" in os.environ else int(num_ranks or 0)


def load_calibration(calibration: str, num_ranks: int | None) -> tuple[list, str]:
    """The fitted regimes of a calibrated YAML or result JSON, and where they came from.

    Read before anything is launched (and before torch is needed), so a bad file fails at once.
    """
    return _regimes_from(calibration, [], _world(num_ranks))


def run_ddp(config: DdpConfig, num_ranks: int | None, calibration: str | tuple[list, str] | None = None
            ) -> dict | None:
    """Measure (see the module docstring) and predict; the result dict on rank 0, None elsewhere.

    ``calibration`` is a file (see :func:`load_calibration`), what that function returned, or None to
    measure an all-reduce sweep before the steps.
    """

    given_rows = [] if calibration else None
    world = _world(num_ranks)
    given = load_calibration(calibration, num_ranks) if isinstance(calibration, str) else calibration
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    raw = launch(ddp_worker, (config, given_rows), num_ranks, "gloo")
    if raw is None:
        return None
    regimes, regimes_source = given or _regimes_from(None, raw["calibration_rows"], world)
    cap = config.bucket_cap_mb * 2**20
    predicted = predict_exposed(raw["params_reverse_bytes"], raw["backward_s"], regimes, world, cap, cap)
    exposed = raw["step_s"] - raw["compute_s"]
    overlap = overlap_switch(ranks_on_host=raw["ranks_on_host"])
    u = raw["comm_cpu_share"]
    cpu_share = u * predicted["comm_s"] + (1.0 - u) * predicted["exposed_s"]
    headline = predicted["exposed_s"] if overlap == "buckets" else cpu_share
    return {
        "num_ranks": world,
        "config": {k: v for k, v in asdict(config).items() if k not in ("calib_sizes",)},
        "num_params": sum(raw["params_reverse_bytes"]) // 4,
        "buckets_bytes": [b["bytes"] for b in predicted["buckets"]],
        "ddp_logged_bucket_sizes": raw["ddp_bucket_sizes"],
        "forward_s": raw["forward_s"],
        "backward_s": raw["backward_s"],
        "compute_s": raw["compute_s"],
        "step_s": raw["step_s"],
        "comm_s": raw["comm_s"],
        "exposed_comm_s": exposed,
        "predicted_comm_s": predicted["comm_s"],
        "overlap": overlap,
        "predicted_exposed_comm_s": headline,
        "predicted_exposed_buckets_s": predicted["exposed_s"],
        "predicted_exposed_serialized_s": predicted["comm_s"],
        "comm_cpu_share": raw["comm_cpu_share"],
        "predicted_exposed_cpu_share_s": cpu_share,
        "prediction_error_pct": (headline - exposed) / exposed * 100.0 if exposed > 0 else None,
        "host_cpus": _host_cpus(),
        "host_load_avg_1min_before": load_before,  # other work on the host skews every number here
        "regimes_source": regimes_source,
        "calibration_rows": raw["calibration_rows"],
        "regimes": [r.as_dict() if hasattr(r, "as_dict") else r for r in regimes],
    }


def render_ddp(result: dict):
    def render(console) -> None:
        ms = 1e3
        console.print(f"DDP over gloo, {result['num_ranks']} ranks, {result['num_params']:,} parameters, "
                      f"buckets {[round(b / 2**20, 2) for b in result['buckets_bytes']]} MiB; "
                      f"medians over {result['config']['steps']} steps")
        console.print(f"  compute (fwd+bwd+opt, no_sync)  {result['compute_s'] * ms:8.2f} ms "
                      f"(backward {result['backward_s'] * ms:.2f} ms)")
        console.print(f"  step with DDP sync              {result['step_s'] * ms:8.2f} ms")
        console.print(f"  communication alone             {result['comm_s'] * ms:8.2f} ms "
                      f"(predicted {result['predicted_comm_s'] * ms:.2f} ms)")
        console.print(f"  exposed communication           {result['exposed_comm_s'] * ms:8.2f} ms")
        err = result["prediction_error_pct"]
        err_text = "n/a" if err is None else f"{err:+.0f}%"
        console.print(f"  predicted exposed               {result['predicted_exposed_comm_s'] * ms:8.2f} ms "
                      f"({err_text}; overlap={result['overlap']}, {result['host_cpus']} CPUs; "
                      f"fit: {result['regimes_source']})")
        console.print(f"    (buckets {result['predicted_exposed_buckets_s'] * ms:.2f} ms, cpu-share "
                      f"{result['predicted_exposed_cpu_share_s'] * ms:.2f} ms with u={result['comm_cpu_share']:.2f}, "
                      f"serialized {result['predicted_exposed_serialized_s'] * ms:.2f} ms)")

    return render
