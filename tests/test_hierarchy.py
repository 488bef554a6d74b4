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
