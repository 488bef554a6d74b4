"""Two jobs on one fabric (issue 34): placement and interference of their collectives on shared links."""

import json

import pytest

from tierwise.cli import main
from tierwise.errors import TopologyError
from tierwise.netsim.jobs import place_jobs, simulate_two_jobs
from tierwise.topology import build_fabric
from tierwise.topology.spec import TopologySpec

# 2:1 leaves of 21 NICs (radix 32): packed halves share at most one straddling leaf, fragmented ones share all
OVER = build_fabric(TopologySpec(family="fat-tree", gpus=128, radix=32, oversubscription=2.0))
FLAT = build_fabric(TopologySpec(family="fat-tree", gpus=128, radix=32))


def test_placements_split_whole_servers():
    a, b = place_jobs(FLAT, "packed")
    assert a.size == b.size == 64 and not set(a) & set(b) and a.max() < b.min()
    a, b = place_jobs(FLAT, "fragmented")
    assert set(a // 8) == set(range(0, 16, 2)) and set(b // 8) == set(range(1, 16, 2))
    with pytest.raises(TopologyError, match="--placement"):
        place_jobs(FLAT, "spread")


def test_fragmented_jobs_interfere_on_oversubscribed_uplinks_and_packed_ones_do_not():
    packed = simulate_two_jobs(OVER, "all-reduce", "all-reduce", 1e9, placement="packed")
    frag = simulate_two_jobs(OVER, "all-reduce", "all-reduce", 1e9, placement="fragmented")
    assert packed["slowdown"] == pytest.approx(1.0, abs=0.02)
    assert frag["slowdown"] > 1.2
    # a non-blocking fabric with adaptive routing carries both whatever the placement
    for placement in ("packed", "fragmented"):
        flat = simulate_two_jobs(FLAT, "all-reduce", "all-reduce", 1e9, placement=placement)
        assert flat["slowdown"] == pytest.approx(1.0, abs=0.01)


def test_an_all_to_all_beside_a_ring_slows_the_ring_until_it_ends():
    d = simulate_two_jobs(OVER, "all-reduce", "all-to-all", 1e9, placement="fragmented")
    ring, a2a = d["jobs"]
    assert ring["slowdown"] > 1.5  # per-flow sharing: the ring's few flows against the all-to-all's many
    assert ring["together_time_s"] <= ring["alone_time_s"] + a2a["together_time_s"] * 1.03
    assert a2a["slowdown"] < 1.1


def test_two_jobs_cli(capsys):
    assert main(["simulate", "all-reduce", "--gpus", "128", "--radix", "32", "--oversubscription", "2",
                 "--second-job", "all-reduce", "--placement", "fragmented", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["placement"] == "fragmented" and d["slowdown"] > 1.2
    assert main(["simulate", "all-reduce", "--gpus", "128", "--second-job", "pipeline"]) == 2
    assert "--second-job 'pipeline'" in capsys.readouterr().err
