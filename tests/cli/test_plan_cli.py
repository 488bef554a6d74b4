"""``tierwise plan`` and ``tierwise scale`` in-process: the JSON contract, the explanation, and one-line errors."""

from __future__ import annotations

import json

import pytest

from tierwise.cli import main

PLAN_KEYS = {"tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size", "etp", "sequence_parallel", "recompute",
             "zero_stage", "tiers", "estimate"}
SMALL = ["--max-mbs", "2", "--max-vpp", "2"]


def _run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_plan_json_contract(capsys):
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "256",
                      "--global-batch", "256", "--seq", "4096", "--top", "3", "--json", *SMALL)
    assert rc == 0
    doc = json.loads(out)
    assert {"plans", "explanation", "num_evaluated", "num_feasible"} <= set(doc)
    assert len(doc["plans"]) == 3 and doc["num_feasible"] > 0
    assert doc["num_evaluated"] < doc["space_size"]
    steps = [p["estimate"]["step_time_s"] for p in doc["plans"]]
    assert steps == sorted(steps)  # best first
    for p in doc["plans"]:
        assert set(p) >= PLAN_KEYS
        assert set(p["tiers"]) == {"tp", "cp", "ep", "pp", "dp"}
        assert p["tiers"]["tp"] in ("local", "scale_up")  # 8 GPUs per NVLink domain on a DGX
        assert {"step_time_s", "tokens_per_s", "mfu", "memory", "breakdown", "tiers"} <= set(p["estimate"])
        assert p["estimate"]["memory"]["fits"]
        assert p["tp"] * p["pp"] * p["cp"] * p["dp"] == 256
    assert doc["explanation"].startswith("best: ")
    assert "runner-up" in doc["explanation"] and "on scale_up" in doc["explanation"]


def test_plan_fixed_and_bounded_axes(capsys):
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "256",
                      "--global-batch", "256", "--seq", "4096", "--tp", "4", "--max-pp", "4", "--recompute", "full",
                      "--zero", "1", "--precision", "bf16", "--top", "3", "--json", *SMALL)
    assert rc == 0
    plans = json.loads(out)["plans"]
    assert plans
    for p in plans:
        assert p["tp"] == 4 and p["pp"] <= 4 and p["recompute"] == "full" and p["zero_stage"] == 1
        assert p["precision"] == "bf16"


def test_plan_scores_zero3_as_the_users_implementation(capsys):
    """--zero3-gather per-parameter (FSDP2): ZeRO-3 plans carry it and pay FSDP2's buffer passes (14 B per
    parameter per micro-batch), cheaper than FSDP1's (18 B); plans below ZeRO-3 are untouched."""
    args = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
            "--seq", "4096", "--zero", "3", "--tp", "1", "--pp", "1", "--top", "1", "--json", *SMALL]
    rc, out, _ = _run(capsys, *args)
    assert rc == 0
    fsdp1 = json.loads(out)["plans"][0]
    rc, out, _ = _run(capsys, *args, "--zero3-gather", "per-parameter")
    assert rc == 0
    doc = json.loads(out)
    fsdp2 = doc["plans"][0]
    assert fsdp1["zero3_gather"] == "flat" and fsdp2["zero3_gather"] == "per-parameter"
    assert "per-parameter" in doc["explanation"]
    if fsdp1["micro_batch_size"] == fsdp2["micro_batch_size"]:
        copies1, copies2 = (p["estimate"]["breakdown"]["shard_copy_s"] for p in (fsdp1, fsdp2))
        assert copies2 == pytest.approx(copies1 * 14 / 18, rel=1e-6)
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
                      "--global-batch", "64", "--seq", "4096", "--zero", "1", "--top", "3",
                      "--zero3-gather", "per-parameter", "--json", *SMALL)
    assert rc == 0
    assert all(p["zero3_gather"] == "flat" for p in json.loads(out)["plans"])


def test_plan_fused_ce_is_the_users_software_not_searched(capsys):
    args = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
            "--seq", "4096", "--tp", "1", "--pp", "1", "--top", "1", "--json", *SMALL]
    rc, out, _ = _run(capsys, *args)
    assert rc == 0
    unfused = json.loads(out)
    rc, out, _ = _run(capsys, *args, "--fused-ce")
    assert rc == 0
    fused = json.loads(out)
    assert unfused["plans"][0]["fused_cross_entropy"] is False and fused["plans"][0]["fused_cross_entropy"] is True
    assert "fused CE" in fused["explanation"] and "fused CE" not in unfused["explanation"]
    assert fused["plans"][0]["estimate"]["step_time_s"] < unfused["plans"][0]["estimate"]["step_time_s"]


def test_plan_table_renders(capsys):
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
                      "--global-batch", "32", "--seq", "4096", "--top", "2", *SMALL)
    assert rc == 0
    assert "best:" in out and "evaluated" in out


def test_nothing_fits_says_how_many_gpus_are_needed(capsys):
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "8",
                      "--global-batch", "64", "--seq", "8192", "--json", "--show-infeasible")
    assert rc == 0
    doc = json.loads(out)
    assert doc["plans"] == []
    assert "needs at least" in doc["explanation"] and "GPUs of 80 GiB" in doc["explanation"]
    assert doc["infeasible"] and doc["infeasible"][0]["memory_per_gpu_bytes"] > doc["infeasible"][0]["capacity_bytes"]


def test_moe_on_dgx_h100_keeps_ep_in_the_node_or_says_what_crossing_buys(capsys):
    rc, out, _ = _run(capsys, "plan", "--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256",
                      "--global-batch", "256", "--seq", "4096", "--top", "2", "--json", *SMALL)
    assert rc == 0
    doc = json.loads(out)
    best = doc["plans"][0]
    assert best["tiers"]["ep"] != "scale_out" or "crosses scale_out" in doc["explanation"]


def test_ep_forced_across_nodes_says_what_crossing_costs(capsys):
    rc, out, _ = _run(capsys, "plan", "--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256",
                      "--global-batch", "256", "--seq", "4096", "--top", "1", "--ep", "16", "--json", *SMALL)
    assert rc == 0
    doc = json.loads(out)
    assert doc["plans"][0]["tiers"]["ep"] == "scale_out"
    assert "EP 16 crosses scale_out" in doc["explanation"]
    assert "inside one 8-GPU scale-up domain" in doc["explanation"]


@pytest.mark.parametrize("args, message", [
    (["--model", "llama3.1-70b", "--gpus", "64", "--tp", "3"], "--tp 3 does not divide num_attention_heads=64"),
    (["--model", "llama3.1-70b", "--gpus", "0"], "--gpus 0 is out of range; use 1 <= --gpus"),
    (["--model", "llama3.1-8b", "--gpus", "16384", "--global-batch", "1"], "--global-batch 1 is too small"),
    (["--model", "llama3.1-8b", "--gpus", "8", "--recompute", "some"], "--recompute 'some'"),
    (["--model", "llama3.1-8b", "--gpus", "8", "--zero3-gather", "fsdp2"], "--zero3-gather 'fsdp2'"),
])
def test_bad_input_is_one_line_and_exit_code_2(capsys, args, message):
    rc, out, err = _run(capsys, "plan", "--cluster", "dgx-h100", *args)
    assert rc == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_scale_json_contract(capsys):
    rc, out, _ = _run(capsys, "scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:32",
                      "--global-batch", "64", "--seq", "4096", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert [p["num_gpus"] for p in doc["points"]] == [8, 16, 32]
    for p in doc["points"]:
        assert {"num_gpus", "plan", "tokens_per_s", "scaling_efficiency", "efficiency_vs_linear"} <= set(p)
    first = doc["points"][0]
    assert first["efficiency_vs_linear"] == pytest.approx(1.0)
    assert set(first["plan"]) >= PLAN_KEYS
    assert doc["explanation"]


def test_scale_bad_range_is_one_line(capsys):
    rc, _, err = _run(capsys, "scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64:8")
    assert rc == 2 and "--gpus '64:8'" in err


MOE_FIXED = ["plan", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "64",
             "--seq", "512", "--tp", "1", "--pp", "1", "--ep", "1", "--mbs", "1", "--zero", "3",
             "--precision", "bf16", "--recompute", "none", "--top", "1", "--json", *SMALL]


def test_plan_framework_sets_every_software_switch(capsys):
    """--framework gives every plan the framework's software defaults (the table ``estimate`` fills a
    scenario's from), lists them under ``assumed``, and changes the score: torchtitan's one
    torch._grouped_mm kernel per expert GEMM instead of Megatron-Core's launch per local expert (128 on one
    rank here) lifts the host-launch floor of every MoE layer."""
    rc, out, _ = _run(capsys, *MOE_FIXED, "--framework", "torchtitan")
    assert rc == 0
    titan = json.loads(out)
    plan = titan["plans"][0]["estimate"]["plan"]
    assert titan["framework"] == "torchtitan" and plan["framework"] == "torchtitan"
    assert (plan["attention_kernel"], plan["moe_grouped_gemm"], plan["zero2_sync"]) == (
        "sdpa", "single", "fsdp-per-microbatch")
    assert plan["fused_elementwise"] is False and plan["ep_comm_overlap"] is False
    assert any(a.startswith("moe_grouped_gemm=single") for a in titan["assumed"])
    assert any(a.startswith("ep_comm_overlap not searched") for a in titan["assumed"])
    rc, out, _ = _run(capsys, *MOE_FIXED, "--framework", "megatron")
    assert rc == 0
    mega = json.loads(out)
    mplan = mega["plans"][0]["estimate"]["plan"]
    assert (mplan["attention_kernel"], mplan["moe_grouped_gemm"], mplan["moe_dispatcher"]) == (
        "cudnn", "per-expert", "allgather")
    # the torchtitan plan is scored as torchtitan runs it: with Megatron-Core's 128 launches per expert GEMM
    # (every expert on one rank) the same plan is host-bound and far slower

    from tierwise.estimate import estimate
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model
    from tierwise.specs.plan import Plan, PlanBatch

    model, cluster = load_model("qwen3-30b-a3b"), load_cluster("dgx-h100")
    single = Plan.of(**plan)
    steps = estimate(model, cluster, PlanBatch.from_plans([single, single.replace(moe_grouped_gemm="per-expert")]))
    assert titan["plans"][0]["estimate"]["step_time_s"] == pytest.approx(float(steps.step_time_s[0]), rel=1e-9)
    assert float(steps.step_time_s[1]) > 1.5 * float(steps.step_time_s[0])


def test_plan_explicit_flags_win_over_the_framework(capsys):
    rc, out, _ = _run(capsys, *MOE_FIXED, "--framework", "torchtitan", "--fused")
    assert rc == 0
    doc = json.loads(out)
    assert doc["plans"][0]["fused_elementwise"] is True
    assert not any(a.startswith("fused_elementwise") for a in doc["assumed"])
    rc, out, _ = _run(capsys, *MOE_FIXED, "--framework", "nemo")
    assert rc == 0
    nemo = json.loads(out)
    assert nemo["plans"][0]["estimate"]["plan"]["moe_force_balance"] is True
    rc, out, _ = _run(capsys, *MOE_FIXED, "--framework", "nemo", "--dropless-moe")
    assert rc == 0
    assert json.loads(out)["plans"][0]["estimate"]["plan"]["moe_force_balance"] is False


def test_plan_without_framework_keeps_the_plan_defaults(capsys):
    rc, out, _ = _run(capsys, *MOE_FIXED)
    assert rc == 0
    doc = json.loads(out)
    assert "assumed" not in doc and "framework" not in doc
    plan = doc["plans"][0]["estimate"]["plan"]
    assert (plan["attention_kernel"], plan["moe_grouped_gemm"], plan["framework"]) == ("auto", "per-expert", "")


@pytest.mark.parametrize(("args", "said", "not_said"), [
    (["--gpus", "12", "--tp", "8"], "--gpus 12", "num_gpus="),
    (["--gpus", "8", "--ep", "2"], "use --ep 1", "set ep:"),
    (["--gpus", "8", "--cp", "3"], "--seq 8192", "seq_length="),
    (["--gpus", "8", "--tp", "3"], "--tp 3", "tp=3"),
])
def test_plan_names_fields_as_its_flags(capsys, args, said, not_said):
    # issue 32 (messages): the plan's checks are shared with scenario files; on the command line they name flags
    assert main(["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and not_said not in err and err.count("\n") == 1
