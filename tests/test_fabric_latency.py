"""IB vs RoCE scale-out latency (issue 34): IB keeps NCCL's calibrated 2.7 us, RoCE adds its per-switch extra
by the switches a group's step crosses."""

import numpy as np
import pytest

from tierwise.collectives.model import collective_cost
from tierwise.hierarchy import group_span, tiers
from tierwise.specs.cluster import cluster_from_mapping, load_cluster, switches_crossed, with_fabric_latency

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
