"""Turn measured sweeps (nccl-tests logs, tierwise results) into a calibrated cluster YAML.

The document (the lead's cluster loader reads these keys)::

    base: dgx-h100                      # the --cluster given (catalog name); a cluster file's keys are
                                        # copied instead; omitted without --cluster
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
place of the global fit. A ``measure hbm --json`` result is reported against the datasheet HBM bandwidth
and not written: the estimator's memory-bound fraction is fitted to whole training steps (fused kernels,
launch gaps), which a STREAM kernel does not measure.

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

from tierwise.collectives.volumes import normalize_kind
from tierwise.errors import MeasureError
from tierwise.measure.fit import RegimeFit, fit_regimes
from tierwise.measure.hostcopy import HOST_COPY_OPS, fit_host_copy
from tierwise.measure.hostcopy import MODEL as HOST_COPY
from tierwise.measure.nccl_log import NcclRow, NcclSweep, parse_nccl_text, read_text

__all__ = ["load_sweeps", "sweeps_from_rows", "calibrate", "Calibration", "tier_for", "write_yaml",
           "is_host_loopback"]

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
    except json.JSONDecodeError:
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


def hbm_report(rows: list[dict], accelerator) -> str:
    """One line: the best STREAM kernel's bandwidth against the datasheet HBM bandwidth (reported only)."""
    best = max(rows, key=lambda r: float(r["bytes_per_s"]))
    frac = float(best["bytes_per_s"]) / accelerator.hbm_bytes_per_s
    return (f"hbm: STREAM {best['kernel']} {float(best['bytes_per_s']) / 1e9:.0f} GB/s = {frac:.1%} of "
            f"{accelerator.name}'s datasheet {accelerator.hbm_bytes_per_s / 1e9:.0f} GB/s (reported, not written: "
            "the memory-bound fraction is fitted to whole training steps)")


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


def sweeps_from_rows(rows: list[dict], source: str) -> list[NcclSweep]:
    """Group tierwise result rows (``measure collective --out``) into one sweep per (op, ranks, backend)."""
    groups: dict[tuple, list[dict]] = {}
    for i, row in enumerate(rows):
        try:
            key = (normalize_kind(row["op"]), int(row["num_ranks"]), row.get("backend", ""),
                   row.get("ranks_per_node"), row.get("note"))
            float(row["size_bytes"]), float(row["time_s"])
            memory = row.get("host_memory_s_per_byte")
            if memory is not None and not (math.isfinite(float(memory)) and float(memory) > 0):
                raise ValueError(f"host_memory_s_per_byte={memory!r} is not a positive number")
        except (KeyError, TypeError, ValueError) as exc:
            raise MeasureError(f"{source}: row {i} is not a tierwise result row ({exc}); expected keys op, "
                               "num_ranks, size_bytes, time_s") from None
        groups.setdefault(key, []).append(row)
    sweeps = []
    for (op, n, backend, per_node, note), group in groups.items():
        group.sort(key=lambda r: r["size_bytes"])
        sweeps.append(NcclSweep(
            op=op, num_ranks=n, source=source, label=f"{backend}-{op}-{n}",
            ranks_per_node=int(per_node) if per_node else n,  # a spawned run is one host
            rows=tuple(NcclRow(size_bytes=float(r["size_bytes"]), time_s=float(r["time_s"]),
                               algbw_bytes_per_s=float(r.get("algbw_bytes_per_s", 0.0)),
                               busbw_bytes_per_s=float(r.get("busbw_bytes_per_s", 0.0)),
                               wrong=r.get("wrong"),
                               host_memory_s_per_byte=(None if r.get("host_memory_s_per_byte") is None
                                                       else float(r["host_memory_s_per_byte"]))) for r in group),
            notes=(note,) if note else (), backend=str(backend or ""),
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
            raise MeasureError(f"{p}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
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
    from tierwise.specs.catalog import entry, load_yaml_file

    def catalog_entry(name: str) -> dict:
        try:
            return entry("clusters", name)
        except FileNotFoundError:
            raise MeasureError(f"--cluster {name!r}: this installation has no cluster catalog; pass a "
                               "cluster YAML file or --ranks-per-domain") from None

    p = Path(cluster)
    own: dict = {}
    if p.suffix in (".yaml", ".yml", ".json") or os.path.exists(p):  # never raises (a name too long)
        raw = load_yaml_file(p, what="cluster file")
        if raw is None:
            raise MeasureError(f"--cluster {cluster}: the file is empty; give a cluster YAML (or a catalog name)")
        if not isinstance(raw, dict):
            from tierwise.files import describe_type

            raise MeasureError(f"--cluster {cluster}: the file holds {describe_type(raw)}, not a mapping of cluster "
                               "keys (accelerator, gpus_per_node, ... or base: a catalog cluster name)")
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


def _choose(tier: str, candidates: list[tuple[NcclSweep, int]]) -> tuple[NcclSweep, int]:
    """One sweep per tier: the only one, else the only all-reduce (the calibrating collective)."""
    if len(candidates) == 1:
        return candidates[0]
    all_reduce = [c for c in candidates if c[0].op == "all-reduce"]
    if len(all_reduce) == 1:
        return all_reduce[0]
    labels = ", ".join(repr(c[0].label) for c in candidates)
    raise MeasureError(f"{len(candidates)} sweeps map to tier {tier} ({labels}); pass --select LABEL to choose one")


def calibrate(paths: list[str], *, cluster: str | None = None, select: str | None = None,
              op: str | None = None, num_ranks: int | None = None, ranks_per_domain: int | None = None,
              today: _dt.date | None = None) -> Calibration:
    """Fit every usable sweep in ``paths`` and assemble the calibrated cluster document."""
    if not paths:
        raise MeasureError("no input: pass nccl-tests logs or tierwise results to calibrate")
    label, cluster_domain, own = _cluster_base(cluster)
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
        from tierwise.specs.cluster import load_cluster

        accelerator = load_cluster(cluster).accelerator
        if device[0] == "gemm":
            compute["matmul_efficiency_max"], line = gemm_efficiency(device[1], accelerator, str(path))
        else:
            line = hbm_report(device[1], accelerator)
        device_lines.append(line)
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
        fit = fit_regimes([r.size_bytes for r in sweep.rows], [r.time_s for r in sweep.rows], sweep.op,
                          sweep.num_ranks)
        if sweep.op == "all-reduce" and is_host_loopback(sweep):
            fit, note = _host_copy_fit(sweep, fit)
            if note:
                notes.append(note)
        fits[tier] = fit
        fitted[tier] = {
            "num_ranks": sweep.num_ranks,
            "ranks_per_domain": int(domain),
            "op": sweep.op,
            **({"model": HOST_COPY} if fit.model == HOST_COPY else {}),
            "regimes": [r.as_dict() for r in fit.regimes],
            "residuals": {"median_abs_pct": round(fit.median_abs_pct, 2), "max_abs_pct": round(fit.max_abs_pct, 2)},
        }
        others = [s for s, _ in by_tier[tier] if s is not sweep] + not_fitted.get(tier, [])
        for other in others:
            comparisons.extend(_compare(tier, fit, other))
    result = Calibration(document={}, fits=fits, skipped=tuple(skipped), comparisons=tuple(comparisons),
                         device=tuple(device_lines), notes=tuple(notes))
    return _document(result, cluster, label, own, paths, today, fitted, compute)


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


def write_yaml(document: dict, path: str | Path) -> None:
    """Write the calibrated document as YAML (keys in the documented order)."""
    import yaml

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=120))
