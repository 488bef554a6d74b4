"""The shared-host (host-copy) model: work counts and steps (pure functions), the fit, and the dispatch
between it and the bus-factor rule (a gloo loopback tier against an NCCL tier)."""

import json
import math

import numpy as np
import pytest
import yaml

from tierwise.errors import MeasureError, SpecError
from tierwise.measure.calibrate import calibrate
from tierwise.measure.fit import Regime, predict_tier, predict_time
from tierwise.measure.hostcopy import (
    copy_work_bytes,
    fit_host_copy,
    host_copy_time,
    latency_steps,
    outside_copy_bytes,
    ring_work_bytes,
)

MiB = 2**20


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_work_counts_follow_the_derivation(n):
    f = (n - 1) / n
    s = 64.0 * MiB
    assert copy_work_bytes("all-reduce", s, n) == pytest.approx(11 * f * s)  # 2 phases x (send + recv) x 2 + 3
    assert copy_work_bytes("all-gather", s, n) == pytest.approx(2 * s / n + 4 * f * s + 2 * s)
    assert copy_work_bytes("broadcast", s, n) == pytest.approx(2 * s * math.ceil(math.log2(n)))  # the root
    assert copy_work_bytes("reduce-scatter", s, n) == pytest.approx(2 * s + 11 * f * s + 2 * s / n)


def test_work_at_two_ranks_and_the_ratios_to_all_reduce():
    work = {op: copy_work_bytes(op, 1.0, 2) for op in ("all-reduce", "all-gather", "broadcast", "reduce-scatter")}
    assert work == {"all-reduce": 5.5, "all-gather": 5.0, "broadcast": 2.0, "reduce-scatter": 8.5}
    assert work["all-gather"] / work["all-reduce"] == pytest.approx(0.909, abs=1e-3)
    assert work["broadcast"] / work["all-reduce"] == pytest.approx(0.364, abs=1e-3)


def test_latency_steps_follow_the_ring_and_the_tree():
    assert [latency_steps("all-reduce", n) for n in (2, 4)] == [2.0, 6.0]  # reduce-scatter + all-gather phases
    assert latency_steps("reduce-scatter", 4) == latency_steps("all-reduce", 4)  # torch runs the all-reduce
    assert [latency_steps("all-gather", n) for n in (2, 4)] == [1.0, 3.0]
    assert [latency_steps("broadcast", n) for n in (2, 4, 5)] == [1.0, 2.0, 3.0]  # binomial tree
    assert list(latency_steps("all-gather", np.array([2, 8]))) == [1.0, 7.0]
    sizes = np.array([MiB, 8 * MiB])
    assert list(copy_work_bytes("broadcast", sizes, 2)) == [2.0 * MiB, 16.0 * MiB]


def test_ops_without_a_count_and_bad_ranks_are_one_line_errors():
    with pytest.raises(MeasureError, match="no host-copy work count for 'all-to-all'"):
        copy_work_bytes("all-to-all", MiB, 2)
    with pytest.raises(MeasureError, match=">= 2 ranks"):
        latency_steps("all-reduce", 1)
    with pytest.raises(MeasureError, match="all-reduce rows only"):
        fit_host_copy([MiB], [1e-3], 2, [(0, None)], op="broadcast")
    with pytest.raises(MeasureError, match="no all-reduce row"):
        fit_host_copy([MiB], [1e-3], 2, [(2 * MiB, None)])


def test_fit_recovers_the_step_latency_and_copy_cost():
    a, c = 30e-6, 1.5e-10
    sizes = np.array([2.0**k for k in range(20, 26)])
    times = host_copy_time("all-reduce", sizes, 2, a, c)
    (p,) = fit_host_copy(sizes, times, 2, [(0, None)])
    assert p.step_latency_s == pytest.approx(a, rel=1e-6) and p.copy_s_per_byte == pytest.approx(c, rel=1e-6)


def _host_copy_regimes():
    return [Regime(name="all", min_bytes=0, max_bytes=None, latency_s=1.2e-4, busbw_bytes_per_s=1.2e9,
                   step_latency_s=30e-6, copy_s_per_byte=1.5e-10)]


def test_predict_time_dispatches_on_the_model():
    regimes = _host_copy_regimes()
    host = predict_time(regimes, "broadcast", 4 * MiB, 2, model="host-copy")
    assert host == pytest.approx(30e-6 * 1 + 1.5e-10 * 2 * 4 * MiB)
    bus = predict_time(regimes, "broadcast", 4 * MiB, 2)  # no model: the bus-factor rule, as before
    assert bus == pytest.approx(1.2e-4 + 4 * MiB * 1.0 / 1.2e9)
    with pytest.raises(MeasureError, match="unknown fitted model"):
        predict_time(regimes, "broadcast", MiB, 2, model="magic")
    bare = [Regime(name="all", min_bytes=0, max_bytes=None, latency_s=1e-4, busbw_bytes_per_s=1e9)]
    with pytest.raises(MeasureError, match="lacks step_latency_s"):
        predict_time(bare, "broadcast", MiB, 2, model="host-copy")


def _gloo_rows(a=30e-6, c=1.5e-10, m=None):
    rows = []
    for op in ("all-reduce", "all-gather", "broadcast", "reduce-scatter"):
        for k in range(18, 25):
            size = 2.0**k
            row = {"op": op, "num_ranks": 2, "backend": "gloo", "ranks_per_node": 2, "size_bytes": size,
                   "time_s": float(host_copy_time(op, size, 2, a, c, m))}
            if m is not None:
                row["host_memory_s_per_byte"] = m
            if op == "reduce-scatter":
                row["note"] = "gloo has no reduce-scatter; torch emulates it; reported, not fitted"
            rows.append(row)
    return rows


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_work_and_outside_copies_split_the_work(n):
    f, s = (n - 1) / n, 64.0 * MiB
    for op in ("all-reduce", "all-gather", "broadcast", "reduce-scatter"):
        assert ring_work_bytes(op, s, n) + outside_copy_bytes(op, s, n) == pytest.approx(copy_work_bytes(op, s, n))
    assert outside_copy_bytes("all-reduce", s, n) == 0.0 and outside_copy_bytes("broadcast", s, n) == 0.0
    assert ring_work_bytes("all-gather", s, n) == pytest.approx(4 * f * s)  # send and receive copies
    assert outside_copy_bytes("all-gather", s, n) == pytest.approx(2 * s / n + 2 * s)  # own block, unflatten
    assert outside_copy_bytes("reduce-scatter", s, n) == pytest.approx(2 * s + 2 * s / n)  # clone, own chunk


def test_outside_copies_cost_the_measured_memory_rate():
    a, c, m, s = 30e-6, 1.5e-10, 2e-11, 8.0 * MiB
    for op in ("all-reduce", "broadcast"):  # no copy outside the algorithm: the rate changes nothing
        assert host_copy_time(op, s, 2, a, c, m) == pytest.approx(host_copy_time(op, s, 2, a, c))
    gather = host_copy_time("all-gather", s, 2, a, c, m)
    assert gather == pytest.approx(a + c * 2 * s + m * 3 * s)
    assert gather < host_copy_time("all-gather", s, 2, a, c)  # without the rate: every byte at c
    regimes = [Regime(name="all", min_bytes=0, max_bytes=None, latency_s=1e-4, busbw_bytes_per_s=1e9,
                      step_latency_s=a, copy_s_per_byte=c, memory_s_per_byte=m)]
    assert predict_time(regimes, "all-gather", s, 2, model="host-copy") == pytest.approx(gather)
    assert regimes[0].as_dict()["memory_s_per_byte"] == m


def test_calibration_carries_the_measured_memory_rate_and_notes_its_absence(tmp_path):
    m = 4.9e-11
    path = tmp_path / "probed.json"
    path.write_text(json.dumps(_gloo_rows(m=m)))
    result = calibrate([str(path)])
    tier = result.document["fitted"]["scale_up"]
    assert all(r["memory_s_per_byte"] == m for r in tier["regimes"]) and result.notes == ()
    # synthetic rows from the model itself: every op, the all-gather's outside copies included, comes back exact
    assert all(abs(c["error_pct"]) < 1.0 for c in result.comparisons)
    assert predict_tier(tier, "all-gather", 4 * MiB) == pytest.approx(
        host_copy_time("all-gather", 4 * MiB, 2, 30e-6, 1.5e-10, m), rel=1e-3)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_gloo_rows()))
    result = calibrate([str(old)])
    assert all("memory_s_per_byte" not in r for r in result.document["fitted"]["scale_up"]["regimes"])
    (note,) = result.notes
    assert "no host_memory_s_per_byte" in note and "Measure again" in note


def test_a_bad_memory_rate_in_a_result_is_one_line_error(tmp_path):
    rows = _gloo_rows(m=-1.0)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(MeasureError, match=r"row 0 is not a tierwise result row \(host_memory_s_per_byte=-1.0"):
        calibrate([str(path)])


def test_calibrating_a_gloo_loopback_sweep_writes_a_host_copy_tier(tmp_path):
    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(_gloo_rows()))
    result = calibrate([str(path)])
    tier = result.document["fitted"]["scale_up"]
    assert tier["model"] == "host-copy" and tier["op"] == "all-reduce"
    for r in tier["regimes"]:
        assert {"step_latency_s", "copy_s_per_byte", "latency_s", "busbw_bytes_per_s"} <= set(r)
    # the other ops come back as predicted-vs-measured rows; synthetic data from the model itself: exact
    assert {c["op"] for c in result.comparisons} == {"all-gather", "broadcast", "reduce-scatter"}
    assert all(abs(c["error_pct"]) < 1.0 for c in result.comparisons)
    assert all(c["emulated"] == (c["op"] == "reduce-scatter") for c in result.comparisons)
    assert predict_tier(tier, "all-gather", 4 * MiB) == pytest.approx(host_copy_time("all-gather", 4 * MiB, 2,
                                                                                     30e-6, 1.5e-10), rel=1e-3)
    # the all-reduce line itself is the plain regime fit: bus-factor readers of the same regimes agree
    ar_bus = predict_time(tier["regimes"], "all-reduce", 4 * MiB, 2)
    assert predict_tier(tier, "all-reduce", 4 * MiB) == pytest.approx(ar_bus, rel=0.02)


def test_a_multi_host_gloo_sweep_and_an_nccl_sweep_keep_the_bus_factor_rule(tmp_path):
    rows = [dict(r, ranks_per_node=1) for r in _gloo_rows() if r["op"] == "all-reduce"]  # 2 hosts
    path = tmp_path / "two_hosts.json"
    path.write_text(json.dumps(rows))
    tier = calibrate([str(path)]).document["fitted"]["scale_out"]
    assert "model" not in tier
    assert set(tier["regimes"][0]) == {"name", "min_bytes", "max_bytes", "latency_s", "busbw_bytes_per_s"}
    nccl = [dict(r, backend="nccl") for r in _gloo_rows() if r["op"] == "all-reduce"]
    path = tmp_path / "nccl.json"
    path.write_text(json.dumps(nccl))
    tier = calibrate([str(path)]).document["fitted"]["scale_up"]
    assert "model" not in tier
    regimes = tier["regimes"]
    assert predict_tier(tier, "broadcast", 4 * MiB) == predict_time(regimes, "broadcast", 4 * MiB, 2)


def _cluster_yaml(tmp_path, tier: dict) -> str:
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump({"base": "dgx-h100", "name": "calibrated", "fitted": {"scale_up": tier}}))
    return str(path)


def test_a_host_copy_tier_loads_and_the_collective_model_uses_its_work(tmp_path):
    from tierwise.collectives.model import collective_cost
    from tierwise.hierarchy import group_span
    from tierwise.specs.cluster import load_cluster

    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(_gloo_rows()))
    tier = calibrate([str(path)]).document["fitted"]["scale_up"]
    c = load_cluster(_cluster_yaml(tmp_path, tier))
    assert c.fitted["scale_up"].model == "host-copy"
    for op in ("all-gather", "broadcast", "all-reduce"):
        cost = collective_cost(op, 4 * MiB, group_span(c, 2, 1), c)
        assert cost.algorithm == "fitted"
        assert float(cost.time_s) == pytest.approx(predict_tier(tier, op, 4 * MiB), rel=1e-6)
    # without the key the same regimes predict broadcast with the bus factor (the file as before)
    plain = {k: v for k, v in tier.items() if k != "model"}
    plain["regimes"] = [{k: v for k, v in r.items() if k not in ("step_latency_s", "copy_s_per_byte")}
                        for r in tier["regimes"]]
    c = load_cluster(_cluster_yaml(tmp_path, plain))
    cost = collective_cost("broadcast", 4 * MiB, group_span(c, 2, 1), c)
    assert float(cost.time_s) == pytest.approx(predict_time(plain["regimes"], "broadcast", 4 * MiB, 2), rel=1e-6)
    # with the measured memory rate the all-gather's outside copies are priced at it, everywhere
    path.write_text(json.dumps(_gloo_rows(m=2e-11)))
    tier = calibrate([str(path)]).document["fitted"]["scale_up"]
    c = load_cluster(_cluster_yaml(tmp_path, tier))
    assert c.fitted["scale_up"].regimes[0].memory_s_per_byte == 2e-11
    cost = collective_cost("all-gather", 4 * MiB, group_span(c, 2, 1), c)
    assert float(cost.time_s) == pytest.approx(host_copy_time("all-gather", 4 * MiB, 2, 30e-6, 1.5e-10, 2e-11),
                                               rel=1e-3)
    tier["regimes"][0]["memory_s_per_byte"] = -1
    with pytest.raises(SpecError, match="memory_s_per_byte"):
        load_cluster(_cluster_yaml(tmp_path, tier))


def test_a_host_copy_tier_without_its_parameters_is_a_spec_error(tmp_path):
    from tierwise.specs.cluster import load_cluster

    tier = {"num_ranks": 2, "op": "all-reduce", "model": "host-copy",
            "regimes": [{"name": "all", "min_bytes": 0, "max_bytes": None, "latency_s": 1e-4,
                         "busbw_bytes_per_s": 1e9}]}
    with pytest.raises(SpecError, match="copy_s_per_byte|step_latency_s"):
        load_cluster(_cluster_yaml(tmp_path, tier))
    tier["model"] = "warp-drive"
    with pytest.raises(SpecError, match="unknown model 'warp-drive'"):
        load_cluster(_cluster_yaml(tmp_path, tier))
