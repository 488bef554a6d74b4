"""Turn measured sweeps (nccl-tests logs, tierwise results) into a calibrated cluster YAML.

The document (the lead's cluster loader reads these keys)::

    base: dgx-h100                      # the --cluster given (catalog name); a cluster file's keys are
                                        # copied instead; without --cluster the catalog cluster of the GPU
                                        # the logs name, else DEFAULT_BASE (so the file always loads)
    name: calibrated-dgx-h100
    source: "tierwise calibrate <files> (<date>)"
    fitted:
      scale_out:                        # the tier the measured group bottlenecks on
        num_ranks: 32
        ranks_per_domain: 8
        op: all-reduce
        regimes: [{name, min_bytes, max_bytes, latency_s, busbw_bytes_per_s}, ...]
        residuals: {median_abs_pct: .., max_abs_pct: ..}

A ``measure gemm --json`` result (one GPU) calibrates the accelerator instead of a tier: the best
throughput among the BF16/FP16 GEMMs whose every dimension is at least 4,096, over the ``--cluster``
accelerator's dense datasheet peak of that precision, is the achievable fraction of peak for a large GEMM,
written as ``compute: {matmul_efficiency_max: ...}``, which the estimator then uses for that cluster in
place of the catalog's microbenchmark figure (catalog/compute.yaml; the global fitted ``matmul_residual``
still applies). A ``measure hbm --json`` result is compared with the datasheet HBM bandwidth the same way
and written as ``compute: {memory_bound_efficiency: ...}``: the streaming fraction, which replaces the
catalog's ``hbm_fraction`` for that cluster (the fitted ``memory_bound_residual`` still applies: what fused
training kernels reach of a STREAM kernel; docs/compute.md).

A gloo all-reduce sweep with every rank on one host (``backend: gloo``, ``ranks_per_node == num_ranks``:
TCP loopback, no per-rank links) is written with ``model: host-copy`` and each regime carries
``step_latency_s`` and ``copy_s_per_byte`` as well (fitted), and ``memory_s_per_byte`` (measured: the run's
``host_memory_s_per_byte``, the host memory probe of ``measure collective``; :mod:`tierwise.measure.hostcopy`).
A result recorded without the probe gets no ``memory_s_per_byte`` and :attr:`Calibration.notes` says so.
The regimes'
``latency_s`` and ``busbw_bytes_per_s`` are the same all-reduce fit as before, so every reader of the
all-reduce line (``measure ddp``, older tierwise) predicts the all-reduce as before. Other sweeps in the
inputs on the fitted tier and rank count (all-gather, broadcast, emulated reduce-scatter) are predicted
from the fit and compared (:attr:`Calibration.comparisons`); they are never fitted.

Tier rule: a group that fits in one scale-up domain (``num_ranks <= ranks_per_domain``) bottlenecks on
``scale_up``; a group spanning domains bottlenecks on ``scale_out`` (the slower tier carries the
inter-domain steps of every ring/tree; collectives-notes.md section 5.4). A local gloo run of N processes
on one host is one domain: ``scale_up``. The regimes are :func:`tierwise.measure.fit.fit_regimes`; the
prediction rule is :func:`tierwise.measure.fit.predict_time`.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from tierwise.atomic import write_atomic
from tierwise.collectives.volumes import normalize_kind
from tierwise.errors import MeasureError, SpecError
from tierwise.files import require_document
from tierwise.measure.fit import RegimeFit, fit_regimes
from tierwise.measure.hostcopy import HOST_COPY_OPS, fit_host_copy
from tierwise.measure.hostcopy import MODEL as HOST_COPY
from tierwise.measure.nccl_log import NcclRow, NcclSweep, parse_nccl_json, parse_nccl_text, read_text
from tierwise.specs.catalog import entry, load_yaml_file
from tierwise.specs.cluster import CLUSTER_FILE_NEEDS, load_cluster

__all__ = ["load_sweeps", "sweeps_from_rows", "calibrate", "Calibration", "tier_for", "write_yaml",
           "is_host_loopback", "cluster_for_device", "DEFAULT_BASE"]

_FITTABLE_NOTE = "not fitted"


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The calibrated document plus the fits behind it and what was skipped."""

    document: dict
    fits: dict[str, RegimeFit]
    skipped: tuple[str, ...]
    comparisons: tuple[dict, ...] = ()
    """Other ops of the inputs predicted from a tier's fit: {tier, op, num_ranks, size_bytes, measured_s,
    predicted_s, error_pct, emulated}; reported, not fitted."""
    device: tuple[str, ...] = ()
    """One line per ``measure gemm`` / ``measure hbm`` input: what it measured against the datasheet."""
    notes: tuple[str, ...] = ()
    """How a fit was made where that is not the default (a host-copy fit without the measured memory rate)."""
    base_note: str = ""
    """Without ``--cluster``: which catalog cluster the file starts from, and why (:data:`DEFAULT_BASE`)."""


LARGE_GEMM_DIM = 4096
"""Every dimension at least this: tiles fill the GPU and the K loop is long (the ``large GEMM`` of
``matmul_efficiency_max``)."""
_GEMM_PRECISION = {"bfloat16": "bf16", "float16": "bf16"}
"""Dense FP16 and BF16 tensor-core peaks are equal on the parts in the catalog (hardware.csv)."""


def _device_result(path: str | Path) -> tuple[str, list[dict]] | None:
    """``("gemm" | "hbm", rows)`` when ``path`` holds a ``measure gemm`` / ``measure hbm`` --json result."""
    p = Path(path)
    text = read_text(p, "log or result")
    if not text.lstrip().startswith("["):
        return None
    try:
        data = json.loads(text)
    except (RecursionError, ValueError):  # JSONDecodeError is a ValueError
        return None  # load_sweeps reports it
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        return None
    if all({"m", "n", "k", "dtype", "flops_per_s"} <= r.keys() for r in data):
        return "gemm", data
    if all({"kernel", "bytes_per_s"} <= r.keys() for r in data):
        return "hbm", data
    return None


def gemm_efficiency(rows: list[dict], accelerator, source: str = "measure gemm") -> tuple[float, str]:
    """(achievable fraction of the dense peak for a large GEMM, report line) from ``measure gemm`` rows."""
    large = [r for r in rows if min(int(r["m"]), int(r["n"]), int(r["k"])) >= LARGE_GEMM_DIM
             and r["dtype"] in _GEMM_PRECISION]
    if not large:
        raise MeasureError(f"{source}: no bfloat16/float16 GEMM with every dimension >= {LARGE_GEMM_DIM}; run "
                           "`tierwise measure gemm` (its default shapes include them)")
    best = max(large, key=lambda r: float(r["flops_per_s"]))
    peak = accelerator.peak_flops_per_s(_GEMM_PRECISION[best["dtype"]])
    eff = float(best["flops_per_s"]) / peak
    if not 0.0 < eff <= 1.0:
        raise MeasureError(f"{source}: {float(best['flops_per_s']) / 1e12:.0f} TFLOP/s measured against a dense "
                           f"{_GEMM_PRECISION[best['dtype']]} peak of {peak / 1e12:.0f} TFLOP/s for "
                           f"{accelerator.name}; is --cluster the cluster these GPUs belong to?")
    line = (f"gemm: {best['m']} x {best['n']} x {best['k']} {best['dtype']} at {float(best['flops_per_s']) / 1e12:.0f} "
            f"TFLOP/s = {eff:.1%} of {accelerator.name}'s dense peak -> compute.matmul_efficiency_max")
    return eff, line


def hbm_report(rows: list[dict], accelerator) -> tuple[float, str]:
    """The best STREAM kernel's bandwidth as a fraction of the datasheet HBM bandwidth (capped at 1), and one
    line saying so."""
    best = max(rows, key=lambda r: float(r["bytes_per_s"]))
    frac = float(best["bytes_per_s"]) / accelerator.hbm_bytes_per_s
    return min(frac, 1.0), (
        f"hbm: STREAM {best['kernel']} {float(best['bytes_per_s']) / 1e9:.0f} GB/s = {frac:.1%} of "
        f"{accelerator.name}'s datasheet {accelerator.hbm_bytes_per_s / 1e9:.0f} GB/s -> "
        "compute.memory_bound_efficiency (times the fitted memory_bound_residual)")


def is_host_loopback(sweep: NcclSweep) -> bool:
    """A gloo sweep with all ranks on one host: the shared-host (host-copy) model applies to it."""
    return sweep.backend == "gloo" and (sweep.ranks_per_node or sweep.num_ranks) >= sweep.num_ranks


NO_MEMORY_RATE_NOTE = ("{label}: no host_memory_s_per_byte in the result (recorded before `tierwise measure "
                       "collective` probed the host's memory rate); the copies outside gloo's algorithm are priced "
                       "at the fitted copy_s_per_byte like every other byte. Measure again to price them at the "
                       "memory rate")


def _host_copy_fit(sweep: NcclSweep, fit: RegimeFit) -> tuple[RegimeFit, str | None]:
    """The all-reduce regimes with the host-copy parameters fitted per regime range (same ranges) and, when
    every row carries it, the run's measured memory rate (the median of the rows' probe values); else a note
    saying the outside copies are priced at the fitted rate (:mod:`tierwise.measure.hostcopy`)."""
    sizes, times = [r.size_bytes for r in sweep.rows], [r.time_s for r in sweep.rows]
    params = fit_host_copy(sizes, times, sweep.num_ranks, [(r.min_bytes, r.max_bytes) for r in fit.regimes])
    probes = [r.host_memory_s_per_byte for r in sweep.rows]
    memory = float(statistics.median(probes)) if all(p is not None for p in probes) else None
    regimes = tuple(replace(r, step_latency_s=p.step_latency_s, copy_s_per_byte=p.copy_s_per_byte,
                            memory_s_per_byte=memory)
                    for r, p in zip(fit.regimes, params, strict=True))
    note = None if memory is not None else NO_MEMORY_RATE_NOTE.format(label=sweep.label)
    return replace(fit, regimes=regimes, model=HOST_COPY), note


def _compare(tier: str, fit: RegimeFit, sweep: NcclSweep) -> list[dict]:
    """Measured against predicted for one sweep of another op on the fitted tier (empty if not predictable)."""
    if sweep.num_ranks != fit.num_ranks or (fit.model == HOST_COPY and sweep.op not in HOST_COPY_OPS):
        return []
    rows = []
    for row in sweep.rows:
        predicted = fit.predict(sweep.op, row.size_bytes)
        if not math.isfinite(predicted) or row.time_s <= 0:
            continue
        rows.append({"tier": tier, "op": sweep.op, "num_ranks": sweep.num_ranks, "size_bytes": row.size_bytes,
                     "measured_s": row.time_s, "predicted_s": predicted,
                     "error_pct": (predicted - row.time_s) / row.time_s * 100.0,
                     "emulated": bool(sweep.notes and any(_FITTABLE_NOTE in note for note in sweep.notes))})
    return rows


class _NamedValueError(ValueError):
    """A bad value whose message already names its key."""


def _positive(value, name: str, *, zero_ok: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        v = math.nan
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok):
        text = repr(value) if isinstance(value, int | float) else repr(str(value))
        raise _NamedValueError(f"{name}={text if len(text) <= 40 else text[:37] + '...'} is not a positive number")
    return v


def sweeps_from_rows(rows: list[dict], source: str) -> list[NcclSweep]:
    """Group tierwise result rows (``measure collective --out``) into one sweep per (op, ranks, backend) and
    run (each row's ``run``: several runs may share one ``--out`` file)."""
    groups: dict[tuple, list[NcclRow]] = {}
    for i, row in enumerate(rows):
        field = "op"
        try:
            if not isinstance(row, dict):
                raise TypeError(f"a {type(row).__name__}, not an object")
            op = normalize_kind(str(row["op"]))
            field = "num_ranks"
            num_ranks = int(row["num_ranks"])
            field = "ranks_per_node"
            per_node = None if row.get("ranks_per_node") is None else int(row["ranks_per_node"])
            field = "size_bytes, time_s, algbw_bytes_per_s, busbw_bytes_per_s, wrong or host_memory_s_per_byte"
            key = (op, num_ranks, str(row.get("backend") or ""), per_node,
                   None if row.get("note") is None else str(row["note"]), str(row.get("run") or ""))
            if key[1] < 2 or (key[3] is not None and key[3] < 1):
                raise ValueError(f"num_ranks={key[1]}, ranks_per_node={key[3]}")
            memory = row.get("host_memory_s_per_byte")
            wrong = row.get("wrong")
            parsed = NcclRow(size_bytes=_positive(row["size_bytes"], "size_bytes", zero_ok=True),
                             time_s=_positive(row["time_s"], "time_s"),
                             algbw_bytes_per_s=_positive(row.get("algbw_bytes_per_s", 0.0), "algbw", zero_ok=True),
                             busbw_bytes_per_s=_positive(row.get("busbw_bytes_per_s", 0.0), "busbw", zero_ok=True),
                             wrong=None if wrong is None else int(wrong),
                             host_memory_s_per_byte=None if memory is None else _positive(memory,
                                                                                          "host_memory_s_per_byte"))
        except (KeyError, TypeError, ValueError, OverflowError, SpecError) as exc:
            what = str(exc)[:120] if isinstance(exc, _NamedValueError) else f"{field}: {str(exc)[:120]}"
            raise MeasureError(f"{source}: row {i} is not a tierwise result row ({what}); "
                               "expected keys op, num_ranks, size_bytes, time_s") from None
        groups.setdefault(key, []).append(parsed)
    runs_of: dict[tuple, int] = {}
    for key in groups:
        runs_of[key[:5]] = runs_of.get(key[:5], 0) + 1
    sweeps = []
    for (op, n, backend, per_node, note, run), group in groups.items():
        group.sort(key=lambda r: r.size_bytes)
        # several runs of one sweep in a file (concurrent or repeated `measure --out`): the run names it
        label = f"{backend}-{op}-{n}" + (f"@{run}" if run and runs_of[(op, n, backend, per_node, note)] > 1 else "")
        sweeps.append(NcclSweep(
            op=op, num_ranks=n, source=source, label=label, run=run,
            ranks_per_node=int(per_node) if per_node else n,  # a spawned run is one host
            rows=tuple(group), notes=(note,) if note else (), backend=backend,
        ))
    return sweeps


def load_sweeps(path: str | Path, *, op: str | None = None, num_ranks: int | None = None) -> list[NcclSweep]:
    """Sweeps from a tierwise JSON result or an nccl-tests log (decided by content, not by name)."""
    p = Path(path)
    text = read_text(p, "log or result")
    if text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MeasureError(f"{p}: malformed JSON at line {exc.lineno}: {exc.msg} (a truncated file?)") from None
        except (RecursionError, ValueError) as exc:  # nesting; an integer of more than 4300 digits
            raise MeasureError(f"{p}: unreadable JSON ({type(exc).__name__}); not an nccl-tests -J document or "
                               "a tierwise result") from None
        if isinstance(data, dict) and "results" in data and "rows" not in data and "calibration_rows" not in data:
            return parse_nccl_json(data, str(p), op=op, num_ranks=num_ranks)  # nccl-tests -J FILE
        # a list of rows (measure collective --out), or a measure ddp result with its calibration sweep
        rows = (data.get("rows") or data.get("calibration_rows") or []) if isinstance(data, dict) else data
        if not isinstance(rows, list) or not rows:
            raise MeasureError(f"{p}: empty sweep (no result rows); run `tierwise measure collective --out` first")
        return sweeps_from_rows(rows, str(p))
    return parse_nccl_text(text, str(p), op=op, num_ranks=num_ranks)


def tier_for(num_ranks: int, ranks_per_domain: int) -> str:
    """``scale_up`` if the group fits in one scale-up domain, else ``scale_out`` (module docstring)."""
    return "scale_up" if num_ranks <= ranks_per_domain else "scale_out"


def _cluster_base(cluster: str | None) -> tuple[str | None, int | None, dict]:
    """(base catalog name, ranks per scale-up domain, the file's own keys) for ``--cluster``.

    A catalog name becomes ``base:``; a cluster file is copied into the calibrated document (keeping its
    own ``base:`` if it has one), so the result loads wherever the file did.

    The domain size is the spec's ``scale_up_domain`` (GPUs joined by one NVLink/NVSwitch domain; 72 on an
    NVL72 rack, where a host has 4), else ``gpus_per_node``, following ``base:`` through the catalog.
    """
    if cluster is None:
        return None, None, {}

    def catalog_entry(name: str) -> dict:
        try:
            return entry("clusters", name)
        except FileNotFoundError:
            raise MeasureError(f"--cluster {name!r}: this installation has no cluster catalog; pass a "
                               "cluster YAML file or --ranks-per-domain") from None

    p = Path(cluster)
    own: dict = {}
    if p.suffix in (".yaml", ".yml", ".json") or os.path.exists(p):  # never raises (a name too long)

        raw = require_document(load_yaml_file(p, what="cluster file"), f"--cluster {cluster}: the file",
                               CLUSTER_FILE_NEEDS, error=MeasureError)
        own = {k: v for k, v in raw.items() if k not in ("name", "source", "fitted")}
        label = raw.get("name") or p.stem
    else:
        raw = catalog_entry(cluster)
        label = cluster.strip().lower()
    seen = set()
    while isinstance(raw, dict):
        for key in ("ranks_per_domain", "scale_up_domain", "gpus_per_node"):
            value = raw.get(key)
            if isinstance(value, int) and value > 0:
                return label, value, own
        parent = raw.get("base")
        if not parent or parent in seen:
            break
        seen.add(parent)
        raw = catalog_entry(parent)
    return label, None, own


DEFAULT_BASE = "dgx-h100"
"""The catalog cluster a calibration without ``--cluster`` starts from when no input names its GPU: the
written file then loads in every command (``estimate``, ``plan``, ``tiers``), and the notes say so."""

_GPU_CLUSTERS = (
    (r"GB300", "gb300-nvl72"), (r"GB200", "gb200-nvl72"), (r"B300", "hgx-b300"), (r"B200", "dgx-b200"),
    (r"H800", "hgx-h800"), (r"H200", "hgx-h200"), (r"H100", "dgx-h100"), (r"A100.*40\s*GB", "dgx-a100-40gb"),
    (r"A100", "dgx-a100"), (r"MI355X", "mi355x-8"), (r"MI325X", "mi325x-8"), (r"MI300X", "mi300x-8"),
)
"""GPU name in a log (nccl-tests prints cudaDeviceProp.name) -> the catalog cluster built from that part."""


def cluster_for_device(name: str) -> str | None:
    """The catalog cluster of the GPU a log names (``NVIDIA H100 80GB HBM3`` -> ``dgx-h100``), or None."""
    import re

    for pattern, cluster in _GPU_CLUSTERS:
        if re.search(pattern, name, re.IGNORECASE):
            return cluster
    return None


def _implied_base(sweeps: list[NcclSweep]) -> tuple[str, str]:
    """(catalog cluster, note) for a calibration without --cluster (see :data:`DEFAULT_BASE`)."""
    named = {s.device for s in sweeps if s.device}
    clusters = {cluster_for_device(d) for d in named} - {None}
    if len(clusters) == 1:
        base = clusters.pop()
        return base, (f"no --cluster: the inputs ran on {' / '.join(sorted(named))}, so the file starts from "
                      f"base: {base}; pass --cluster NAME|FILE to calibrate another cluster")
    return DEFAULT_BASE, (f"no --cluster and no GPU named in the inputs: the file starts from base: {DEFAULT_BASE} "
                          "(its accelerator and links) so every command accepts it; pass --cluster NAME|FILE "
                          "for the cluster you measured")


def _choose(tier: str, candidates: list[tuple[NcclSweep, int]]) -> tuple[NcclSweep, int]:
    """One sweep per tier: the only one, else the only all-reduce (the calibrating collective); a sweep that
    several runs wrote into one result file counts once, by its latest run."""
    for group in (candidates, [c for c in candidates if c[0].op == "all-reduce"]):
        if len(group) == 1:
            return group[0]
        same = {(c[0].op, c[0].num_ranks, c[0].backend, c[0].source) for c in group}
        if group and len(same) == 1 and all(c[0].run for c in group):
            # one sweep measured by several runs into the same --out file: the latest run (ids sort by start
            # time); --select picks another (its label ends @RUN)
            return max(group, key=lambda c: c[0].run)
    labels = ", ".join(repr(c[0].label) for c in candidates)
    raise MeasureError(f"{len(candidates)} sweeps map to tier {tier} ({labels}); pass --select LABEL to choose one")


def calibrate(paths: list[str], *, cluster: str | None = None, select: str | None = None,
              op: str | None = None, num_ranks: int | None = None, ranks_per_domain: int | None = None,
              today: _dt.date | None = None) -> Calibration:
    """Fit every usable sweep in ``paths`` and assemble the calibrated cluster document."""
    if not paths:
        raise MeasureError("no input: pass nccl-tests logs or tierwise results to calibrate")
    label, cluster_domain, own = _cluster_base(cluster)
    sweeps, device_lines, compute = _read_inputs(paths, cluster=cluster, op=op, num_ranks=num_ranks)
    if select:
        sweeps = [s for s in sweeps if select in s.label]
        if not sweeps:
            raise MeasureError(f"--select {select!r} matches no sweep; labels are taken from file and column names")
    skipped, by_tier, not_fitted = [], {}, {}
    if not sweeps and device_lines:
        return _document(Calibration(document={}, fits={}, skipped=(), device=tuple(device_lines)), cluster, label,
                         own, paths, today, {}, compute)
    for sweep in sweeps:
        domain = ranks_per_domain or cluster_domain or sweep.ranks_per_node or sweep.num_ranks
        tier = tier_for(sweep.num_ranks, domain)
        if any(_FITTABLE_NOTE in note for note in sweep.notes):
            skipped.append(f"{sweep.label}: {sweep.notes[0]}")
            not_fitted.setdefault(tier, []).append(sweep)
            continue
        by_tier.setdefault(tier, []).append((sweep, domain))
    chosen = {tier: _choose(tier, candidates) for tier, candidates in by_tier.items()}
    if not by_tier:
        raise MeasureError("empty sweep: nothing left to fit (" + "; ".join(skipped) + ")")
    fitted, fits, comparisons, notes = {}, {}, [], []
    for tier, (sweep, domain) in chosen.items():
        fit, fitted[tier] = _fit_sweep(sweep, domain, notes)
        fits[tier] = fit
        others = [s for s, _ in by_tier[tier] if s is not sweep] + not_fitted.get(tier, [])
        for other in others:
            comparisons.extend(_compare(tier, fit, other))
    base_note = ""
    if cluster is None:  # the file must load as a cluster: it needs an accelerator, so a base
        label, base_note = _implied_base([sweep for sweep, _ in chosen.values()])
        own = {"base": label}
    result = Calibration(document={}, fits=fits, skipped=tuple(skipped), comparisons=tuple(comparisons),
                         device=tuple(device_lines), notes=tuple(notes), base_note=base_note)
    return _document(result, cluster, label, own, paths, today, fitted, compute)


def _read_inputs(paths: list[str], *, cluster: str | None, op: str | None,
                 num_ranks: int | None) -> tuple[list[NcclSweep], list[str], dict[str, float]]:
    """(sweeps, device report lines, measured compute values) of ``paths``: nccl-tests logs and tierwise results;
    a measure gemm/hbm result is compared with the ``cluster``'s accelerator datasheet."""
    sweeps: list[NcclSweep] = []
    device_lines: list[str] = []
    compute: dict[str, float] = {}
    for path in paths:
        device = _device_result(path)
        if device is None:
            sweeps.extend(load_sweeps(path, op=op, num_ranks=num_ranks))
            continue
        if cluster is None:
            raise MeasureError(f"{path}: a measure {device[0]} result is compared with the accelerator's datasheet; "
                               "pass --cluster (the catalog cluster or file these GPUs belong to)")

        accelerator = load_cluster(cluster).accelerator
        if device[0] == "gemm":
            compute["matmul_efficiency_max"], line = gemm_efficiency(device[1], accelerator, str(path))
        else:
            compute["memory_bound_efficiency"], line = hbm_report(device[1], accelerator)
        device_lines.append(line)
    return sweeps, device_lines, compute


def _fit_sweep(sweep: NcclSweep, domain: int, notes: list[str]) -> tuple[RegimeFit, dict]:
    """(fit, the tier's ``fitted`` entry) of the sweep chosen for a tier; a host-loopback note goes to ``notes``."""
    fit = fit_regimes([r.size_bytes for r in sweep.rows], [r.time_s for r in sweep.rows], sweep.op,
                      sweep.num_ranks)
    if sweep.op == "all-reduce" and is_host_loopback(sweep):
        fit, note = _host_copy_fit(sweep, fit)
        if note:
            notes.append(note)
    return fit, {
        "num_ranks": sweep.num_ranks,
        "ranks_per_domain": int(domain),
        "op": sweep.op,
        **({"model": HOST_COPY} if fit.model == HOST_COPY else {}),
        "regimes": [r.as_dict() for r in fit.regimes],
        "residuals": {"median_abs_pct": round(fit.median_abs_pct, 2), "max_abs_pct": round(fit.max_abs_pct, 2)},
    }


def _document(result: Calibration, cluster, label, own: dict, paths, today, fitted: dict,
              compute: dict) -> Calibration:
    """The cluster YAML document (module docstring) around the fitted tiers and measured compute values."""
    date = (today or _dt.date.today()).isoformat()
    document: dict = {}
    if cluster is not None and not own:  # a catalog name
        document["base"] = label
    document.update(own)
    document["name"] = f"calibrated-{label}" if label else "calibrated"
    document["source"] = f"tierwise calibrate {' '.join(Path(p).name for p in paths)} ({date})"
    if fitted:
        document["fitted"] = fitted
    if compute:
        document["compute"] = {k: float(f"{v:.4g}") for k, v in compute.items()}
    return replace(result, document=document)


def write_yaml(document: dict, path: str | Path, what: str = "--out") -> None:
    """Write the calibrated document as YAML (keys in the documented order), atomically
    (:func:`tierwise.atomic.write_atomic`: a failed write leaves no partial file)."""
    import yaml

    write_atomic(path, yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=120), what)
