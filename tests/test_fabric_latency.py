"""IB vs RoCE scale-out latency and node vs rack scale-up latency (issue 34): IB keeps NCCL's calibrated 2.7 us, RoCE adds its per-switch extra
by the switches a group's step crosses."""

from dataclasses import replace

import numpy as np
import pytest

from tierwise.collectives.model import collective_cost
from tierwise.hierarchy import group_span, tiers
from tierwise.specs.cluster import (
    cluster_from_mapping,
    load_cluster,
    switches_crossed,
    with_fabric_latency,
    with_scale_up_domain,
)
from tierwise.specs.parameters import load_parameters

IB, ROCE = load_cluster("dgx-h100"), load_cluster("hgx-h100-roce")


def _tier(cluster, name):
    return next(t for t in tiers(cluster) if t.name == name)


def test_tiers_ib_stays_at_nccls_constant_and_roce_adds_its_switches():
    assert _tier(IB, "scale_out").latency_s == pytest.approx(2.7e-6)
    # leaf-spine-leaf: 2.7 us + 3 x 370 ns (Spectrum-4 ~500 vs Quantum-2 ~130 ns a hop)
    assert _tier(ROCE, "scale_out").latency_s == pytest.approx(3.81e-6)
    assert "RoCE" in _tier(ROCE, "scale_out").note
    assert _tier(ROCE, "scale_up").latency_s == _tier(IB, "scale_up").latency_s


def test_switches_crossed_by_span():
    assert switches_crossed(np.array([2, 32, 33, 2048, 2049]), 64).tolist() == [1, 1, 3, 3, 5]
    assert ROCE.scale_out_latency_at(4) == pytest.approx(3.07e-6)
    assert ROCE.scale_out_latency_at(4096) == pytest.approx(4.55e-6)
    assert IB.scale_out_latency_at(4096) == pytest.approx(2.7e-6)


def test_small_all_reduce_is_slower_on_roce_and_grows_with_the_span():
    def t(c, n):
        return float(collective_cost("all-reduce", 8192, group_span(c, n, 1), c).time_s)

    assert t(ROCE, 16) > t(IB, 16)  # 2 nodes in one leaf: +370 ns a step
    gap_leaf, gap_tiers = t(ROCE, 256) - t(IB, 256), t(ROCE, 32768) - t(IB, 32768)
    assert 0 < gap_leaf < gap_tiers
    # bandwidth-bound: the latency is noise
    big = [float(collective_cost("all-reduce", 8e9, group_span(c, 256, 1), c).time_s) for c in (IB, ROCE)]
    assert big[1] == pytest.approx(big[0], rel=1e-3)


def test_a_stated_latency_wins_over_the_roce_extra():
    spec = {"name": "my-roce", "accelerator": "h100-sxm", "gpus_per_node": 8, "scale_up_domain": 8,
            "nics_per_node": 8, "nic_bandwidth": "400 Gb/s", "fabric": {"fabric": "roce"}}
    assert cluster_from_mapping(spec).scale_out_latency_at(4096) == pytest.approx(4.55e-6)
    c = cluster_from_mapping({**spec, "scale_out_latency": "5 us"})
    assert c.scale_out_extra_per_switch_s == 0.0
    assert c.scale_out_latency_at(4096) == pytest.approx(5e-6)


def test_a_design_on_roce_gets_the_roce_step_and_ib_drops_it():
    assert with_fabric_latency(IB, "roce").scale_out_latency_at(4096) == pytest.approx(4.55e-6)
    assert with_fabric_latency(ROCE, "ib").scale_out_latency_at(4096) == pytest.approx(2.7e-6)
    assert with_fabric_latency(IB, "ib") is IB


# --- node vs rack: the scale-up tier's hardware path (parameters.yaml latency.scale_up_*) ---

NODE, RACK = load_cluster("dgx-h100"), load_cluster("gb200-nvl72")


def _lat():
    return load_parameters().latency


def test_tiers_node_keeps_nccls_nvlink_constant_and_a_rack_adds_its_cables():
    lat = _lat()
    assert _tier(NODE, "scale_up").latency_s == pytest.approx(lat["nvlink"])
    rack = _tier(RACK, "scale_up")
    assert rack.latency_s == pytest.approx(lat["nvlink"] + lat["scale_up_rack_cable"])
    assert rack.latency_s > _tier(NODE, "scale_up").latency_s
    assert "across hosts" in rack.note and "across hosts" not in _tier(NODE, "scale_up").note


def test_a_two_tier_domain_crosses_two_switches_more():
    lat = _lat()
    nvl576 = with_scale_up_domain(RACK, 576)
    want = lat["nvlink"] + lat["scale_up_rack_cable"] + 2 * lat["scale_up_per_switch"] + lat["scale_up_spine_cable"]
    assert nvl576.scale_up_latency_s == pytest.approx(want)
    assert nvl576.scale_up_latency_s > RACK.scale_up_latency_s
    # inside one host (a GB200 tray of 4) nothing is added; back down to 72 the rack figure returns
    assert with_scale_up_domain(RACK, 4).scale_up_latency_s == pytest.approx(lat["nvlink"])
    assert with_scale_up_domain(nvl576, 72).scale_up_latency_s == pytest.approx(RACK.scale_up_latency_s)
    # a cluster file that states its latency keeps it (the UALink pod's spec figure)
    pod = load_cluster("ualink-pod-1024")
    assert pod.scale_up_latency_s == pytest.approx(5e-7) and pod.scale_up_extra_latency_s == 0.0


def test_a_small_all_reduce_pays_the_racks_hardware_path_per_step():
    lat = _lat()

    def t(c, n):
        return float(collective_cost("all-reduce", 8192, group_span(c, n, 1), c).time_s)

    as_node = replace(RACK, scale_up_latency_s=lat["nvlink"], scale_up_latency_stated=True)
    # 8 GPUs over two GB200 trays: a ring of 2 x 7 LL steps, each 20 ns of copper longer
    assert t(RACK, 8) - t(as_node, 8) == pytest.approx(14 * lat["scale_up_rack_cable"], rel=1e-6)
    # 72 GPUs take NVLS: NCCL's 25 us constant plus the path once per phase
    assert t(RACK, 72) - t(as_node, 72) == pytest.approx(2 * lat["scale_up_rack_cable"], rel=1e-6)
    assert t(RACK, 72) > t(NODE, 8)
    nvl576 = with_scale_up_domain(RACK, 576)
    gap = t(nvl576, 72) - t(as_node, 72)
    assert gap == pytest.approx(2 * nvl576.scale_up_extra_latency_s, rel=1e-6) and gap > 1e-6
