"""Serving's typed records (issue 27): the library call returns a :class:`ServeEstimate`, ``documents/serving.py``
turns it into the ``serve`` document, and every figure of the document is the record's own."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import numpy as np
import pytest

from tierwise.documents import finish, schema
from tierwise.documents.serving import COMPARED, compare_block, plan_document, serve_document
from tierwise.serve import ServeConfig, ServeEstimate, estimate_serving, serve_estimate
from tierwise.serve.api import (
    attention_variants,
    compare_attention,
    plan_serving,
    serve_plan_document,
    workload_of,
)
from tierwise.serve.phases import accepted_per_step, decode_step_time, decode_token_time
from tierwise.serve.records import DecodeStep, PrefillCost, ServeResults
from tierwise.serve.result import PlanChoice, ServePlan

_8B = dict(model="llama3.1-8b", cluster="dgx-h100", input_len=1024, output_len=128)
CASES = {
    "aggregated": dict(_8B, num_gpus=8, tp=8),
    "server": dict(_8B, num_gpus=8, tp=2, scenario="server", rate=20.0),
    "disaggregated": dict(_8B, model="llama3.1-70b", prefill_gpus=8, decode_gpus=8, prefill_tp=8, decode_tp=8),
    "prefix-host": dict(_8B, num_gpus=1, prefix_hit_rate=0.5, prefix_tier="host"),
    "mtp": dict(model="deepseek-v3", cluster="gb200-nvl72", num_gpus=8, precision="fp8", mtp=2, input_len=1000,
                output_len=200),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_record_round_trips_to_the_same_document(name):
    cfg = ServeConfig(**CASES[name])
    est = estimate_serving(cfg)
    assert isinstance(est, ServeEstimate)
    assert isinstance(est.prefill, PrefillCost) and isinstance(est.decode, DecodeStep)
    doc = serve_document(est)
    # the library's document is this record's, and survives JSON unchanged
    assert doc == serve_estimate(cfg)
    assert json.loads(json.dumps(doc)) == doc
    errors = list(jsonschema.Draft202012Validator(schema("serve")).iter_errors(finish("serve", doc)))
    assert not errors, errors
    # every figure the document gives is the record's, at the record's key
    disagg = est.deployment.disaggregated
    assert doc["mode"] == ("disaggregated" if disagg else "aggregated")
    for key, value in est.results.columns().items():
        if doc.get(key) is None:  # the aggregated mode's KV-link figures are null
            assert not disagg and key in ("kv_transfer_tier", "kv_link_bytes_per_s_per_gpu")
            continue
        got = doc[key]
        assert got == (value if isinstance(value, str) else type(got)(value)), key
    phases = doc["phases"]
    for key, field in (("prefill_s", "total_s"), ("prefill_layers_s", "layers_s"), ("prefill_head_s", "head_s"),
                       ("prefill_compute_s", "compute_s"), ("prefill_comm_s", "comm_s"),
                       ("prefill_host_s", "host_s")):
        assert phases[key] == float(getattr(est.prefill, field))
    for key, field in (("decode_step_s", "total_s"), ("decode_memory_s", "memory_s"),
                       ("decode_compute_s", "compute_s"), ("decode_comm_s", "comm_s"),
                       ("decode_overhead_s", "overhead_s")):
        assert phases[key] == float(getattr(est.decode, field))
    assert doc["assumed"] == list(est.assumed)
    assert ("mtp" in doc) == (est.mtp is not None) and ("prefix_cache" in doc) == (est.prefix is not None)
    if est.mtp is not None:
        assert doc["mtp"]["draft_s"] == float(est.decode.mtp_s) > 0
        assert doc["mtp"]["accepted_per_step"] == accepted_per_step(est.workload.params) > 1
    if est.prefix is not None:
        assert doc["prefix_cache"]["saved_prefill_s"] == float(est.prefill.saved_s) > 0
        assert doc["prefix_cache"]["load_s"] == float(est.prefill.load_s) > 0


def test_records_are_frozen():
    est = estimate_serving(ServeConfig(**CASES["aggregated"]))
    for record in (est, est.prefill, est.decode, est.results, est.deployment, est.workload.setup):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.__setattr__(dataclasses.fields(record)[0].name, None)


def test_compare_block_is_each_variants_document():
    cfg = ServeConfig(**dict(CASES["aggregated"], model="deepseek-v3", cluster="gb200-nvl72", tp=8))
    variants = attention_variants(cfg)
    assert [e.attention for e in variants] == ["mla", "gqa", "mha"]
    block = compare_block(variants)
    assert block == compare_attention(cfg)
    for est, row in zip(variants, block["compare_attention"], strict=True):
        doc = serve_document(est)
        assert {k: row[k] for k in COMPARED} == {k: doc[k] for k in COMPARED}
        assert row["kv_heads"] == est.workload.model.num_kv_heads


def test_decode_token_is_the_step_over_tokens_per_step():
    """With MTP a step yields E tokens per sequence: the per-token record is the step (its chunked prompt tokens
    E times as many) over E, and carries that step."""
    w, d, _ = workload_of(ServeConfig(**CASES["mtp"]))
    tp, ep = int(d.decode_tp[0]), int(d.decode_ep[0])
    batch = np.array([1.0, 16.0, 128.0])
    tok = decode_token_time(w.setup, tp, ep, batch, w.mean_context, prefill_tokens=batch, prefill_context=500.0)
    e = accepted_per_step(w.params)
    step = decode_step_time(w.setup, tp, ep, batch, w.mean_context, prefill_tokens=batch * e, prefill_context=500.0)
    np.testing.assert_array_equal(tok.step.total_s, step.total_s)
    np.testing.assert_array_equal(tok.total_s, step.total_s / e)
    np.testing.assert_array_equal(tok.bound, step.bound)
    assert np.all(tok.tokens_per_step == e) and e > 2


def test_results_select_by_deployment():
    """ServeResults.where picks each column per deployment; at(i) is deployment i."""
    a = ServeResults(**{f.name: np.array([1.0, 2.0]) for f in dataclasses.fields(ServeResults)})
    b = ServeResults(**{f.name: np.array([3.0, 4.0]) for f in dataclasses.fields(ServeResults)})
    mixed = a.where(np.array([True, False]), b)
    assert all(list(v) == [1.0, 4.0] for v in mixed.columns().values())
    assert mixed.at(1).ttft_s == 4.0 and list(mixed.columns()) == [f.name for f in dataclasses.fields(ServeResults)]


@pytest.mark.parametrize("kw", [dict(model="llama3.1-8b", cluster="dgx-h100", num_gpus=8),
                                dict(model="mixtral-8x7b", cluster="dgx-h100", num_gpus=8, scenario="interactive"),
                                dict(model="llama3.1-8b", cluster="dgx-h100", num_gpus=4, decode_cluster="hgx-h200")])
def test_plan_record_round_trips_to_the_same_document(kw):
    cfg = ServeConfig(input_len=1024, output_len=128, **kw)
    plan = plan_serving(cfg)
    assert isinstance(plan, ServePlan) and all(isinstance(c, PlanChoice) for c in plan.search.best)
    doc = plan_document(plan)
    again = serve_plan_document(cfg)
    assert {k: v for k, v in doc.items() if k != "search_s"} == {k: v for k, v in again.items() if k != "search_s"}
    assert json.loads(json.dumps(doc)) == doc
    errors = list(jsonschema.Draft202012Validator(schema("serve-plan")).iter_errors(finish("serve-plan", doc)))
    assert not errors, errors
    assert plan.search.best and doc["feasible"] == plan.search.feasible > 0
    for choice, row in zip(plan.search.best, doc["best"], strict=True):
        assert {k: row[k] for k in choice.results.columns()} == choice.results.columns()
        assert row["decode_tp"] == choice.decode_tp and row["redundant_experts"] == choice.redundant_experts
        assert ("decode_cluster" in row) == (choice.decode_cluster is not None)
    scores = [c.results.output_tokens_per_s_per_gpu for c in plan.search.best]
    assert scores == sorted(scores, reverse=True)
    # the EPLB line only where several redundant-expert counts were searched (a MoE model, none given)
    assert ("why_redundant" in doc) == (plan.search.why_redundant is not None) == (kw["model"] == "mixtral-8x7b")
