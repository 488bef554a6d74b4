"""Activation offload parks activations in host DRAM, which is finite: the estimate checks the offloaded bytes
against the cluster's host memory per GPU (catalog ``host_link.memory_per_accelerator``, cluster file
``host_memory``), and the planner's fewest-offloaded-layers choice fits both memories or is not offered."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tierwise.estimate import estimate
from tierwise.estimate.scenario import _memory_warnings
from tierwise.planner import Constraints, search
from tierwise.specs.cluster import cluster_from_mapping, load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch

GiB = 2.0**30


@pytest.fixture(scope="module")
def setup():
    model, h100 = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    best = search(model, h100, 16, 16, 32768, constraints=Constraints(pp=1), top=1).batch().plan(0)
    return model, h100, best


def test_catalog_host_memory_is_the_reference_server_over_its_gpus():
    # DGX H100: 2 TB of DDR5 over 8 GPUs; GB200: one Grace (480 GB LPDDR5X) per two GPUs
    assert load_cluster("dgx-h100").host_memory_bytes == 256 * GiB
    assert load_cluster("gb200-nvl72").host_memory_bytes == 240 * GiB
    assert cluster_from_mapping({"base": "dgx-h100", "host_memory": "1 TiB"}).host_memory_bytes == 1024 * GiB


def test_offloaded_bytes_are_the_offloaded_layers_share_of_the_activations(setup):
    model, h100, best = setup
    k = best.activation_offload_layers
    none = best.replace(activation_offload_layers=0)
    est = estimate(model, h100, PlanBatch.from_plans([best, none]))
    held_in_hbm = est.memory["activations_bytes"][1] - est.memory["activations_bytes"][0]
    # what leaves HBM is what lands on the host (one micro-batch in flight with pp 1)
    assert est.memory["host_bytes"][0] == pytest.approx(held_in_hbm, rel=1e-9)
    assert est.memory["host_bytes"][1] == 0.0
    assert est.memory["host_bytes"][0] > 0 and k > 0


def test_a_plan_over_the_host_memory_does_not_fit_and_says_why(setup):
    model, h100, best = setup
    est = estimate(model, h100, PlanBatch.from_plans([best]))
    host = float(est.memory["host_bytes"][0])
    assert est.memory["fits"][0] and host < h100.host_memory_bytes
    small = replace(h100, host_memory_bytes=host / 2)
    tight = estimate(model, small, PlanBatch.from_plans([best]))
    assert not tight.memory["fits"][0]
    assert tight.memory["per_gpu_bytes"][0] <= tight.memory["capacity_bytes"][0]  # HBM alone still fits
    mem = {k: float(v[0]) for k, v in tight.memory.items()}
    (line,) = _memory_warnings(mem, small)
    assert line.startswith("host memory:") and "host_memory" in line
    unknown = replace(h100, host_memory_bytes=0.0)
    free = estimate(model, unknown, PlanBatch.from_plans([best]))
    assert free.memory["fits"][0]  # unknown capacity: unchecked, and the estimate warns
    (line,) = _memory_warnings({k: float(v[0]) for k, v in free.memory.items()}, unknown)
    assert "gives no host memory" in line


def test_the_planner_offers_offload_only_where_the_host_holds_it(setup):
    model, h100, best = setup
    host = float(estimate(model, h100, PlanBatch.from_plans([best])).memory["host_bytes"][0])
    # the winner's k is the fewest that fit HBM, so it is also the least host memory any fitting k needs
    short = replace(h100, host_memory_bytes=host * 0.99)
    assert not len(search(model, short, 16, 16, 32768, constraints=Constraints(pp=1), top=3).plans["tp"])
    enough = replace(h100, host_memory_bytes=host * 1.01)
    again = search(model, enough, 16, 16, 32768, constraints=Constraints(pp=1), top=1).batch().plan(0)
    assert again.activation_offload_layers == best.activation_offload_layers
