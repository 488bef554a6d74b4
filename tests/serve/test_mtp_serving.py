"""Issue 30, serving with DeepSeek's MTP module as a speculative decoder (``serve --mtp N``): the expected tokens
per step, TPOT through the shared decode step, the MTP weights and KV, and the refusals."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tierwise.cli import app
from tierwise.errors import ScenarioError
from tierwise.serve.api import ServeConfig, serve_estimate, serve_plan_document, workload_of
from tierwise.serve.kv import mtp_weight_bytes_per_gpu, weight_bytes_per_gpu
from tierwise.serve.params import ServingParameters
from tierwise.serve.phases import accepted_per_step, decode_step_time, mtp_draft_time
from tierwise.serve.simulate import SimRequest, simulation_block
from tierwise.specs.model import load_model

_V3 = dict(model="deepseek-v3", cluster="dgx-h100", num_gpus=16, precision="fp8", input_len=1000, output_len=500)


def test_expected_tokens_per_step_by_hand():
    """E = 1 + P + ... + P^N (Leviathan et al. 2023 sec. 3.1): N = 1 at the report's 0.85 is 1.85, N = 2 is
    1 + 0.85 + 0.7225; no MTP is one token; acceptance 1 is N + 1."""
    assert accepted_per_step(ServingParameters()) == 1.0
    assert accepted_per_step(ServingParameters(mtp=1)) == pytest.approx(1.85)
    assert accepted_per_step(ServingParameters(mtp=2)) == pytest.approx(2.5725)
    assert accepted_per_step(ServingParameters(mtp=2, mtp_acceptance=0.9)) == pytest.approx(1 + 0.9 + 0.81)
    assert accepted_per_step(ServingParameters(mtp=3, mtp_acceptance=1.0)) == 4.0


def _steps(n: int, batch: float):
    """(step with MTP n, step without) at ``batch`` sequences on the deployment of ``_V3``, from the decode step."""
    w, d, _ = workload_of(ServeConfig(**_V3, batch=1))
    tp, ep = int(d.decode_tp[0]), int(d.decode_ep[0])
    out = []
    for m in (n, 0):
        p = dataclasses.replace(w.params, mtp=m)
        out.append(decode_step_time(dataclasses.replace(w.setup, params=p), tp, ep, batch, w.mean_context))
    return out, w, tp, ep


@pytest.mark.parametrize("n", [1, 2])
def test_tpot_at_batch_one_falls_by_e_over_the_step_ratio(n):
    """Static batching at batch 1: TPOT is the decode step / E. The step with MTP is the step without plus the
    target forward's extra positions and the draft forwards, so TPOT falls by E x step_off / step_on, and the
    step grows far less than the (1 + N) positions it verifies (the weights are read once)."""
    (on, off), w, tp, ep = _steps(n, 1.0)
    e = accepted_per_step(ServingParameters(mtp=n))
    step_on, step_off = float(on.total_s), float(off.total_s)
    draft = mtp_draft_time(dataclasses.replace(w.setup, params=dataclasses.replace(w.params, mtp=n)), tp, ep, 1.0,
                           w.mean_context).gpu_s
    assert float(on.mtp_s) == pytest.approx(float(draft)) and float(draft) > 0
    assert step_off + float(draft) <= step_on < 1.25 * step_off
    docs = [serve_estimate(ServeConfig(**_V3, batch=1, batching="static", mtp=m)) for m in (n, 0)]
    ratio = docs[1]["tpot_s"] / docs[0]["tpot_s"]
    assert ratio == pytest.approx(e * step_off / step_on, rel=1e-9)
    assert 0.8 * e < ratio < e
    for doc in docs:  # static: one prompt, then its output at the TPOT
        inst = doc["deployment"]["instances"]
        assert doc["output_tokens_per_s"] == pytest.approx(inst * 500 / (doc["ttft_s"] + 500 * doc["tpot_s"]))
    assert docs[0]["mtp"]["accepted_per_step"] == pytest.approx(e)
    assert docs[0]["phases"]["decode_step_s"] == pytest.approx(step_on)


def test_large_batch_gains_less_than_small():
    """The verify positions are (1 + N)x the GEMM rows: once the step is compute-bound, MTP's gain shrinks."""
    (on1, off1), _, _, _ = _steps(1, 1.0)
    (on2, off2), _, _, _ = _steps(1, 512.0)
    assert float(on2.total_s) / float(off2.total_s) > float(on1.total_s) / float(off1.total_s)


def test_memory_grows_by_the_mtp_weights_and_kv():
    """DeepSeek-V3's MTP module is 11.5B unique parameters (README_WEIGHTS.md: a MoE block, the projection and
    two norms; embedding and head shared); every GPU holds its share, and the cache holds its one-layer KV."""
    m = load_model("deepseek-v3")
    block = float(mtp_weight_bytes_per_gpu(m, "bf16", 1, 1)) / 2.0
    assert block == pytest.approx(11.5e9, rel=0.02)
    for tp, ep in ((16, 16), (1, 64)):
        grow = float(weight_bytes_per_gpu(m, "fp8", tp, ep, mtp=1) - weight_bytes_per_gpu(m, "fp8", tp, ep))
        assert grow == pytest.approx(float(mtp_weight_bytes_per_gpu(m, "fp8", tp, ep)))
    on, off = (serve_estimate(ServeConfig(**_V3, mtp=k)) for k in (1, 0))
    assert on["weight_bytes_per_gpu"] - off["weight_bytes_per_gpu"] == pytest.approx(on["mtp"]["weight_bytes_per_gpu"])
    assert on["kv_cache_bytes_per_gpu"] == pytest.approx(off["kv_cache_bytes_per_gpu"] - on["mtp"]["weight_bytes_per_gpu"])
    assert on["max_concurrency"] < off["max_concurrency"]


def test_more_tokens_than_modules_chain_the_one_module():
    doc = serve_estimate(ServeConfig(**_V3, mtp=3))
    assert doc["mtp"]["modules"] == 1 and doc["mtp"]["tokens"] == 3
    assert any(a.startswith("mtp 3 chains") for a in doc["assumed"])
    assert any(a.startswith("mtp_acceptance 0.85") for a in doc["assumed"])
    given = serve_estimate(ServeConfig(**_V3, mtp=1, mtp_acceptance=0.9))
    assert not any(a.startswith("mtp_acceptance") for a in given["assumed"])
    assert given["mtp"]["accepted_per_step"] == pytest.approx(1.9)


@pytest.mark.parametrize(("kw", "message"), [
    (dict(model="llama3.1-8b", cluster="dgx-h100", num_gpus=1, mtp=1), "llama3.1-8b has no MTP module"),
    (dict(_V3, mtp=-1), "--mtp"),
    (dict(_V3, mtp=17), "--mtp"),
    (dict(_V3, mtp=1, mtp_acceptance=1.5), "--mtp-acceptance"),
    (dict(_V3, mtp_acceptance=0.9), "--mtp-acceptance 0.9 applies to MTP"),
])
def test_bad_mtp_is_one_line(kw, message):
    with pytest.raises(ScenarioError, match=message) as e:
        serve_estimate(ServeConfig(**kw))
    assert "\n" not in str(e.value)


def test_cli_refuses_a_model_without_mtp_in_one_line():
    bad = subprocess.run([sys.executable, "-m", "tierwise", "serve", "--model", "llama3.1-8b", "--cluster",
                          "dgx-h100", "--gpus", "1", "--mtp", "1"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")})
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and bad.stderr.count("\n") == 1
    assert "no MTP module" in bad.stderr
    r = CliRunner().invoke(app, ["serve", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "16",
                                 "--precision", "fp8", "--mtp", "2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["mtp"]["tokens"] == 2


def test_off_by_default_changes_nothing():
    """Without --mtp the document has no mtp block and the step is the one without MTP."""
    doc = serve_estimate(ServeConfig(**_V3))
    assert "mtp" not in doc and not any("mtp" in a for a in doc["assumed"])


def test_simulator_runs_the_same_step():
    """serve --simulate prices its iterations with the same per-token step: with MTP its mean TPOT falls as the
    closed form's does."""
    cfg = ServeConfig(**dict(_V3, input_len=256, output_len=512), scenario="server", rate=2.0, max_batch=64)
    off, on = (simulation_block(dataclasses.replace(cfg, mtp=k), SimRequest(requests=300)) for k in (0, 1))
    closed = off["tpot_s"] / on["tpot_s"]
    simulated = off["simulation"]["tpot_s"]["mean"] / on["simulation"]["tpot_s"]["mean"]
    assert 1.5 < closed < 1.85 and simulated == pytest.approx(closed, rel=0.1)


def test_serve_plan_takes_mtp_as_given():
    kw = dict(model="deepseek-v3", cluster="dgx-h100", num_gpus=16, precision="fp8", input_len=1000,
              output_len=500, scenario="interactive")
    off, on = (serve_plan_document(ServeConfig(**kw, mtp=k), modes="aggregated", top=1) for k in (0, 1))
    assert on["best"][0]["tpot_s"] < off["best"][0]["tpot_s"]
    assert any(a.startswith("mtp_acceptance") for a in on["assumed"])
    assert "mtp 1 as given (--mtp; not searched)" in on["assumed"]


def test_prefill_runs_the_mtp_module_over_the_prompt():
    """With MTP the prefill step runs one more block (the module's) over the prompt: its layers grow by one MoE
    layer of DeepSeek-V3's 61 (3 dense, 58 MoE), between 1/61 and 2/61 of them."""
    on, off = (serve_estimate(ServeConfig(**_V3, mtp=k))["phases"] for k in (1, 0))
    grow = on["prefill_layers_s"] / off["prefill_layers_s"] - 1.0
    assert 1.0 / 61 < grow < 2.0 / 61
    assert on["prefill_comm_s"] > off["prefill_comm_s"] and on["prefill_head_s"] > off["prefill_head_s"]
