"""Misuse of the Python API (issue 32): a wrong type or an out-of-range number is a TierwiseError naming the
argument and how to make the right thing, never a TypeError or AttributeError from deep inside."""

from __future__ import annotations

import pytest

import tierwise
from tierwise.errors import TierwiseError


@pytest.fixture(scope="module")
def objs():
    model, cluster = tierwise.load_model("llama3.1-8b"), tierwise.load_cluster("dgx-h100")
    plan = tierwise.plan_from_mapping({"tp": 8, "global_batch_size": 64, "seq_length": 4096}, num_gpus=8)
    return {"m": model, "c": cluster, "plan": plan, "pb": tierwise.PlanBatch.from_plans([plan]),
            "span": tierwise.group_span(cluster, 8, 1)}


MISUSES = {
    "from_plans-none": (lambda o: tierwise.PlanBatch.from_plans(None), "list of plans"),
    "from_plans-a-plan": (lambda o: tierwise.PlanBatch.from_plans(o["plan"]), "not a Plan"),
    "from_plans-numbers": (lambda o: tierwise.PlanBatch.from_plans([1]), "item 0"),
    "estimate-model-name": (lambda o: tierwise.estimate_step("llama3.1-8b", o["c"], o["pb"]), "load_model"),
    "estimate-cluster-name": (lambda o: tierwise.estimate_step(o["m"], "dgx-h100", o["pb"]), "load_cluster"),
    "estimate-plan-not-batch": (lambda o: tierwise.estimate_step(o["m"], o["c"], o["plan"]), "PlanBatch"),
    "estimate-params-list": (lambda o: tierwise.estimate_step(o["m"], o["c"], o["pb"], params=[1]), "params"),
    "group_span-cluster-name": (lambda o: tierwise.group_span("dgx-h100", 8, 1), "cluster"),
    "group_span-size-text": (lambda o: tierwise.group_span(o["c"], "8", 1), "size"),
    "group_span-size-zero": (lambda o: tierwise.group_span(o["c"], 0, 1), "size"),
    "group_span-stride-zero": (lambda o: tierwise.group_span(o["c"], 8, 0), "stride"),
    "group_span-huge": (lambda o: tierwise.group_span(o["c"], 10**400, 1), "size"),
    "group_hops-cluster-name": (lambda o: tierwise.group_hops("x", 8, 1, ring=True), "cluster"),
    "tiers-cluster-name": (lambda o: tierwise.tiers("dgx-h100"), "load_cluster"),
    "cost-kind-number": (lambda o: tierwise.collective_cost(3, 2**30, o["span"], o["c"]), "kind"),
    "cost-bytes-text": (lambda o: tierwise.collective_cost("all-reduce", "1GB", o["span"], o["c"]), "size_bytes"),
    "cost-bytes-negative": (lambda o: tierwise.collective_cost("all-reduce", -1, o["span"], o["c"]), "size_bytes"),
    "cost-bytes-nan": (lambda o: tierwise.collective_cost("all-reduce", float("nan"), o["span"], o["c"]),
                       "size_bytes"),
    "cost-span-none": (lambda o: tierwise.collective_cost("all-reduce", 2**30, None, o["c"]), "group_span"),
    "cost-cluster-name": (lambda o: tierwise.collective_cost("all-reduce", 2**30, o["span"], "x"), "cluster"),
    "traffic-model-name": (lambda o: tierwise.layer_traffic("llama", None, o["pb"]), "model"),
    "search-model-name": (lambda o: tierwise.search("llama3.1-8b", o["c"], 8, 16, 4096, top=1), "model"),
    "search-gpus-text": (lambda o: tierwise.search(o["m"], o["c"], "8", 16, 4096, top=1), "num_gpus"),
    "search-top-text": (lambda o: tierwise.search(o["m"], o["c"], 8, 16, 4096, top="1"), "top"),
    "search-batch-nan": (lambda o: tierwise.search(o["m"], o["c"], 8, float("nan"), 4096), "global_batch_size"),
    "search-constraints-dict": (lambda o: tierwise.search(o["m"], o["c"], 8, 16, 4096, constraints={"tp": 8}),
                                "Constraints"),
    "search-constraint-text": (lambda o: tierwise.search(o["m"], o["c"], 8, 16, 4096,
                                                         constraints=tierwise.Constraints(tp="x")), "tp"),
    "economics-cluster-name": (lambda o: tierwise.economics(1e5, "dgx-h100", 8), "cluster"),
    "economics-rate-text": (lambda o: tierwise.economics("fast", o["c"], 8), "tokens_per_s"),
    "designs-model-name": (lambda o: tierwise.compare_designs("llama3.1-8b", 64), "model"),
    "trend-gpus-text": (lambda o: tierwise.generation_trend(o["m"], "64"), "num_gpus"),
    "levers-cluster-name": (lambda o: tierwise.with_levers("x", tierwise.Levers()), "cluster"),
    "levers-dict": (lambda o: tierwise.with_levers(o["c"], {"onebit": True}), "Levers"),
    "goodput-plan-dict": (lambda o: tierwise.estimate_goodput(o["m"], o["c"], 8, {"tp": 8}), "plan"),
    "goodput-opts-dict": (lambda o: tierwise.estimate_goodput(o["m"], o["c"], 8, o["plan"], {"days": 3}),
                          "GoodputOptions"),
    "plan-gpus-text": (lambda o: tierwise.plan_from_mapping({"tp": 8}, num_gpus="8"), "num_gpus"),
}


@pytest.mark.parametrize("case", list(MISUSES), ids=list(MISUSES))
def test_misuse_is_a_tierwise_error_naming_the_argument(objs, case):
    call, word = MISUSES[case]
    with pytest.raises(TierwiseError) as err:
        call(objs)
    assert word in str(err.value)
    assert len(str(err.value)) < 300


def test_right_calls_still_work_and_keep_their_signature(objs):
    import inspect

    cost = tierwise.collective_cost("all-reduce", 2**30, objs["span"], objs["c"])
    assert float(cost.time_s) > 0
    est = tierwise.estimate_step(objs["m"], objs["c"], objs["pb"])
    assert float(est.step_time_s[0]) > 0
    assert "size_bytes" in inspect.signature(tierwise.collective_cost).parameters
    assert tierwise.collective_cost.__doc__ == tierwise.collective_cost.__wrapped__.__doc__
    assert isinstance(tierwise.PlanBatch, type)  # classes are exported as they are


def test_a_gpu_count_that_is_not_the_plans_is_refused_naming_both(objs):
    """Issue 32: estimate_goodput(model, cluster, 16, plan_for_8_gpus) answered for a 16-GPU job priced with an
    8-GPU plan; it names both numbers now (the check is by parameter name, so every exported function taking
    a num_gpus beside a plan gets it)."""
    with pytest.raises(TierwiseError) as err:
        tierwise.estimate_goodput(objs["m"], objs["c"], 16, objs["plan"])
    assert "num_gpus=16" in str(err.value) and "= 8 GPUs" in str(err.value)
    assert tierwise.estimate_goodput(objs["m"], objs["c"], 8, objs["plan"]).num_gpus == 8
    with pytest.raises(TierwiseError, match="16"):  # a search's fixed degrees that do not make num_gpus
        tierwise.search(objs["m"], objs["c"], 16, 16, 4096, constraints=tierwise.Constraints(tp=8, pp=1, cp=1, dp=1), top=1)


def test_a_plan_that_is_not_one_of_the_models_is_refused_by_every_entry_point(objs):
    """The same class as the GPU count: arguments that disagree. The estimator trusts its input (the planner
    only hands it valid plans), so estimate_step(model, cluster, plans) priced tp 3 of a 32-head model."""
    tp3 = tierwise.plan_from_mapping({"tp": 3, "global_batch_size": 63, "seq_length": 4096}, num_gpus=3)
    deep = tierwise.plan_from_mapping({"tp": 8, "pp": 64, "global_batch_size": 64, "seq_length": 4096},
                                      num_gpus=512)
    calls = {
        "estimate_step": lambda: tierwise.estimate_step(objs["m"], objs["c"],
                                                        tierwise.PlanBatch.from_plans([objs["plan"], deep])),
        "inverse_bandwidth": lambda: tierwise.inverse_bandwidth(objs["m"], objs["c"], tp3),
        "estimate_goodput": lambda: tierwise.estimate_goodput(objs["m"], objs["c"], 3, tp3),
    }
    for name, call in calls.items():
        with pytest.raises(TierwiseError) as err:
            call()
        assert str(err.value).startswith(name) and "llama3.1-8b" in str(err.value)
    assert "plans[1]" in str(pytest.raises(TierwiseError, calls["estimate_step"]).value)
