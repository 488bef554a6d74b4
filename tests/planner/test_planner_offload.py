"""Activation offload as a planner choice (planner/offload.py): a plan only offload makes fit is found and timed
as ``estimate`` times it; the search equals a brute force that tries every offloaded-layer count; the memory
screen never drops a structure that fits only with offload; the switch off gives the answer from before."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tierwise.estimate import estimate
from tierwise.planner import Constraints, search
from tierwise.planner.answer import plan_document
from tierwise.planner.branch_and_bound import Evaluator, _level1
from tierwise.planner.space import build_space, expand_refinements, expand_switches
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.parameters import load_parameters
from tierwise.specs.plan import RECOMPUTE, PlanBatch

from ._units import top_units


@pytest.fixture(scope="module")
def h100():
    return load_cluster("dgx-h100")


def test_only_offload_makes_70b_fit_on_16_h100_and_the_planner_finds_it(h100):
    """Llama 3.1 70B, 16 H100, pp forced 1, 16 x 32,768 tokens: no recompute choice fits (full recompute keeps
    every layer's input), offloading most layers' activations does; the winner's time is estimate's."""
    model = load_model("llama3.1-70b")
    off = search(model, h100, 16, 16, 32768, constraints=Constraints(pp=1, activation_offload=False), top=3)
    assert not len(off.plans["tp"])  # without offload nothing fits
    result = search(model, h100, 16, 16, 32768, constraints=Constraints(pp=1), top=3)
    assert len(result.plans["tp"])
    plan = result.batch().plan(0)
    k = plan.activation_offload_layers
    assert plan.recompute == "none" and 1 <= k <= model.num_layers - 1
    est = estimate(model, h100, PlanBatch.from_plans([plan, plan.replace(activation_offload_layers=k - 1)]))
    np.testing.assert_allclose(est.step_time_s[0], result.plans["_score"][0], rtol=1e-12)
    assert est.memory["fits"][0] and not est.memory["fits"][1]  # the fewest layers that fit
    assert est.offload_exposed_s[0] > 0


def test_plan_document_names_the_offload_and_its_host_traffic(h100):
    model = load_model("llama3.1-70b")
    doc = plan_document(model, h100, 16, 16, 32768, constraints=Constraints(pp=1), top=2)
    best = doc["plans"][0]
    k = best["activation_offload_layers"]
    bd = best["estimate"]["breakdown"]
    assert bd["offload_exposed_s"] > 0 and bd["offload_host_bytes"] > 0
    assert f"{k} of {model.num_layers} layers offloaded to the host" in best["recompute_why"]
    assert best["recompute_why"] in doc["explanation"]
    assert "full recompute" in best["recompute_why"] and "needs" in best["recompute_why"]


def _brute_force_every_k(model, cluster, space):
    """Every plan of ``space`` (built with offload off) and, for no-recompute pp-1 plans, every offloaded-layer
    count 1 .. L - 1 too, each estimated as given: (table, score, fits)."""
    units = expand_switches(space, model, space.structure)
    table = expand_refinements(space, units)
    table["activation_offload_layers"] = np.zeros(len(table["tp"]), dtype=np.int64)
    rows = np.nonzero((table["recompute"] == RECOMPUTE.index("none")) & (table["pp"] == 1))[0]
    ks = np.arange(1, model.num_layers)
    extra = {key: np.repeat(v[rows], len(ks)) for key, v in table.items()}
    extra["activation_offload_layers"] = np.tile(ks, len(rows))
    table = {key: np.concatenate([table[key], extra[key]]) for key in table}
    res = Evaluator(model, cluster, space, "step_time", parameters=load_parameters())(table)
    return table, res["score"], res["fits"]


@pytest.mark.parametrize("model_name, num_gpus, gbs, seq, fixed", [
    ("llama3.1-8b", 2, 8, 8192, {}),  # offload plans rank #3 and #5
    ("llama3.1-70b", 16, 16, 16384, {"tp": 8}),  # pp > 1 competes with offload on pp 1
    ("llama3.1-70b", 16, 16, 32768, {"tp": 16}),  # pp 1 structures fit only with offload
])
def test_search_equals_brute_force_over_every_offload_count(h100, model_name, num_gpus, gbs, seq, fixed):
    model = load_model(model_name)
    c = Constraints(max_micro_batch_size=2, max_vpp=2, **fixed)
    space_off = build_space(model, h100, num_gpus, gbs, seq, replace(c, activation_offload=False))
    assert not space_off.offload
    table, score, fits = _brute_force_every_k(model, h100, space_off)
    expected = top_units(table, score, fits, 5)
    result = search(model, h100, num_gpus, gbs, seq, constraints=c, top=5)
    np.testing.assert_allclose(result.plans["_score"], expected, rtol=1e-9)
    assert np.any(result.plans["activation_offload_layers"] > 0)  # the case exercises offload
    assert not result.notes
    # the memory screen keeps every structure with a fitting plan, offloaded or not
    space = build_space(model, h100, num_gpus, gbs, seq, c)
    mem_ok = _level1(space, model, Evaluator(model, h100, space, "step_time", parameters=load_parameters()))[0]
    fitting = {tuple(int(table[a][i]) for a in ("tp", "pp", "cp", "dp", "vpp", "micro_batch_size"))
               for i in np.nonzero(fits)[0]}
    structure = space.structure
    ok = {tuple(int(structure[a][i]) for a in ("tp", "pp", "cp", "dp", "vpp", "micro_batch_size"))
          for i in np.nonzero(mem_ok)[0]}
    assert fitting and fitting <= ok


def test_switch_off_gives_the_answer_from_before_offload_was_searched(h100):
    """70B, 16 H100, pp 1, 64 x 8,192: with offload on its winner offloads (faster than recomputing); off, the
    top 5 are the full-recompute plans the planner answered before offload was searched (recorded with the
    code of commit fc980c1)."""
    model = load_model("llama3.1-70b")
    before = [50.4674854, 50.94488315, 62.29043516, 64.19529033, 66.45093675]
    off = search(model, h100, 16, 64, 8192, constraints=Constraints(pp=1, activation_offload=False), top=5)
    np.testing.assert_allclose(off.plans["_score"], before, rtol=1e-8)
    assert "activation_offload_layers" not in off.plans
    on = search(model, h100, 16, 64, 8192, constraints=Constraints(pp=1), top=5)
    assert on.plans["activation_offload_layers"][0] > 0 and on.plans["_score"][0] < before[0]
