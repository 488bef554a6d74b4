"""Invariants of the collective model across every algorithm, and the seeds' arithmetic."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.collectives import alpha_beta
from tierwise.collectives.model import algorithms_for, collective_cost
from tierwise.collectives.volumes import KINDS, bytes_per_rank
from tierwise.errors import SpecError
from tierwise.hierarchy import group_span
from tierwise.specs.cluster import cluster_from_mapping, load_cluster

H100 = load_cluster("dgx-h100")


def _cost(kind, size, n, cluster=H100, algorithm="auto", stride=1):
    return collective_cost(kind, size, group_span(cluster, n, stride), cluster, algorithm)


def test_seeds_arithmetic_bytes_per_rank():
    # 16 GB of gradients (8B params, BF16) over 1,024 ranks: ~32 GB per rank
    assert float(bytes_per_rank("all-reduce", 16e9, 1024)) == pytest.approx(32e9, rel=0.01)
    # 70B params in FP16 over 1,000 ranks: ~280 GB per rank; in 100 ms that needs ~2.8 TB/s
    per_rank = float(bytes_per_rank("all-reduce", 140e9, 1000))
    assert per_rank == pytest.approx(280e9, rel=0.01)
    assert per_rank / 0.1 == pytest.approx(2.8e12, rel=0.01)
    # per-rank traffic tends to 2M as N grows
    assert float(bytes_per_rank("all-reduce", 1.0, 10**6)) == pytest.approx(2.0, rel=1e-5)


def test_seeds_datasheet_times_and_the_modelled_ones():
    from tierwise.netsim.collective_report import collective_report

    nv = collective_report("all-reduce", "16GB", 1024, None, "auto", "dgx-h100", "900GB/s")
    nic = collective_report("all-reduce", "16GB", 1024, None, "auto", "dgx-h100", "50GB/s")
    assert nv["datasheet_time_s"] == pytest.approx(0.036, rel=0.02)
    assert nic["datasheet_time_s"] == pytest.approx(0.64, rel=0.01)
    assert nic["datasheet_time_s"] / nv["datasheet_time_s"] == pytest.approx(18)
    # a full node's gradient all-reduce uses all 8 NICs: the 640 ms models nearer 80-160 ms
    assert 0.08 <= nic["cluster_time_s"] <= 0.16
    assert any("8 x the NIC rate" in note for note in nic["notes"])
    assert any("both directions" in note for note in nv["notes"])


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "send-recv"])
def test_degree_one_means_no_traffic(kind):
    cost = _cost(kind, 1e9, 1)
    assert float(cost.time_s) == 0
    assert float(cost.bytes_per_rank) == 0


def test_all_reduce_bytes_equal_reduce_scatter_plus_all_gather():
    for n in (2, 8, 64, 1000):
        ar = float(bytes_per_rank("all-reduce", 1e9, n))
        rs = float(bytes_per_rank("reduce-scatter", 1e9, n))
        ag = float(bytes_per_rank("all-gather", 1e9, n))
        assert ar == pytest.approx(rs + ag)


clusters = st.sampled_from(["dgx-h100", "dgx-a100", "gb200-nvl72", "mi300x-8", "dgx-b200"])


@settings(max_examples=60, deadline=None)
@given(cluster=clusters, kind=st.sampled_from(["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"]),
       n=st.integers(2, 4096), size=st.floats(1e3, 1e11), drop=st.floats(0.1, 0.95))
def test_time_never_decreases_when_bandwidth_drops(cluster, kind, n, size, drop):
    base = load_cluster(cluster)
    slower = cluster_from_mapping({"base": cluster, "nic_bandwidth": base.nic_bytes_per_s * drop,
                                   "scale_up_bandwidth": base.scale_up_bytes_per_s * drop})
    assert float(_cost(kind, size, n, slower).time_s) >= float(_cost(kind, size, n, base).time_s) * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(cluster=clusters, n=st.integers(2, 2048), size=st.floats(1e3, 1e11))
def test_every_algorithm_respects_its_wire_bytes(cluster, n, size):
    """A collective's time is at least its wire bytes over the line rate of the links it uses."""
    c = load_cluster(cluster)
    span = group_span(c, n, 1)
    for algo in algorithms_for("all-reduce"):
        try:
            cost = collective_cost("all-reduce", size, span, c, algo)
        except SpecError:
            continue  # the algorithm does not apply to this group
        up_rate = c.scale_up_bytes_per_s
        out_rate = c.scale_out_bytes_per_s
        t = float(cost.time_s)
        assert t >= float(cost.scale_up_bytes) / up_rate * (1 - 1e-9), algo
        assert t >= float(cost.scale_out_bytes) / out_rate * (1 - 1e-9), algo


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 512), nl=st.sampled_from([1, 2, 4, 8]), size=st.floats(1e3, 1e11),
       b_in=st.floats(1e9, 1e12), b_out=st.floats(1e9, 1e11))
def test_ring_time_at_least_wire_bytes_over_slowest_link(n, nl, size, b_in, b_out):
    nl = min(nl, n)
    n = n - n % nl
    t = float(alpha_beta.ring_time("all-reduce", size, n, nl, b_in, b_out, 0.0, 0.0))
    wire = 2 * (n - 1) / n * size
    slowest = min(b_in if nl > 1 else np.inf, nl * b_out if n > nl else np.inf)
    assert t >= wire / slowest * (1 - 1e-9)


def test_auto_is_never_slower_than_any_algorithm():
    for n in (8, 16, 64, 1024):
        for size in (1e4, 1e6, 1e8, 1e10):
            auto = float(_cost("all-reduce", size, n).time_s)
            for algo in algorithms_for("all-reduce"):
                try:
                    forced = float(_cost("all-reduce", size, n, algorithm=algo).time_s)
                except SpecError:
                    continue
                assert auto <= forced * (1 + 1e-12)


def test_two_node_tree_busbw_can_exceed_node_nic_total():
    """Two domains: each node sends S through its NICs where a ring sends 2(n-1)/n S, so busbw (which counts
    the ring's volume) exceeds the NIC total whenever the NICs, not NVLink, are the tree's bottleneck."""
    size = 8 * 2**30
    two_nics = cluster_from_mapping({"base": "dgx-h100", "nics_per_node": 2})
    for cluster, algo in ((two_nics, "tree"), (H100, "nvls")):
        cost = _cost("all-reduce", size, 16, cluster, algorithm=algo)
        busbw = size / float(cost.time_s) * 2 * 15 / 16
        assert busbw > cluster.nics_per_node * cluster.nic_bytes_per_s, algo
    ring = _cost("all-reduce", size, 16, two_nics, algorithm="ring")
    assert size / float(ring.time_s) * 2 * 15 / 16 < two_nics.nics_per_node * two_nics.nic_bytes_per_s


def test_multichannel_ring_uses_every_nic():
    """32 ranks on 4 nodes: a ring's busbw is near 8 NICs, not one."""
    cost = _cost("all-reduce", 8 * 2**30, 32, algorithm="ring")
    busbw = 8 * 2**30 / float(cost.time_s) * 2 * 31 / 32
    assert 6 * H100.nic_bytes_per_s < busbw < 8 * H100.nic_bytes_per_s


def test_mesh_point_to_point_reaches_one_link_and_rings_use_most():
    mi = load_cluster("mi300x-8")
    p2p = float(_cost("send-recv", 1e9, 2, mi).time_s)
    ring8 = _cost("all-reduce", 8e9, 8, mi, algorithm="ring")
    assert 1e9 / p2p < mi.scale_up_p2p_bytes_per_s  # one 64 GB/s link
    busbw8 = 8e9 / float(ring8.time_s) * 2 * 7 / 8
    assert busbw8 > 4 * mi.scale_up_p2p_bytes_per_s  # 7 edge-disjoint cycles, most of the 448 GB/s
    busbw2 = 1e9 / float(_cost("all-reduce", 1e9, 2, mi, algorithm="ring").time_s)
    assert busbw2 < mi.scale_up_p2p_bytes_per_s


def test_unknown_algorithm_is_a_clear_error():
    with pytest.raises(SpecError, match="nvls"):
        _cost("all-gather", 1e6, 8, algorithm="nvls")


def test_algorithm_names_are_reported():
    cost = _cost("all-reduce", 8e9, 8)
    assert cost.algorithm == "nvls"


# Published reference bus bandwidths (large messages), collectives-notes.md sections 3.1-3.5 and
# hardware-notes.md section 1: (cluster, kind, ranks, algorithm, GB/s, source)
REFERENCES = [
    ("dgx-h100", "all-reduce", 8, "ring", 370, "sjeaugey nccl-tests #212; NVIDIA GTC24 NVLink4"),
    ("dgx-h100", "all-reduce", 8, "auto", 480, "NVIDIA GTC24 NVLink4 SHARP"),
    ("dgx-a100", "all-reduce", 8, "auto", 232, "NVIDIA GTC24 NVLink3"),
    ("dgx-b200", "all-reduce", 8, "ring", 700, "NVIDIA GTC25 NVLink5"),
    ("dgx-b200", "all-reduce", 8, "auto", 850, "NVIDIA GTC25 NVLink5 SHARP"),
    ("gb200-nvl72", "all-reduce", 32, "ring", 680, "NVIDIA GTC25 GB200 NVL72 NVLink"),
    ("dgx-h100", "all-reduce", 32, "ring", 370, "NVIDIA GTC25 NVL4 + 8x400Gb RDMA, 32 GPUs"),
    ("dgx-a100", "all-reduce", 32, "ring", 192, "NVIDIA GTC24 NVL3 + 8x200Gb RDMA"),
    ("dgx-h100", "all-to-all", 8, "auto", 320, "NVIDIA GTC25 all-to-all NVLink4"),
    ("dgx-a100", "all-to-all", 8, "auto", 210, "NVIDIA GTC25 all-to-all NVLink3"),
    ("dgx-b200", "all-to-all", 8, "auto", 640, "NVIDIA GTC25 all-to-all NVLink5"),
    ("dgx-h100", "all-to-all", 32, "auto", 48, "NVIDIA GTC25 all-to-all 8x400Gb RDMA, 32 GPUs"),
    ("dgx-a100", "all-to-all", 32, "auto", 24, "NVIDIA GTC25 all-to-all 8x200Gb RDMA, 32 GPUs"),
    ("mi300x-8", "all-reduce", 8, "ring", 312.9, "hardware-notes S2: measured 8 x MI300X"),
    ("mi300x-8", "all-reduce", 2, "ring", 47.7, "hardware-notes S2: measured 2 x MI300X"),
]


@pytest.mark.parametrize(("cluster", "kind", "ranks", "algo", "gbps", "source"), REFERENCES)
def test_published_large_message_busbw_within_15_percent(cluster, kind, ranks, algo, gbps, source):
    c = load_cluster(cluster)
    size = 16 * 2**30
    cost = _cost(kind, size, ranks, c, algorithm=algo)
    busbw = size / float(cost.time_s) * float(np.asarray(bytes_per_rank(kind, 1.0, ranks)))
    assert busbw / 1e9 == pytest.approx(gbps, rel=0.15), source
