"""The planner's typed answers (issue 27: results are records; documents are finished from them): a
:class:`PlanAnswer` / :class:`ScaleAnswer` round-trips to the same ``plan`` / ``scale`` document the one-call
functions print, its plans are :class:`Plan` records, and the goodput ranking reads those records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from tierwise.documents import finish, schema
from tierwise.documents.training import plan_document, scale_document
from tierwise.goodput.model import GoodputOptions
from tierwise.goodput.ranking import goodput_ranking, goodput_scaling
from tierwise.planner import answer
from tierwise.planner.explain import plan_label
from tierwise.planner.gpus import answer_any_gpus, plan_any_gpus
from tierwise.planner.results import PlanAnswer, RankedPlan, ScaleAnswer
from tierwise.planner.space import Constraints
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import Plan

SRC = Path(__file__).resolve().parents[2] / "src" / "tierwise"


def _valid(kind: str, doc: dict) -> None:
    assert json.loads(json.dumps(doc)) == doc
    errors = list(jsonschema.Draft202012Validator(schema(kind)).iter_errors(finish(kind, doc)))
    assert not errors, errors


@pytest.mark.parametrize("case", [("llama3.1-8b", "dgx-h100", 16, {}),
                                  ("mixtral-8x7b", "gb200-nvl72", 70, {"framework": "megatron"}),
                                  ("llama3.1-405b", "dgx-h100", 8, {})])
def test_plan_answer_round_trips_to_the_same_document(case):
    """Ranked plans as records (a fit, an idle-GPU count with a framework's assumptions, nothing fits)."""
    name, cluster, gpus, extra = case
    m, c = load_model(name), load_cluster(cluster)
    kw = dict(constraints=Constraints(**extra), top=3, show_infeasible=True)
    a = answer_any_gpus(m, c, gpus, 64, 4096, **kw)
    assert isinstance(a, PlanAnswer) and all(isinstance(r, RankedPlan) and isinstance(r.plan, Plan)
                                             for r in a.plans)
    doc = plan_document(a)
    assert doc == plan_any_gpus(m, c, gpus, 64, 4096, **kw)
    _valid("plan", doc)
    assert doc["gpus"]["used"] == a.gpus_used == a.num_gpus and doc["gpus"]["asked"] == gpus
    assert ("note" in doc["gpus"]) == (a.gpus_used < gpus)
    assert doc["explanation"].splitlines() == [x for line in a.explanation for x in line.splitlines()]
    assert ("framework" in doc) == bool(extra) and doc.get("assumed", []) == list(a.assumed)
    for r, entry in zip(a.plans, doc["plans"], strict=True):
        assert entry["estimate"]["plan"] == r.plan.as_dict() and entry["tiers"] == dict(r.tiers)
        assert (entry["tp"], entry["ep"], entry["recompute"]) == (r.plan.tp, r.plan.ep, r.plan.recompute)
    assert [("recompute_why" in e) for e in doc["plans"]] == [i == 0 for i in range(len(a.plans))]
    assert [m_["plan"] for m_ in doc["infeasible"]] == [plan_label(x.plan) for x in a.infeasible]
    if not a.plans:
        assert doc["plans"] == [] and "needs at least" in doc["explanation"]


def test_scale_answer_round_trips_and_goodput_reads_its_plans():
    m, c = load_model("llama3.1-8b"), load_cluster("gb200-nvl72")
    a = answer.answer_scale(m, c, [36, 70, 144], 256, 4096, plan_fn=answer_any_gpus)
    assert isinstance(a, ScaleAnswer) and len(a.points) == 3
    doc = scale_document(a)
    assert doc == answer.scale_document(m, c, [36, 70, 144], 256, 4096, plan_fn=answer_any_gpus)
    _valid("scale", doc)
    for p, row in zip(a.points, doc["points"], strict=True):
        assert row["plan"]["estimate"]["plan"] == p.best.plan.as_dict()
        assert row["tokens_per_s"] == p.best.tokens_per_s and row["gpus"]["used"] == p.gpus.used
    assert a.points[0].efficiency_vs_linear == 1.0 and doc["knee_num_gpus"] == a.knee_num_gpus
    g = goodput_scaling(a, m, c, GoodputOptions())
    assert sorted(g.points) == [0, 1, 2]
    assert g.points[1].goodput_tokens_per_s < a.points[1].best.tokens_per_s
    r = goodput_ranking(answer_any_gpus(m, c, 70, 256, 4096, top=4), m, c, GoodputOptions())
    assert r is not None and len(r.plans) == 4


def test_no_plan_is_rebuilt_from_a_document():
    """Library code passes Plan records; no ``Plan.of(**...["plan"])`` over a JSON document in src/."""
    pattern = re.compile(r"Plan(\.of)?\(\*\*[^)]*\[\"plan\"\]")
    hits = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, hits
