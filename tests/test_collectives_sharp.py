"""InfiniBand SHARP (NCCL CollNet) as an all-reduce algorithm: off unless the cluster has it, half a ring's
NIC bytes, NCCL's latency terms, and its limits (issue 34)."""

import numpy as np
import pytest

from tierwise.collectives.model import collective_cost
from tierwise.errors import SpecError
from tierwise.hierarchy import group_span
from tierwise.specs.cluster import cluster_from_mapping, load_cluster, with_fabric_latency, with_sharp
from tierwise.specs.parameters import load_parameters
from tierwise.topology.choose import SWITCHES

H100 = load_cluster("dgx-h100")
SHARP = with_sharp(H100)


def _cost(n, size, cluster=SHARP, algorithm="auto", kind="all-reduce"):
    return collective_cost(kind, size, group_span(cluster, n, 1), cluster, algorithm)


def _busbw(cost, n, size):
    return size / float(cost.time_s) * 2 * (n - 1) / n


def test_sharp_is_off_by_default_and_on_with_the_cluster_file():
    assert not H100.scale_out_reduction
    assert str(_cost(32, 8e9, H100).algorithm) != "sharp"
    from_file = cluster_from_mapping({"base": "dgx-h100", "fabric": {"sharp": True}}, origin="test")
    assert from_file.scale_out_reduction
    assert str(_cost(32, 8e9, from_file).algorithm) == "sharp"


def test_sharp_halves_the_nic_bytes_of_a_ring():
    n, size = 64, 1e9
    sharp = _cost(n, size, algorithm="sharp")
    ring = _cost(n, size, algorithm="ring")
    # each rank sends S/nl into the switch tree; a ring sends 2 (n-1)/n x S/nl over the NICs
    assert float(sharp.scale_out_bytes) == pytest.approx(size / 8)
    assert float(ring.scale_out_bytes) / float(sharp.scale_out_bytes) == pytest.approx(2 * (n - 1) / n)


def test_sharp_bus_bandwidth_gain_on_the_network_leg():
    # without NVLink SHARP the intra leg (direct RS + AG over NVLink) is not the bottleneck at 1 rank per node:
    # one GPU per node, the whole gain is the network's, ~2x a ring's bus bandwidth less NCCL's CollNet factor
    one = cluster_from_mapping({"base": "dgx-h100", "gpus_per_node": 1, "scale_up_domain": 1, "nics_per_node": 1,
                                "in_network_reduction": False, "fabric": {"sharp": True}}, origin="test")
    n, size = 64, 16e9
    gain = _busbw(_cost(n, size, one, "sharp"), n, size) / _busbw(_cost(n, size, one, "ring"), n, size)
    eff = load_parameters().collectives["collnet_efficiency"]
    assert gain == pytest.approx(2 * (n - 1) / n * eff, rel=0.05)
    assert gain > 1.5


def test_sharp_busbw_near_nvidias_figure_and_flat_with_scale():
    # NVIDIA GTC24 (collectives-notes 3.3): "SHARP 8x 400Gb RDMA (DGX H100)" all-reduce busbw 480 GB/s vs 370-380
    # without; the model is NVLS-bound (NVLink SHARP inside a node) and reads ~10% above it at 8 GB
    bw = {n: _busbw(_cost(n, 8e9), n, 8e9) / 1e9 for n in (32, 1024, 8192)}
    assert 480 * 0.95 < bw[32] < 480 * 1.15
    # one pass through the tree, no log or linear term: the time (algbw) is the same at 32 and 8,192 GPUs
    assert float(_cost(8192, 8e9).time_s) == pytest.approx(float(_cost(32, 8e9).time_s), rel=1e-3)
    plain = _busbw(_cost(1024, 8e9, H100), 1024, 8e9) / 1e9
    assert bw[1024] > 1.3 * plain


def test_sharp_latency_terms_follow_nccl():
    p = load_parameters().collectives
    # NVLS + SHARP: launch + NVLS (25 us) + SHARP NET (18 us) + one chunk per stage, at any node count
    t0 = float(_cost(32, 0.0, algorithm="sharp").time_s)
    fixed = p["launch_overhead"] + p["nvls_latency"] + p["sharp_nvls_net_latency"]
    assert fixed < t0 < fixed + 150e-6
    assert float(_cost(8192, 0.0, algorithm="sharp").time_s) == pytest.approx(t0)
    # CollNetDirect (no NVLink SHARP): 2 (min(1, ppn-1) 3.7 + 0.4 (ppn-1)) + 31 us
    direct = cluster_from_mapping({"base": "dgx-a100", "fabric": {"sharp": True}}, origin="test")
    ta = float(collective_cost("all-reduce", 0.0, group_span(direct, 32, 1), direct, "sharp").time_s)
    lat = 2 * (p["collnet_intra_latency"] + 7 * p["collnet_per_rank_latency"]) + p["collnet_net_latency"]
    assert p["launch_overhead"] + lat < ta < p["launch_overhead"] + lat + 150e-6


def test_small_buffers_keep_the_tree_and_large_ones_take_sharp():
    sizes = np.array([8.0, 1e5, 1e6, 1e9, 8e9])
    cost = collective_cost("all-reduce", sizes, group_span(SHARP, 256, 1), SHARP)
    names = list(np.asarray(cost.algorithm))
    assert names[0] != "sharp" and names[1] != "sharp"  # 31-43 us of SHARP latency loses to LL trees
    assert names[-1] == "sharp" and names[-2] == "sharp"


def test_sharp_limits_refused_with_a_reason():
    with pytest.raises(SpecError, match="sharp needs"):
        _cost(8, 1e9, algorithm="sharp")  # one node: no network step (NCCL_COLLNET_NODE_THRESHOLD = 2)
    with pytest.raises(SpecError, match="sharp needs"):
        _cost(32, 1e9, H100, algorithm="sharp")  # the fabric does not run SHARP
    with pytest.raises(SpecError, match="does not exist for all-gather"):
        _cost(32, 1e9, algorithm="sharp", kind="all-gather")
    with pytest.raises(SpecError, match="SHARP runs only in InfiniBand"):
        with_sharp(load_cluster("hgx-h100-roce"))
    with pytest.raises(SpecError, match="SHARP runs only in InfiniBand"):
        cluster_from_mapping({"base": "dgx-h100", "fabric": {"fabric": "roce", "sharp": True}}, origin="test")
    with pytest.raises(SpecError, match="true or false"):
        cluster_from_mapping({"base": "dgx-h100", "fabric": {"sharp": "yes"}}, origin="test")


def test_an_ethernet_design_drops_sharp_and_the_switch_catalog_names_it():
    assert not with_fabric_latency(SHARP, "roce").scale_out_reduction
    assert with_fabric_latency(SHARP, "ib").scale_out_reduction
    by_fabric = {sw.fabric: sw.in_network_reduction for sw in SWITCHES if sw.in_network_reduction}
    assert set(by_fabric) == {"ib"}
    assert all("SHARP" in sw.source for sw in SWITCHES if sw.in_network_reduction)


def test_collective_command_says_why_sharp_was_or_was_not_used():
    from tierwise.netsim.collective_report import collective_report

    big = collective_report("all-reduce", "8GB", 32, None, "auto", "dgx-h100", None, sharp=True)
    small = collective_report("all-reduce", "8B", 32, None, "auto", "dgx-h100", None, sharp=True)
    assert big["algorithm"] == "sharp" and any("half a ring" in n for n in big["notes"])
    assert small["algorithm"] != "sharp" and any("SHARP not used" in n for n in small["notes"])
