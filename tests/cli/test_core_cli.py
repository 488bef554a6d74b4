"""Every core command in-process with --json, and bad input: one line, exit code 2, no traceback."""

import json
import textwrap

import pytest

from tierwise.cli import main


def run_json(capsys, *args):
    rc = main([*args, "--json"])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def estimate_json(capsys, *args):
    """The one result of ``estimate --json`` on one file (the document holds a list of results)."""
    doc = run_json(capsys, "estimate", *args)
    assert doc["document"] == "estimate" and len(doc["results"]) == 1
    return doc["results"][0]


def write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


SCENARIO = """
model: llama3.1-70b
cluster: dgx-h100
num_gpus: 64
plan: {tp: 8, pp: 2, global_batch_size: 128, seq_length: 4096, recompute: selective}
"""


def test_catalog_list_and_show(capsys):
    data = run_json(capsys, "catalog", "list")
    kinds = ("accelerators", "clusters", "models", "network")
    names = {k: [r["name"] for r in data[k]] for k in kinds}
    for needed in ("a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "gb200", "gb300", "mi300x", "mi325x", "mi355x",
                   "tpu-v5p", "gaudi3", "trainium2", "a100-sxm-40gb", "h800", "b300"):
        assert needed in names["accelerators"]
    for needed in ("dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72", "gb300-nvl72", "mi300x-8"):
        assert needed in names["clusters"]
    assert all(row["source"] for k in kinds for row in data[k])
    show = run_json(capsys, "catalog", "show", "dgx-h100")
    assert show["kind"] == "clusters" and show["source"]


def test_tiers_json(capsys):
    rows = run_json(capsys, "tiers", "dgx-h100")["tiers"]
    assert [r["name"] for r in rows] == ["hbm", "scale_up", "host", "scale_out"]
    for key in ("name", "datasheet_bytes_per_s", "bytes_per_s", "latency_s", "ratio_to_hbm", "datasheet_ratio_to_hbm"):
        assert key in rows[0]
    up = rows[1]
    assert up["datasheet_bytes_per_s"] == 900e9 and up["bytes_per_s"] == 450e9


def test_collective_json(capsys):
    data = run_json(capsys, "collective", "all-reduce", "--size", "1GiB", "--ranks", "16")
    for key in ("bytes_per_rank", "time_s", "datasheet_time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "algorithm",
                "wire_bytes_per_tier"):
        assert key in data
    assert data["busbw_bytes_per_s"] == pytest.approx(data["algbw_bytes_per_s"] * 2 * 15 / 16)
    odd = run_json(capsys, "collective", "all-gather", "--size", "256MB", "--ranks", "12", "--cluster", "dgx-a100")
    assert odd["time_s"] > 0
    sr = run_json(capsys, "collective", "send-recv", "--size", "64MB", "--ranks", "2", "--ranks-per-node", "1")
    assert sr["tier"] == "scale_out"


def test_estimate_json(capsys, tmp_path):
    data = estimate_json(capsys, write(tmp_path, SCENARIO))
    for key in ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
                "mfu", "hfu", "scaling_efficiency", "assumed", "memory", "breakdown", "tiers"):
        assert key in data
    for key in ("per_gpu_bytes", "capacity_bytes", "fits"):
        assert key in data["memory"]
    for key in ("compute_s", "bubble_s", "exposed_comm_s", "per_tier", "per_axis"):
        assert key in data["breakdown"]
    assert data["tiers"]["tp"] == "scale_up"
    assert any(a.startswith("dp=") for a in data["assumed"])


def test_estimate_shows_zero3_buffer_copies_only_for_zero3(capsys, tmp_path, cli_error):
    fsdp = SCENARIO.replace("tp: 8, pp: 2", "tp: 1, pp: 1, zero_stage: 3, zero3_gather: per-parameter")
    data = estimate_json(capsys, write(tmp_path, fsdp))
    assert data["breakdown"]["shard_copy_s"] > 0
    assert main(["estimate", write(tmp_path, fsdp, "t.yaml")]) == 0
    assert "ZeRO-3 buffer copies" in capsys.readouterr().out
    assert estimate_json(capsys, write(tmp_path, SCENARIO))["breakdown"]["shard_copy_s"] == 0
    assert main(["estimate", write(tmp_path, SCENARIO, "u.yaml")]) == 0
    assert "ZeRO-3 buffer copies" not in capsys.readouterr().out
    line = cli_error(["estimate", write(tmp_path, fsdp.replace("per-parameter", "fsdp2"), "bad.yaml")])
    assert "zero3_gather='fsdp2'" in line and "per-parameter" in line


def test_estimate_many_files_keeps_going_past_an_error(capsys, tmp_path):
    good = write(tmp_path, SCENARIO, "good.yaml")
    bad = write(tmp_path, SCENARIO.replace("tp: 8", "tp: 3").replace("num_gpus: 64", "num_gpus: 48"), "bad.yaml")
    rc = main(["estimate", good, bad, good, "--json"])
    docs = json.loads(capsys.readouterr().out)["results"]
    assert rc == 2
    assert [("error" in d) for d in docs] == [False, True, False]
    assert "tp=3" in docs[1]["error"]


def test_example_scenarios_run(capsys):
    import pathlib

    for path in sorted(pathlib.Path(__file__).parents[2].joinpath("examples").glob("*.yaml")):
        assert estimate_json(capsys, str(path))["step_time_s"] > 0


def test_inline_model_and_cluster_override(capsys, tmp_path):
    text = """
    model: {name: tiny, num_layers: 4, hidden_size: 1024, ffn_hidden_size: 4096, num_attention_heads: 8,
            vocab_size: 32000, gated_mlp: true}
    cluster: {base: dgx-h100, nic_bandwidth: "200 Gb/s", nics_per_node: 4}
    num_gpus: 16
    plan: {global_batch_size: 32, seq_length: 2048}
    """
    data = estimate_json(capsys, write(tmp_path, text))
    assert data["cluster"].startswith("dgx-h100")


@pytest.mark.parametrize(("args", "needle"), [
    (["catalog", "show", "h100"], "did you mean"),
    (["tiers", "dgx-h10"], "did you mean 'dgx-h100'"),
    (["collective", "all-reduce", "--size", "-1GB", "--ranks", "8"], "-1GB"),
    (["collective", "all-reduce", "--size", "16 GX", "--ranks", "8"], "16 GX"),
    (["collective", "all-reduce", "--size", "16GB", "--ranks", "8", "--link-bandwidth", "400 Gbs"], "b/s"),
    (["collective", "al-reduce", "--size", "16GB", "--ranks", "8"], "all-reduce"),
    (["collective", "all-gather", "--size", "1GB", "--ranks", "8", "--algorithm", "tree"], "tree"),
])
def test_bad_command_line_input(cli_error, args, needle):
    assert needle in cli_error(args)


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda s: s.replace("model: llama3.1-70b", "model: llama3-70b"), "did you mean"),
    (lambda s: s.replace("pp: 2,", "pp: 2, dp: 5,"), "num_gpus=64"),
    (lambda s: s.replace("tp: 8", "tp: 3").replace("num_gpus: 64", "num_gpus: 48"),
     "tp=3 does not divide num_attention_heads=64"),
    (lambda s: s.replace("num_gpus: 64", "num_gpus: 256").replace("pp: 2", "pp: 128, tp: 2").replace("tp: 8, ", ""),
     "pp=128 is larger than num_layers=80"),
    (lambda s: s.replace("global_batch_size: 128", "global_batch_size: 130"), "global_batch_size=130"),
    (lambda s: s.replace("recompute: selective", "recompute: selective, flavour: x"), "unknown key 'flavour'"),
    (lambda s: s.replace("num_gpus: 64", "num_gpus: -64"), "num_gpus=-64"),
    (lambda s: s.replace("plan: {", "plan: {{"), "line"),
    (lambda s: s.replace("cluster: dgx-h100", "cluster: {base: dgx-h100, nic_bandwidth: '400 Gbs'}"), "400 Gbs"),
])
def test_bad_scenarios(cli_error, tmp_path, edit, needle):
    message = cli_error(["estimate", write(tmp_path, edit(SCENARIO))])
    assert needle in message


def test_moe_degree_errors(cli_error, tmp_path):
    text = """
    model: mixtral-8x7b
    cluster: dgx-h100
    num_gpus: 64
    plan: {tp: 2, ep: 3, global_batch_size: 128, seq_length: 4096}
    """
    assert "ep=3 does not divide num_experts=8" in cli_error(["estimate", write(tmp_path, text)])
    text2 = text.replace("tp: 2, ep: 3", "tp: 8, ep: 8, etp: 8, cp: 1, pp: 8")
    assert "etp x ep" in cli_error(["estimate", write(tmp_path, text2)])


def test_missing_file(cli_error):
    assert "does not exist" in cli_error(["estimate", "/nonexistent/s.yaml"])


def test_help_is_fast():
    import subprocess
    import sys
    import time

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tierwise", "--help"], check=True, capture_output=True)
    assert time.perf_counter() - t0 < 5  # generous bound for a shared CI box; the benchmark prints the figure
