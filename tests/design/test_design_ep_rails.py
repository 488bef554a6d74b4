"""MoE across rails in ``design`` (issue 34): EP all-to-all lands on the compared fabric, and rail-only's
forwarding through the scale-up domain costs an EP-across-nodes plan more than rail-optimized; a plan without
EP is priced alike on both."""

import pytest

from tierwise.collectives.model import collective_cost
from tierwise.design.designs import Design, compare_designs
from tierwise.hierarchy import group_span
from tierwise.specs.cluster import cluster_from_mapping
from tierwise.specs.model import load_model

PAIR = (Design(name="rail-optimized", cluster="dgx-h100"),
        Design(name="rail-only", cluster="dgx-h100", family="rail-only"))


@pytest.fixture(scope="module")
def mixtral():
    return compare_designs(load_model("mixtral-8x22b"), 1024, designs=PAIR)


def test_rail_only_costs_an_ep_across_nodes_plan_more(mixtral):
    opt, only = mixtral["designs"]
    a, b = opt["ep_across_domains"], only["ep_across_domains"]
    assert a["ep_gpus"] > 8 and a["plan"] == b["plan"]  # the same EP plan, its group crossing servers
    assert b["step_time_s"] > a["step_time_s"]
    assert b["step_time_s"] / a["step_time_s"] < 1.05  # NVLink ~9x the NIC: the forward is mostly absorbed
    assert any("EP across domains" in n for n in mixtral["notes"])


def test_plans_without_ep_are_priced_alike(mixtral):
    opt, only = mixtral["designs"]
    assert opt["plan"]["ep"] == 1 and only["plan"] == opt["plan"]
    assert only["step_time_s"] == pytest.approx(opt["step_time_s"], rel=1e-9)


def test_dense_model_has_no_ep_row():
    doc = compare_designs(load_model("llama3.1-8b"), 64, global_batch=256, designs=PAIR[:1])
    assert "dense" in doc["designs"][0]["ep_across_domains"]["why"]


@pytest.mark.parametrize("scale_up, low, high", [(None, 1.0, 1.01), ("32 GB/s", 1.3, 2.0)])
def test_rail_only_all_to_all_penalty_grows_as_the_scale_up_slows(scale_up, low, high):
    # the flow simulator's rail-only check (docs/topology.md): 1.000x at 450 GB/s NVLink, 1.56x at 32 GB/s
    extra = {"scale_up_bandwidth": scale_up} if scale_up else {}
    times = []
    for family in ("rail-optimized", "rail-only"):
        c = cluster_from_mapping({"base": "dgx-h100", **extra, "fabric": {"topology": family}}, origin="test")
        times.append(float(collective_cost("all-to-all", 1e9, group_span(c, 64, 1), c).time_s))
    assert low < times[1] / times[0] < high
    # one rank per node: every peer is on the same rail, nothing is forwarded
    same = []
    for family in ("rail-optimized", "rail-only"):
        c = cluster_from_mapping({"base": "dgx-h100", **extra, "fabric": {"topology": family}}, origin="test")
        same.append(float(collective_cost("all-to-all", 1e9, group_span(c, 16, 8), c).time_s))
    assert same[1] == pytest.approx(same[0])
