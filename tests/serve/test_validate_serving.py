"""``validate --serving`` on the shipped serving set: the criteria of issue 16, and the known gap as a bound."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tierwise.cli import app


def test_validate_serving_json_and_criteria():
    r = CliRunner().invoke(app, ["validate", "--serving", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    thr = doc["summary"]["throughput"]
    assert thr["rows"] >= 40
    assert thr["median"] <= 15.0
    assert thr["p90"] <= 35.0  # the criteria, met
    # regression guard a few points above today's figures (docs/serving.md, after the pricing core: 11.8 / 22.4,
    # latency median 16.7)
    assert thr["p90"] < 25.0 and thr["median"] < 14.0
    assert doc["summary"]["latency"]["median"] < 18.0
    # known gap, bounded (docs/serving.md): OCI's early vLLM on MI300X, whose step grows 3x faster with the batch
    # than the model's, is predicted fast at batch 256 and offline 128/2048 by 40-55%; at batch 1 by 10-25% since
    # its weight read runs on the training GEMM roofline (HBM / (1 + matmul_memory_weight)) rather than at a
    # serving-fitted fraction of the streaming rate
    errs = sorted(r["error_pct"] for r in doc["rows"] if r["source_id"] == "S24")
    assert 10.0 < errs[0] < 25.0 and 35.0 < errs[1] <= errs[2] < 60.0
    assert all(r["predicted"] is not None for r in doc["rows"] if r["metric"] == "output_tokens_per_s_total")


def test_dataset_prompt_lengths_come_from_their_sources():
    """GPT-J's CNN/DailyMail prompts at the dataset's published mean; OpenOrca (no published mean found) at half
    its maximum; both listed under the row's filled."""
    from tierwise.serve.validate import load_serving_rows, serving_validation_document

    doc = serving_validation_document()
    rows = {r["row_id"]: r for r in doc["rows"]}
    ids = {r["row_id"]: r for r in load_serving_rows()}
    gptj = [k for k, r in ids.items() if r["model"].startswith("GPT-J")]
    orca = [k for k, r in ids.items() if "OpenOrca" in r["input_len"]]
    assert gptj and orca
    for k in gptj:
        assert "781/69" in rows[k]["plan"] and any("See et al. 2017" in f for f in rows[k]["filled"])
    for k in orca:
        assert any("no source gives its mean" in f for f in rows[k]["filled"])
    trt = [r for r in doc["rows"] if "TensorRT-LLM" in ids[r["row_id"]]["software"] and r["predicted"] is not None]
    assert trt and all("of free HBM" in r["plan"] for r in trt)
    assert all("0.95 of free HBM" in r["plan"] for r in trt if r["source_id"] == "S05")
    assert not any("free HBM" in r["plan"] for r in doc["rows"] if "vLLM" in ids[r["row_id"]]["software"]
                   and r.get("plan"))
