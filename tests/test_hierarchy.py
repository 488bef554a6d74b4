"""Tiers of catalog clusters and where rank groups land on them."""

import numpy as np
import pytest

from tierwise.hierarchy import group_span, tiers
from tierwise.specs import catalog
from tierwise.specs.cluster import load_cluster


def _tiers(name):
    return {t.name: t for t in tiers(load_cluster(name))}


def test_seed_tier_ratios_for_h100():
    """The seeds' H100 arithmetic: 3,350/900 ~ 3.7x, 900/128 ~ 7x, 900/50 = 18x, 3,350/50 ~ 67x (datasheet)."""
    t = _tiers("dgx-h100")
    assert t["scale_up"].datasheet_ratio_to_hbm == pytest.approx(3350 / 900, rel=1e-3)
    assert t["scale_up"].datasheet_bytes_per_s / t["host"].datasheet_bytes_per_s == pytest.approx(7.1, rel=0.02)
    assert t["scale_up"].datasheet_bytes_per_s / t["scale_out"].datasheet_bytes_per_s == pytest.approx(18)
    assert t["scale_out"].datasheet_ratio_to_hbm == pytest.approx(67)
    # one-way against one-way the NVLink/NIC gap is 9x, not 18x
    assert t["scale_up"].bytes_per_s / t["scale_out"].bytes_per_s == pytest.approx(9)
    assert t["scale_up"].datasheet_direction == "bidirectional"
    assert t["scale_out"].datasheet_direction == "one-way"


@pytest.mark.parametrize("name", catalog.names("clusters"))
def test_every_catalog_cluster_has_ordered_tiers(name):
    rows = tiers(load_cluster(name))
    assert [t.name for t in rows][:2] == ["hbm", "scale_up"]
    bandwidths = [t.bytes_per_s for t in rows if t.name in ("hbm", "scale_up", "scale_out")]
    assert bandwidths == sorted(bandwidths, reverse=True), "each tier is slower than the one above"


def test_nvl72_distinguishes_host_from_scale_up_domain():
    c = load_cluster("gb200-nvl72")
    assert (c.gpus_per_node, c.scale_up_domain) == (4, 72)
    span = group_span(c, [8, 64, 72, 144], 1)
    assert span.tier.tolist() == [1, 1, 1, 3]  # groups across hosts but inside the rack stay on NVLink
    assert span.ranks_per_domain.tolist() == [8, 64, 72, 72]


def test_placement_stride_decides_the_tier():
    c = load_cluster("dgx-h100")
    # tp=8 innermost (stride 1) stays in the node; dp at stride 8 crosses nodes; tp=16 crosses too
    span = group_span(c, np.array([8, 16, 4, 2]), np.array([1, 1, 8, 4]))
    assert span.tier.tolist() == [1, 3, 3, 1]
    assert span.ranks_per_domain.tolist() == [8, 8, 1, 2]


def test_group_of_one_is_local():
    span = group_span(load_cluster("dgx-a100"), 1, 1)
    assert int(span.tier) == 0


def test_oversubscribed_levels_reduce_bandwidth():
    from tierwise.specs.cluster import cluster_from_mapping

    c = cluster_from_mapping({"base": "dgx-h100", "scale_out_levels": [{"name": "pod", "domain_size": 256,
                                                                          "oversubscription": 7}]})
    span = group_span(c, [32, 1024], 8)
    assert span.oversubscription.tolist() == [1.0, 7.0]
    assert [t.name for t in tiers(c)][-1] == "scale_out_2"


# --- placement by hop (issue 13) -------------------------------------------------------------------------

from tierwise.hierarchy import group_hops, hop_classes, pair_span  # noqa: E402
from tierwise.specs.cluster import cluster_from_mapping  # noqa: E402
from tierwise.specs.plan import ORDERS  # noqa: E402

PCIE_SERVER = {"base": "dgx-a100", "name": "pcie-server", "gpus_per_node": 8, "scale_up_domain": 2,
               "host_bandwidth": "32 GB/s"}
"""A PCIe server: 8 GPUs per host, NVLink bridges joining pairs, PCIe between the pairs, NICs between hosts."""


def _strides(order, degrees):
    out, acc = {}, 1
    for axis in order.split("-"):
        out[axis] = acc
        acc *= degrees[axis]
    return out


def _hand_classes(cluster, members):
    """Class names of a chain's hops, worked rank by rank: the outermost block a hop leaves."""
    dom, host = cluster.scale_up_domain, cluster.gpus_per_node
    names = []
    for a, b in zip(members, members[1:], strict=False):
        if a // dom == b // dom:
            names.append("scale_up")
        elif a // host == b // host:
            names.append("host")
        else:
            names.append("scale_out")
    return names


# (cluster, degrees): on every cluster, the six orders place each axis somewhere different
LAYOUTS = [
    ("dgx-h100", {"tp": 2, "cp": 2, "dp": 2, "pp": 8}),
    ("dgx-h100", {"tp": 2, "cp": 8, "dp": 2, "pp": 2}),
    ("gb200-nvl72", {"tp": 4, "cp": 2, "dp": 18, "pp": 4}),
    ("gb200-nvl72", {"tp": 8, "cp": 4, "dp": 9, "pp": 2}),
    ("pcie", {"tp": 2, "cp": 2, "dp": 2, "pp": 4}),
]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("name", "degrees"), LAYOUTS)
def test_hops_of_every_axis_in_every_order_match_a_rank_by_rank_count(name, degrees, order):
    """For each axis, the members of the slowest group of the first tile (offset stride - 1, which crosses
    every block boundary of the tile) are listed rank by rank, each hop classed by hand, and the counts
    compared with :func:`group_hops` for a chain (pipeline) and a ring (the wrap-around added)."""
    cluster = cluster_from_mapping(PCIE_SERVER) if name == "pcie" else load_cluster(name)
    strides = _strides(order, degrees)
    names = [c.name for c in hop_classes(cluster)]
    for axis in ("tp", "cp", "dp", "pp"):
        members = [strides[axis] - 1 + k * strides[axis] for k in range(degrees[axis])]
        for ring in (False, True):
            chain = members + [members[0]] if ring and len(members) > 1 else members
            want = _hand_classes(cluster, chain)
            got = group_hops(cluster, degrees[axis], strides[axis], ring=ring)
            assert {n: int(c) for n, c in zip(names, got.hops, strict=True) if c} == \
                {n: want.count(n) for n in set(want)}, (axis, ring)
            slowest = max((names.index(n) for n in want), default=-1)
            assert int(got.slowest) == slowest
            # the label is the slowest hop's tier, which is the tier group_span gives the whole group
            assert int(got.tier) == int(group_span(cluster, degrees[axis], strides[axis]).tier)


def test_pipeline_of_eight_stages_two_per_node_at_tp_2_crosses_nodes():
    """The issue's scenario: tp 2 x pp 8 at tp-pp-cp-dp on DGX H100: stages 0-3 in node 0, 4-7 in node 1."""
    h = group_hops(load_cluster("dgx-h100"), 8, 2, ring=False)
    assert h.hops.tolist() == [6, 1]  # boundaries 0|1 .. 2|3 and 4|5 .. 6|7 on NVLink, 3|4 across nodes
    assert int(h.tier) == 3 and int(h.slowest) == 1 and int(h.fastest) == 0


def test_cp_ring_across_two_nodes_has_two_scale_out_hops():
    """cp 8 at stride 2 (tp 2 inside): ranks 0, 2, .., 14 on two nodes; hops 6|8 and the wrap 14|0 leave a node."""
    h = group_hops(load_cluster("dgx-h100"), 8, 2, ring=True)
    assert h.hops.tolist() == [6, 2]
    inside = group_hops(load_cluster("dgx-h100"), 8, 1, ring=True)
    assert inside.hops.tolist() == [8, 0] and int(inside.tier) == 1


def test_nvl72_hops_between_hosts_stay_on_nvlink_until_the_rack_ends():
    c = load_cluster("gb200-nvl72")
    assert [k.name for k in hop_classes(c)] == ["scale_up", "scale_out"]
    assert group_hops(c, 16, 4, ring=False).hops.tolist() == [15, 0]  # 64 GPUs over 16 hosts, one rack
    assert group_hops(c, 4, 36, ring=False).hops.tolist() == [2, 1]   # ranks 0, 36, 72, 108: two racks


def test_pcie_server_hops_cross_pcie_inside_the_host_and_nics_between_hosts():
    c = cluster_from_mapping(PCIE_SERVER)
    assert [k.name for k in hop_classes(c)] == ["scale_up", "host", "scale_out"]
    h = group_hops(c, 8, 2, ring=True)  # ranks 0, 2, .., 14: every hop leaves its NVLink pair
    assert h.hops.tolist() == [0, 6, 2] and int(h.tier) == 3 and int(h.fastest) == 1
    assert group_hops(c, 4, 1, ring=False).hops.tolist() == [2, 1, 0]


def test_oversubscribed_levels_are_classes_of_their_own():
    c = cluster_from_mapping({"base": "dgx-h100", "scale_out_levels": [{"name": "pod", "domain_size": 256,
                                                                          "oversubscription": 4}]})
    assert [k.name for k in hop_classes(c)] == ["scale_up", "scale_out", "scale_out_2"]
    h = group_hops(c, 64, 8, ring=True)  # 512 GPUs: 62 hops inside a pod, 2 between the two pods
    assert h.hops.tolist() == [0, 62, 2] and int(h.level) == 1


def test_pair_span_prices_a_hop_on_its_tier():
    c = cluster_from_mapping(PCIE_SERVER)
    span = pair_span(c, [-1, 0, 1, 2])
    assert span.size.tolist() == [1, 2, 2, 2]
    assert span.tier.tolist() == [0, 1, 2, 3]
    assert span.ranks_per_domain.tolist() == [1, 2, 1, 1]


def test_two_axis_group_counts_members_per_block_of_both_axes():
    """cp 2 (stride 1) x dp 4 (stride 8, tp 4 between them) on DGX H100: two members per node, four nodes."""
    c = load_cluster("dgx-h100")
    span = group_span(c, 2, 1, 4, 8)
    assert (int(span.size), int(span.ranks_per_domain), int(span.num_domains), int(span.tier)) == (8, 2, 4, 3)
    # adjacent axes are one strided group
    assert int(group_span(c, 8, 1, 1, 1).ranks_per_domain) == 8
