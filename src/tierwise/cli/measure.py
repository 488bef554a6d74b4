"""``tierwise measure collective|ddp|gemm|hbm|compute`` and ``tierwise calibrate``.

torch is imported inside the command bodies (through :mod:`tierwise.measure.bench`), so the CLI starts fast
and works without it; a measuring command without torch prints one line and exits with code 2.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from tierwise.cli._output import emit
from tierwise.errors import MeasureError

__all__ = ["register"]

measure_app = typer.Typer(help="Measure collectives, a DDP step, matmul, HBM and every compute kernel on this "
                          "machine.",
                          no_args_is_help=True)

_OPS = "all-reduce|all-gather|reduce-scatter|all-to-all|broadcast|send-recv"
MAX_DDP_WIDTH = 65536
"""``measure ddp --width``: a 65,536-wide layer is 4 G parameters already."""
MAX_DDP_LAYERS = 1024
MAX_DDP_BATCH = 65536
MAX_BUCKET_MB = 1048576.0
"""``--bucket-cap-mb`` at most 1 TiB."""


def _rank_limit() -> int:
    """Local processes a measuring command may spawn: 8 per CPU of this machine, at most 256."""
    from tierwise.limits import MAX_MEASURE_RANKS

    return max(2, min(MAX_MEASURE_RANKS, 8 * (os.cpu_count() or 1)))


def _check_ranks(ranks: int, what: str) -> None:
    """``--ranks`` of a spawning command: 2 .. what this machine can host (before torch is imported)."""
    from tierwise.limits import check_int

    limit = _rank_limit()
    check_int(ranks, "--ranks", minimum=2, maximum=limit, error=MeasureError,
              hint=f" ({what} needs >= 2 ranks; this machine hosts {limit}: 8 processes per CPU, at most 256)")


def _quiet():
    """No progress bar (under torchrun every rank would draw one)."""
    import contextlib

    return contextlib.nullcontext()


def _table_collective(rows: list[dict]):
    """nccl-tests' own layout: size count type redop root | time algbw busbw #wrong."""

    def render(console) -> None:
        by_op: dict[str, list[dict]] = {}
        for row in rows:
            by_op.setdefault(row["op"], []).append(row)
        for op, group in by_op.items():
            first = group[0]
            place = "in-place" if first.get("in_place") else "out-of-place"
            rounds = f", median of {first['rounds']} rounds" if first.get("rounds", 1) > 1 else ""
            console.print(f"# tierwise measure collective: {op}, {first['num_ranks']} ranks, backend "
                          f"{first['backend']}, {first['iters']} iters{rounds} ({place})")
            if first.get("note"):
                console.print(f"# NOTE: {first['note']}")
            console.print(f"#{'size':>11} {'count':>13} {'type':>9} {'redop':>7} {'root':>7} "
                          f"{'time':>8} {'algbw':>7} {'busbw':>7} {'#wrong':>7}")
            console.print(f"#{'(B)':>11} {'(elements)':>13} {'':>9} {'':>7} {'':>7} "
                          f"{'(us)':>8} {'(GB/s)':>7} {'(GB/s)':>7} {'':>7}")
            redop = "sum" if op in ("all-reduce", "reduce-scatter") else "none"
            root = "0" if op == "broadcast" else "-1"
            for r in group:
                console.print(f" {r['size_bytes']:>11} {r['count']:>13} {r['type']:>9} {redop:>7} {root:>7} "
                              f"{r['time_s'] * 1e6:>8.1f} {r['algbw_bytes_per_s'] / 1e9:>7.2f} "
                              f"{r['busbw_bytes_per_s'] / 1e9:>7.2f} {r['wrong']:>7}")

    return render


@measure_app.command("collective")
def collective(
    *,
    op: list[str] = typer.Option(["all-reduce"], "--op", help=f"{_OPS}; repeat to measure several"),
    backend: str = typer.Option("gloo", "--backend", help="gloo (CPU) or nccl (GPU)"),
    sizes: str = typer.Option("1KiB:64MiB", "--sizes", help="START:END (x --factor), or a comma list"),
    factor: float = typer.Option(2.0, "--factor", help="size multiplier of a START:END range"),
    iters: int = typer.Option(20, "--iters", help="timed operations per size"),
    warmup: int = typer.Option(5, "--warmup", help="untimed operations per size"),
    ranks: int = typer.Option(2, "--ranks", help="local processes to spawn (ignored under torchrun)"),
    stat: str = typer.Option("median", "--stat", help="CPU time statistic for time_s: median, min or mean"),
    rounds: int = typer.Option(1, "--rounds", help="repeat the sweep, the ops of a size together; time_s is the "
                               "median over rounds (steadier on a shared host)"),
    out: str | None = typer.Option(None, "--out", help="write the rows as JSON (rewritten after each size; rows of other runs "
                               "already in the file are kept, each row names its run)"),
    as_json: bool = typer.Option(False, "--json", help="print the rows as JSON"),
) -> None:
    """Time collectives through torch.distributed, printed like nccl-tests."""
    from tierwise.collectives.volumes import normalize_kind
    from tierwise.errors import SpecError
    from tierwise.limits import MAX_ITERS, MAX_ROUNDS, check_int
    from tierwise.measure.bench import (
        BenchConfig,
        _under_torchrun,
        parse_sizes,
        require_torch,
    )

    try:
        ops = tuple(normalize_kind(o) for o in op)
    except SpecError as exc:
        raise MeasureError(str(exc)) from None
    check_int(iters, "--iters", maximum=MAX_ITERS, error=MeasureError)
    check_int(warmup, "--warmup", minimum=0, maximum=MAX_ITERS, error=MeasureError)
    check_int(rounds, "--rounds", maximum=MAX_ROUNDS, error=MeasureError)
    if not _under_torchrun():
        _check_ranks(ranks, "a collective")
    size_list = parse_sizes(sizes, factor)
    from tierwise.measure.bench import is_output_rank
    from tierwise.measure.bounds import check_collective_run

    check_collective_run(size_list, ops, iters, warmup, rounds, backend)  # before any process is spawned

    if out is not None and is_output_rank():  # before any process is spawned (run_collectives checks again)
        from tierwise.atomic import check_writable, read_rows

        check_writable(out, "--out")
        read_rows(out, "--out")
    config = BenchConfig(ops=ops, sizes_bytes=size_list, iters=iters, warmup=warmup, backend=backend,
                         out=str(out) if out else None, stat=stat, rounds=rounds)
    require_torch()
    results = _run_collectives(config, ranks, out)
    if results is None:  # not rank 0 under torchrun: only rank 0 prints
        return
    rows = [row for op_rows in results.values() for row in op_rows]
    emit(rows, as_json, _table_collective(rows), document="measure-collective")


def _run_collectives(config, ranks: int, out: str | None):
    """Run the measurement (a progress line unless under torchrun); an interrupt names what was written."""
    from tierwise.cli._progress import progress
    from tierwise.measure.bench import _under_torchrun, run_collectives

    try:
        with progress(f"measuring {', '.join(config.ops)} on {ranks} ranks") if not _under_torchrun() else _quiet():
            return run_collectives(config, ranks)
    except KeyboardInterrupt:  # main prints the line on stderr: with --json, stdout holds the document or nothing
        from tierwise.cli._interrupt import Interrupted

        raise Interrupted(f"the completed sizes are in {out}" if out else "nothing written (no --out)") from None


@measure_app.command("ddp")
def ddp(
    *,
    ranks: int = typer.Option(2, "--ranks", help="local processes to spawn (ignored under torchrun)"),
    steps: int = typer.Option(7, "--steps", help="measured steps (medians over them; >= 5)"),
    warmup: int = typer.Option(2, "--warmup", help="untimed steps"),
    width: int = typer.Option(1024, "--width", help="hidden width of the MLP"),
    layers: int = typer.Option(6, "--layers", help="linear layers of the MLP"),
    batch: int = typer.Option(32, "--batch", help="samples per rank per step"),
    bucket_cap_mb: float = typer.Option(25.0, "--bucket-cap-mb", help="DDP bucket cap (MiB, DDP's default 25)"),
    calibration: Path | None = typer.Option(None, "--calibration",
                                            help="calibrated YAML or result JSON for the prediction; "
                                                 "default: measure an all-reduce sweep first"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Train a small MLP with DistributedDataParallel over gloo; compute vs communication vs exposed."""
    from tierwise.limits import MAX_ITERS, check_float, check_int
    from tierwise.measure.bench import _under_torchrun, require_torch
    from tierwise.measure.ddp import DdpConfig, load_calibration, render_ddp, run_ddp

    if not _under_torchrun():
        _check_ranks(ranks, "data parallelism")
    check_int(steps, "--steps", minimum=5, maximum=MAX_ITERS, error=MeasureError, hint=" (medians need >= 5)")
    check_int(warmup, "--warmup", minimum=0, maximum=MAX_ITERS, error=MeasureError)
    check_int(width, "--width", maximum=MAX_DDP_WIDTH, error=MeasureError)
    check_int(layers, "--layers", maximum=MAX_DDP_LAYERS, error=MeasureError)
    check_int(batch, "--batch", maximum=MAX_DDP_BATCH, error=MeasureError)
    check_float(bucket_cap_mb, "--bucket-cap-mb", minimum=0.0, min_open=True, maximum=MAX_BUCKET_MB,
                error=MeasureError, hint=" (MiB)")
    from tierwise.measure.bounds import check_ddp_run

    check_ddp_run(steps, warmup, width, layers, batch)
    config = DdpConfig(steps=steps, warmup=warmup, width=width, layers=layers, batch=batch,
                       bucket_cap_mb=bucket_cap_mb)
    given = load_calibration(str(calibration), ranks) if calibration else None  # before torch and the run
    require_torch()
    from tierwise.cli._progress import progress

    with progress(f"training a DDP MLP on {ranks} ranks") if not _under_torchrun() else _quiet():
        result = run_ddp(config, ranks, calibration=given)
    if result is None:
        return
    emit(result, as_json, render_ddp(result), document="measure-ddp")


@measure_app.command("gemm")
def gemm(
    dtype: str = typer.Option("bfloat16", "--dtype", help="bfloat16, float16 or float32"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Matmul throughput (TFLOP/s) by shape on one GPU."""
    from tierwise.cli._progress import progress
    from tierwise.measure.gpu import measure_gemm, render_gemm

    with progress("measuring matmul throughput"):
        rows = measure_gemm(dtype=dtype)
    emit(rows, as_json, render_gemm(rows), document="measure-gemm")


@measure_app.command("hbm")
def hbm(
    size: str = typer.Option("1GiB", "--size", help="bytes per array"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """HBM bandwidth (copy and triad) on one GPU."""
    from tierwise.limits import MAX_SWEEP_BYTES
    from tierwise.measure.gpu import measure_hbm, render_hbm
    from tierwise.units import parse_bytes

    size_bytes = int(parse_bytes(size, what="--size", maximum=MAX_SWEEP_BYTES))
    if size_bytes < 1:
        raise MeasureError(f"--size {size!r} is less than one byte; use --size >= 1 B, e.g. 1GiB")
    from tierwise.cli._progress import progress

    with progress("measuring HBM bandwidth"):
        rows = measure_hbm(size_bytes=size_bytes)
    emit(rows, as_json, render_hbm(rows), document="measure-hbm")


def _render_hf_step(console, hf: dict) -> None:
    """The --hf-step lines: what ran, measured vs predicted, and the CPU caveat."""
    console.print(f"training step of {hf['model']} in transformers {hf['transformers']} ({hf['architecture']}, "
                  f"{hf['layers']} layers, {hf['params'] / 1e6:.4g} M parameters, batch {hf['batch']} x seq "
                  f"{hf['seq']}, attention {hf['attention']}, AdamW {hf['optimizer']}, {hf['precision']})")
    p = hf["predicted"]
    console.print(f"  measured {hf['measured_s'] * 1e3:.4g} ms (median of {hf['steps_timed']}), predicted "
                  f"{hf['predicted_s'] * 1e3:.4g} ms: predicted / measured {hf['ratio']:.3g}"
                  + (" (interrupted: the steps timed so far)" if hf["interrupted"] else ""))
    console.print(f"  predicted: compute {p['compute_s'] * 1e3:.4g} ms (attention {p['attention_s'] * 1e3:.4g}, "
                  f"memory-bound {p['memory_bound_s'] * 1e3:.4g}), optimizer {p['optimizer_s'] * 1e3:.4g} ms")
    if hf["note"]:
        console.print(f"  note: {hf['note']}", style="yellow")


def _render_compute(result, out: str | None):
    def render(console) -> None:
        info = result.info
        console.print(f"measure compute on {info['device']} (torch {info['torch']}"
                      f"{', CUDA ' + info['cuda'] if info['cuda'] else ''}{', HIP ' + info['hip'] if info['hip'] else ''})"
                      f", predicted for {result.accelerator} ({result.cluster}) with the shipped rates")
        console.print(f"  {'kernel':<19} {'shape':<18} {'dtype':<5} {'backend':<20} {'measured':>11} {'rate':>14} "
                      f"{'predicted':>11} {'error':>8}")
        for r, p in zip(result.rows, result.predictions, strict=True):
            rate = (f"{r['flops_per_s'] / 1e12:8.3g} TFLOP/s" if r.get("flops_per_s")
                    else f"{r['bytes_per_s'] / 1e9:9.4g} GB/s")
            pred = "-" if p["predicted_s"] is None else f"{p['predicted_s'] * 1e3:8.4g} ms"
            err = "-" if p["error_pct"] is None else f"{p['error_pct']:+7.0f}%"
            console.print(f"  {r['kernel']:<19} {r['shape']:<18} {r['dtype']:<5} {r.get('backend', ''):<20} "
                          f"{r['time_s'] * 1e3:8.4g} ms {rate:>14} {pred:>11} {err:>8}")
        for key, value in result.compute.items():
            console.print(f"  compute.{key}: {value:.4g}")
        if result.hf_step is not None:
            _render_hf_step(console, result.hf_step)
        for line in result.warnings:
            console.print(f"warning: {line}", style="yellow")
        if out:
            console.print(f"wrote {out}" + (" (interrupted: the kernels measured so far)" if result.interrupted else ""))

    return render


@measure_app.command("compute")
def compute(
    *,
    cpu: bool = typer.Option(False, "--cpu", help="measure on the CPU with small shapes (tests, CI)"),
    cluster: str | None = typer.Option(None, "--cluster", help="catalog cluster or file the profile is for "
                                       "(default: the catalog cluster of the GPU measured)"),
    out: str | None = typer.Option(None, "--out", help="write the profile as a cluster YAML (works as --cluster FILE "
                                   "and as --compute FILE of estimate, plan, serve, serve-plan)"),
    backend: list[str] = typer.Option([], "--backend", help="SDPA backend to measure (math, flash, efficient, "
                                      "cudnn); repeat for several; default every one that runs here"),
    iters: int = typer.Option(10, "--iters", help="timed calls per kernel and batch"),
    warmup: int = typer.Option(3, "--warmup", help="untimed calls per kernel (and untimed --hf-step steps, at "
                                                   "least one)"),
    hf_step: str | None = typer.Option(None, "--hf-step", help="also time one training step of this model in "
                                       "Hugging Face transformers (random weights, nothing downloaded) and print "
                                       "the estimator's prediction beside it: a catalog model, a model YAML or a "
                                       "local config.json (or its folder); needs pip install 'tierwise[hf]'"),
    hf_layers: int | None = typer.Option(None, "--hf-layers", help="layers of the --hf-step model (default: all; "
                                         "2 with --cpu)"),
    hf_seq: int | None = typer.Option(None, "--hf-seq", help="sequence length of the step (default 2048; 64 with "
                                      "--cpu)"),
    hf_batch: int | None = typer.Option(None, "--hf-batch", help="sequences per step (default 1)"),
    hf_attention: str = typer.Option("sdpa", "--hf-attention", help="transformers attn_implementation: sdpa or "
                                     "eager"),
    hf_steps: int = typer.Option(5, "--hf-steps", help="timed training steps (the median is reported)"),
    strict: bool = typer.Option(False, "--strict", help="refuse a device that is not the cluster's accelerator"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """GEMMs, HBM copy, attention (every SDPA backend), RMSNorm and a fused AdamW step on one device; write the
    cluster's compute: block. With --hf-step, one Hugging Face training step measured and predicted."""
    from tierwise.limits import MAX_BATCH, MAX_ITERS, MAX_LAYERS, MAX_SEQ, check_int
    from tierwise.measure.compute import ComputeBench, backend_name

    check_int(iters, "--iters", maximum=MAX_ITERS, error=MeasureError)
    check_int(warmup, "--warmup", minimum=0, maximum=MAX_ITERS, error=MeasureError)
    step = None
    if hf_step is not None:
        from tierwise.measure.hf_step import HFStep

        for value, what, top in ((hf_layers, "--hf-layers", MAX_LAYERS), (hf_seq, "--hf-seq", MAX_SEQ),
                                 (hf_batch, "--hf-batch", MAX_BATCH), (hf_steps, "--hf-steps", MAX_ITERS)):
            if value is not None:
                check_int(value, what, maximum=top, error=MeasureError)
        step = HFStep(model=hf_step, layers=hf_layers, seq=hf_seq, batch=hf_batch, attention=hf_attention.lower(),
                      steps=hf_steps, warmup=warmup)
    if out is not None:
        from tierwise.atomic import check_writable

        check_writable(out, "--out")
    bench = ComputeBench(device="cpu" if cpu else "cuda", small=cpu, iters=iters, warmup=warmup,
                         backends=tuple(backend_name(b) for b in backend) or None)
    result = _measure_compute(bench, cluster, strict, step, out)
    for line in result.warnings if as_json else ():  # the table shows them; with --json, on stderr
        print(f"warning: {line}", file=sys.stderr)
    emit(result.as_dict(), as_json, _render_compute(result, out), document="measure-compute")


def _measure_compute(bench, cluster: str | None, strict: bool, step, out: str | None):
    """Check, measure the kernels (then the --hf-step step), write --out; Ctrl-C keeps what was measured."""
    from tierwise.cli._progress import progress
    from tierwise.measure.calibrate import write_yaml
    from tierwise.measure.compute import finish_profile, profile_target, run_compute

    target = profile_target(bench, cluster, strict=strict)
    hf = None
    if step is not None:  # every refusal (transformers, the model, its memory) before anything runs
        from tierwise.measure.hf_step import prepare_hf_step

        hf = prepare_hf_step(step, target.keys, target.label, bench.device)
    rows: list[dict] = []

    def finish(interrupted: bool):
        return finish_profile(bench, target, rows, interrupted=interrupted, hf=hf)

    try:
        with progress(f"measuring kernels on {target.info['device']}") as bar:
            run_compute(bench, rows, on_row=lambda r: bar.describe(f"measured {r['kernel']} {r['shape']}"))
            if hf is not None:
                from tierwise.measure.hf_step import run_hf_step

                bar.describe(f"timing a training step of {hf.spec.name} in transformers")
                run_hf_step(hf, bench.device)
    except KeyboardInterrupt:
        if out and rows:
            write_yaml(finish(True).document, out)
        from tierwise.cli._interrupt import Interrupted

        steps = f" and {len(hf.samples)} timed --hf-step steps" if hf is not None and hf.samples else ""
        raise Interrupted(f"the {len(rows)} kernels measured{steps} are in {out}" if out and rows else None) from None
    result = finish(False)
    if out:
        write_yaml(result.document, out)
    return result


def _render_calibrated(result, out: str):
    """The terminal rendering of ``calibrate``: what was written, each tier's fit and regimes, notes, skipped
    inputs and the other ops predicted from the fit."""

    def render(console) -> None:
        console.print(f"wrote {out} ({result.document['name']})")
        for line in result.device:
            console.print(f"  {line}")
        for tier, fit in result.document.get("fitted", {}).items():
            console.print(f"  {tier}: {fit['op']} on {fit['num_ranks']} ranks ({fit['ranks_per_domain']} per "
                          f"domain); residuals median {fit['residuals']['median_abs_pct']}%, "
                          f"max {fit['residuals']['max_abs_pct']}%")
            for r in fit["regimes"]:
                bw = "latency only" if r["busbw_bytes_per_s"] is None else f"{r['busbw_bytes_per_s'] / 1e9:.3g} GB/s"
                hi = "inf" if r["max_bytes"] is None else r["max_bytes"]
                console.print(f"    {r['name']:>6}: {r['min_bytes']}..{hi} B  "
                              f"latency {r['latency_s'] * 1e6:.3g} us  busbw {bw}")
                if fit.get("model") == "host-copy":
                    per_byte = r["copy_s_per_byte"]
                    rate = f"{1 / per_byte / 1e9:.3g} GB/s of copy work" if per_byte else "no copy cost"
                    memory = r.get("memory_s_per_byte")
                    if memory:
                        rate += f", copies outside the algorithm at {1 / memory / 1e9:.3g} GB/s (measured)"
                    console.print(f"            host-copy: {r['step_latency_s'] * 1e6:.3g} us per step, {rate}")
        for line in (*result.notes, *([result.base_note] if result.base_note else [])):
            console.print(f"  note: {line}")
        for line in result.skipped:
            console.print(f"  skipped {line}")
        if result.comparisons:
            console.print("  other ops predicted from the fit (reported, not fitted):")
            console.print(f"    {'tier':<9} {'op':<15} {'size (B)':>10} {'measured':>11} {'predicted':>11} {'error':>7}")
            for c in result.comparisons:
                note = "  (emulated by torch)" if c["emulated"] else ""
                console.print(f"    {c['tier']:<9} {c['op']:<15} {int(c['size_bytes']):>10} "
                              f"{c['measured_s'] * 1e3:>8.3f} ms {c['predicted_s'] * 1e3:>8.3f} ms "
                              f"{c['error_pct']:>+6.0f}%{note}")

    return render


def calibrate_command(
    inputs: list[Path] = typer.Argument(..., help="nccl-tests logs and/or tierwise result JSON files (collective "
                                                 "sweeps; measure gemm/hbm --json with --cluster)"),
    out: str = typer.Option(..., "--out", help="calibrated cluster YAML to write"),
    cluster: str | None = typer.Option(None, "--cluster", help="catalog cluster name or file this calibrates"),
    select: str | None = typer.Option(None, "--select", help="keep only sweeps whose label contains this"),
    op: str | None = typer.Option(None, "--op", help="collective of logs that do not say"),
    ranks: int | None = typer.Option(None, "--ranks", help="rank count of logs that do not say"),
    ranks_per_domain: int | None = typer.Option(None, "--ranks-per-domain",
                                                help="ranks per scale-up domain, if the log does not show hosts"),
    as_json: bool = typer.Option(False, "--json", help="print the calibrated document as JSON"),
) -> None:
    """Fit latency and bandwidth per size regime from measurements; write a cluster YAML."""
    from tierwise.atomic import check_writable
    from tierwise.files import path_exists
    from tierwise.limits import MAX_GPUS, check_int
    from tierwise.measure.calibrate import calibrate, write_yaml

    if ranks is not None:
        check_int(ranks, "--ranks", minimum=2, maximum=MAX_GPUS, error=MeasureError)
    if ranks_per_domain is not None:
        check_int(ranks_per_domain, "--ranks-per-domain", maximum=MAX_GPUS, error=MeasureError)

    check_writable(out, "--out")
    for given in inputs:  # path_exists: a name too long for the file system is simply not there
        if path_exists(given) and path_exists(out) and given.resolve() == Path(out).resolve():
            raise MeasureError(f"--out {out!r} is also an input; write the calibrated cluster to another file")
    result = calibrate([str(p) for p in inputs], cluster=cluster, select=select, op=op, num_ranks=ranks,
                       ranks_per_domain=ranks_per_domain)
    write_yaml(result.document, out)

    emit(result.document, as_json, _render_calibrated(result, out), document="calibrate")


def register(app: typer.Typer) -> None:
    """Add ``measure`` (sub-app) and ``calibrate`` to the main app."""
    app.add_typer(measure_app, name="measure")
    app.command("calibrate")(calibrate_command)
