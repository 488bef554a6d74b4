"""``validate --serving`` on the shipped serving set: the criteria of issue 16, and the known gap as a bound."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tierwise.cli import app, main


def test_validate_serving_json_and_criteria():
    r = CliRunner().invoke(app, ["validate", "--serving", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    thr = doc["summary"]["throughput"]
    assert thr["rows"] >= 40
    assert thr["median"] <= 15.0
    assert thr["p90"] <= 35.0  # the criteria, met
    # regression guard a few points above today's figures (docs/serving.md, with the engine model of issue 31:
    # 9.1 / 20.6, latency 12.2 / 40.7; before it 11.8 / 22.4 and 16.7 / 42.9)
    assert thr["p90"] < 22.4 and thr["median"] < 11.0
    lat = doc["summary"]["latency"]
    assert lat["median"] < 14.0 and lat["p90"] < 42.9
    # issue 31's target: batch-1 and small-batch rows (TPOT, prefill, batch-1 tok/s) within 15% (median) with the
    # engine each row ran (8.5% today)
    small = doc["summary"]["small_batch_latency"]
    assert small["rows"] == 12 and small["median"] <= 15.0
    # OCI's vLLM on MI300X (S24), 40-55% fast under one 8 ms per step, is within 15% with the engine's per-sequence
    # host time (vllm@0.5: 0.15 ms per sequence)
    errs = [r["error_pct"] for r in doc["rows"] if r["source_id"] == "S24"]
    assert len(errs) == 3 and max(abs(e) for e in errs) < 15.0
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


def test_validate_serving_engine_override_and_default(capsys):
    """``--engine`` runs every row on one engine: the default engine (vLLM V1, little host time) predicts the
    2023-24 engines' small-batch steps too fast (their host time was several ms), which the per-row mapping
    corrects; an unknown engine is one line listing those known, exit 2."""
    from tierwise.serve.validate import serving_validation_document

    mapped = serving_validation_document()["summary"]["small_batch_latency"]["median"]
    default = serving_validation_document(engine="default")["summary"]["small_batch_latency"]["median"]
    assert mapped < 15.0 < default < 25.0  # 8.5 / 23.7 today: the gap with the default is bounded, not met
    assert main(["validate", "--serving", "--engine", "nope"]) == 2
    err = capsys.readouterr().err
    assert "vllm@0.8" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_small_batch_gap_with_the_default_engine_is_the_old_engines_host_time(monkeypatch):
    """Issue 31's target with the default engine (none stated) is not met, and cannot be honestly: with no host
    time at all (an engine faster than any: the GPU side alone, kernel gaps kept) the twelve small-batch rows are
    still predicted more than 15% fast (median 26.3%), because their 2023-24 engines spent 4-10 ms a step on the
    host (S15's own source: 62% of the step). Meeting 15% with one default would take a default host time of the
    old engines' size, which vLLM V1's own account ("near-zero CPU overhead") contradicts. The decode rows are all
    predicted fast with the default (docs/serving.md, the table of tools/small_batch_decomposition.py)."""
    import dataclasses

    from tierwise.serve.validate import SMALL_BATCH_ROWS, serving_validation_document
    from tierwise.specs import engine as E

    zero = dataclasses.replace(E.ENGINES[("vllm", "0.8")], step_s=0.0, per_seq_s=0.0, graph_replay_s=0.0)
    monkeypatch.setitem(E.ENGINES, ("vllm", "0.8"), zero)
    doc = serving_validation_document(engine="vllm@0.8")
    gpu_only = doc["summary"]["small_batch_latency"]["median"]
    assert 15.0 < gpu_only < 30.0  # 26.3 today
    monkeypatch.undo()
    rows = serving_validation_document(engine="default")["rows"]
    decode = [r for r in rows if r["row_id"] in SMALL_BATCH_ROWS and r["metric"].startswith("TPOT")]
    assert len(decode) == 7 and all(r["error_pct"] < 0 for r in decode)
