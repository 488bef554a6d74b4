"""``serve --simulate`` (issue 31): the iteration-level loop against the closed form, queueing under bursts, KV
preemption, prefix caching, and the trace reader's bad input."""

from __future__ import annotations

import json

import pytest

from tierwise.cli import main
from tierwise.serve.api import ServeConfig
from tierwise.serve.simulate import SimRequest, simulation_block

_8B = dict(model="llama3.1-8b", cluster="dgx-h100", num_gpus=1)


@pytest.mark.parametrize("kw", [
    dict(_8B, input_len=128, output_len=512, rate=10.0),
    dict(model="llama3.1-70b", cluster="dgx-h100", num_gpus=8, tp=4, input_len=256, output_len=512, rate=8.0),
    dict(model="llama3.1-70b", cluster="dgx-h100", prefill_gpus=4, decode_gpus=4, tp=4, input_len=1024,
         output_len=256, rate=4.0),
])
def test_steady_state_agrees_with_the_closed_form(kw):
    """Poisson arrivals well under capacity: the simulated mean TPOT and output tokens/s are within 10% of the
    closed form's server steady state at the same rate (aggregated and disaggregated)."""
    doc = simulation_block(ServeConfig(**kw), SimRequest(requests=3000))
    sim = doc["simulation"]
    assert sim["served"] == 3000 and sim["preemptions"] == 0
    assert sim["tpot_s"]["mean"] == pytest.approx(doc["tpot_s"], rel=0.10)
    assert sim["output_tokens_per_s"] == pytest.approx(doc["output_tokens_per_s"], rel=0.10)
    assert sim["ttft_s"]["p50"] <= sim["ttft_s"]["p90"] <= sim["ttft_s"]["p99"]


def test_bursty_arrivals_queue_more_than_poisson():
    """The same mean rate in bursts (gamma inter-arrivals, CV 4) waits longer: p99 TTFT and the peak of requests
    waiting grow, which the closed form's Poisson queue cannot show."""
    cfg = ServeConfig(**_8B, input_len=1024, output_len=128, rate=25.0)
    poisson = simulation_block(cfg, SimRequest(requests=4000))["simulation"]
    bursty = simulation_block(cfg, SimRequest(requests=4000, arrivals="gamma", cv=4.0))["simulation"]
    assert bursty["ttft_s"]["p99"] > 2.0 * poisson["ttft_s"]["p99"]
    assert bursty["queue"]["max"] > poisson["queue"]["max"]
    assert len(bursty["queue"]["time_s"]) == len(bursty["queue"]["waiting"]) == 400


def test_kv_preemption_and_prefix_cache():
    """A cache too small for the load preempts (recompute and swap both finish every request; swapping through
    host memory costs time); a prefix-cache hit rate shortens TTFT."""
    cfg = ServeConfig(**_8B, input_len=2048, output_len=1024, rate=40.0, kv_cache_fraction=0.3)
    rec = simulation_block(cfg, SimRequest(requests=600))["simulation"]
    swap = simulation_block(cfg, SimRequest(requests=600, preemption="swap"))["simulation"]
    assert rec["preemptions"] > 0 and swap["preemptions"] > 0
    assert rec["served"] == swap["served"] == 600
    cfg = ServeConfig(**_8B, input_len=4096, output_len=64, rate=4.0)
    cold = simulation_block(cfg, SimRequest(requests=800))["simulation"]
    warm = simulation_block(cfg, SimRequest(requests=800, prefix_hit_rate=0.75))["simulation"]
    assert warm["ttft_s"]["mean"] < 0.6 * cold["ttft_s"]["mean"]
    # offloaded to host memory, the hits are loaded back over PCIe (Gen5 x16: 3,072 tokens x 128 KiB of KV =
    # 0.4 GB, ~8 ms) first: dearer than HBM hits, cheaper than no cache
    host = simulation_block(cfg, SimRequest(requests=800, prefix_hit_rate=0.75, prefix_tier="host"))["simulation"]
    assert warm["ttft_s"]["mean"] < host["ttft_s"]["mean"] < cold["ttft_s"]["mean"]


def test_trace_files_csv_and_jsonl(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_len,output_len\n" + "".join(f"{i * 0.1},{256 + i % 7},{32 + i % 5}\n"
                                                                for i in range(300)))
    doc = simulation_block(ServeConfig(**_8B), SimRequest(trace=str(csv)))
    assert doc["simulation"]["served"] == 300 and doc["rate"] == pytest.approx(300 / 29.9)
    jl = tmp_path / "mooncake.jsonl"
    jl.write_text("".join(json.dumps({"timestamp": i * 100, "input_length": 300, "output_length": 20,
                                      "hash_ids": [1, 2]}) + "\n" for i in range(100)))
    assert simulation_block(ServeConfig(**_8B), SimRequest(trace=str(jl)))["simulation"]["served"] == 100
    azure = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:51.2016000,879,34\n")
    doc = simulation_block(ServeConfig(**_8B), SimRequest(trace=str(azure)))
    assert doc["simulation"]["served"] == 3 and doc["rate"] == pytest.approx(3 / 4.521, rel=1e-3)


@pytest.mark.parametrize("text, name, words", [
    ("arrival_s,input_len\n0,10\n", "a.csv", ["no output length column", "output_len"]),
    ("arrival_s,input_len,output_len\n0,10,5\n1,0,5\n", "b.csv", ["row 3", "column input_len"]),
    ("arrival_s,input_len,output_len\n0,10,5\n1,10,-2\n", "c.csv", ["row 3", "column output_len"]),
    ("arrival_s,input_len,output_len\n2,10,5\n1,10,5\n", "d.csv", ["row 3", "column arrival_s", "sort"]),
    ("arrival_s,input_len,output_len\n0,ten,5\n", "e.csv", ["row 2", "column input_len", "not a number"]),
    ('{"timestamp": 0, "input_length": 5}\n', "f.jsonl", ["no output length column"]),
    (b"arrival_s,input_len,output_len\n0,10,5\n1,\xff,5\n", "g.csv", ["not UTF-8", "line 3"]),
])
def test_bad_trace_is_one_line_exit_2(tmp_path, capsys, text, name, words):
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    code = main(["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1", "--simulate",
                 "--trace", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err


def test_trace_row_limit_and_flag_errors(tmp_path, capsys, monkeypatch):
    from tierwise.serve import trace

    monkeypatch.setattr(trace, "MAX_TRACE_ROWS", 3)
    path = tmp_path / "big.csv"
    path.write_text("arrival_s,input_len,output_len\n" + "0,10,5\n" * 5)
    base = ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1"]
    assert main(base + ["--simulate", "--trace", str(path)]) == 2
    assert "row 5" in capsys.readouterr().err
    for args, word in ((["--trace", str(path)], "--trace is a setting of --simulate"),
                       (["--simulate"], "needs --rate"),
                       (["--simulate", "--rate", "1", "--arrivals", "uniform"], "poisson, gamma"),
                       (["--simulate", "--rate", "1", "--prefix-hit-rate", "1.5"], "--prefix-hit-rate")):
        assert main(base + args) == 2
        err = capsys.readouterr().err
        assert word in err and len(err.strip().splitlines()) == 1, err


def test_a_prompt_longer_than_the_cache_is_refused_not_blocking(tmp_path):
    path = tmp_path / "huge.csv"
    path.write_text("arrival_s,input_len,output_len\n0,1000000,10\n1,100,5\n")
    sim = simulation_block(ServeConfig(**_8B), SimRequest(trace=str(path)))["simulation"]
    assert sim["rejected"] == 1 and sim["served"] == 1
