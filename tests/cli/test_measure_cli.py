"""`tierwise measure ...` and `tierwise calibrate` in-process: outputs, the YAML schema, and bad input."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from tierwise.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-logs"
H100X32 = DATA / "h100x32_4node_ib_allreduce_nccl2.24.3_voltagepark.log"
AZURE = DATA / "azure_nd_a100v4_h100v5_h200v5_x8_1node_allreduce_busbw.tsv"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_calibrate_writes_the_cluster_schema(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(H100X32), "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert list(doc) == ["base", "name", "source", "fitted"]
    assert doc["base"] == "dgx-h100"  # no --cluster: the GPU the log names (NVIDIA H100 80GB HBM3)
    assert doc["source"].startswith("tierwise calibrate h100x32_4node")
    tier = doc["fitted"]["scale_out"]  # 32 ranks over 8-rank hosts
    assert tier["num_ranks"] == 32 and tier["ranks_per_domain"] == 8 and tier["op"] == "all-reduce"
    assert set(tier["residuals"]) == {"median_abs_pct", "max_abs_pct"}
    regimes = tier["regimes"]
    assert regimes[0]["min_bytes"] == 0 and regimes[-1]["max_bytes"] is None
    for r in regimes:
        assert set(r) == {"name", "min_bytes", "max_bytes", "latency_s", "busbw_bytes_per_s"}
    for lower, upper in zip(regimes, regimes[1:], strict=False):
        assert lower["max_bytes"] == upper["min_bytes"]  # contiguous ranges
    assert "scale_out" in capsys.readouterr().out


def test_calibrate_json_and_select_a_column_of_a_table(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(AZURE), "--select", "h100", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fitted"]["scale_up"]["num_ranks"] == 8
    assert {**yaml.safe_load(out.read_text()), "schema_version": 1, "document": "calibrate"} == doc


def test_calibrate_with_several_sweeps_on_one_tier_asks_to_select(tmp_path, capsys):
    assert main(["calibrate", str(AZURE), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "--select" in _one_error_line(capsys)


def test_calibrate_rejects_a_file_that_is_not_nccl_tests_output(tmp_path, capsys):
    bogus = tmp_path / "readme.txt"
    bogus.write_text("just some text\n1 2 3\n")
    assert main(["calibrate", str(bogus), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "no nccl-tests result rows" in _one_error_line(capsys)


def test_calibrate_rejects_an_empty_result(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["calibrate", str(empty), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "empty sweep" in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "1"], ">= 2 ranks"),
        (["--sizes", "256MiB:1KiB"], "backwards"),
        (["--sizes", ""], "empty sweep"),
        (["--sizes", "12 parsecs"], "size"),
        (["--op", "all-sum"], "unknown collective"),
        (["--rounds", "0"], "--rounds 0"),
    ],
)
def test_measure_collective_bad_input_is_one_line_exit_2(args, message, capsys):
    assert main(["measure", "collective", *args]) == 2
    assert message in _one_error_line(capsys)


def test_measure_ddp_needs_two_ranks_and_five_steps(capsys):
    assert main(["measure", "ddp", "--ranks", "1"]) == 2
    assert ">= 2 ranks" in _one_error_line(capsys)
    assert main(["measure", "ddp", "--steps", "3"]) == 2
    assert ">= 5" in _one_error_line(capsys)


@pytest.mark.parametrize("command", [["measure", "collective"], ["measure", "ddp"], ["measure", "gemm"],
                                     ["measure", "hbm"]])
def test_without_torch_measuring_commands_say_how_to_install(command, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ModuleNotFoundError
    assert main(command) == 2
    assert _one_error_line(capsys) == "error: torch is not installed; pip install 'tierwise[measure]'"


def test_gemm_and_hbm_without_a_gpu_are_one_clear_line(capsys):
    torch = pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; tests/measure/test_measure_gpu.py measures it")
    for command in ("gemm", "hbm"):
        assert main(["measure", command]) == 2
        assert "no CUDA GPU is visible" in _one_error_line(capsys)


@pytest.mark.slow
def test_measure_collective_json_and_out(tmp_path, capsys):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    out = tmp_path / "result.json"
    rc = main(["measure", "collective", "--op", "all-reduce", "--op", "all-to-all", "--sizes", "4KiB:16KiB",
               "--factor", "4", "--iters", "3", "--warmup", "1", "--ranks", "2", "--out", str(out), "--json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["op"], r["size_bytes"]) for r in rows] == [("all-reduce", 4096), ("all-reduce", 16384),
                                                         ("all-to-all", 4096), ("all-to-all", 16384)]
    for r in rows:
        assert {"size_bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"} <= set(r)
        assert r["wrong"] == 0 and r["num_ranks"] == 2 and r["time_s"] > 0
        assert r["busbw_bytes_per_s"] == pytest.approx(r["algbw_bytes_per_s"] * (1.0 if r["op"] == "all-reduce"
                                                                                  else 0.5))
    written = json.loads(out.read_text())
    assert len({r.pop("run") for r in written}) == 1  # every row in the file names this run
    assert written == rows
    # the table view is nccl-tests' layout
    assert main(["calibrate", str(out), "--out", str(tmp_path / "c.yaml")]) == 0
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["fitted"]["scale_up"]["num_ranks"] == 2


def test_calibrate_the_recorded_gloo_sweep_without_torch(tmp_path, capsys):
    recorded = Path(__file__).resolve().parents[1] / "data" / "measured" / "gloo_2ranks_loopback.json"
    out = tmp_path / "gloo.yaml"
    assert main(["calibrate", str(recorded), "--out", str(out)]) == 0
    tier = yaml.safe_load(out.read_text())["fitted"]["scale_up"]
    assert tier["num_ranks"] == 2 and tier["ranks_per_domain"] == 2 and tier["op"] == "all-reduce"
    assert "skipped gloo-reduce-scatter-2" in capsys.readouterr().out


def test_calibrate_against_a_cluster_file_takes_its_scale_up_domain(tmp_path, capsys):
    cluster = tmp_path / "rack.yaml"
    cluster.write_text("name: my-nvl72\ngpus_per_node: 4\nscale_up_domain: 72\n")
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(H100X32), "--cluster", str(cluster), "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["name"] == "calibrated-my-nvl72" and "base" not in doc
    assert doc["gpus_per_node"] == 4 and doc["scale_up_domain"] == 72  # the file's keys travel along
    tier = doc["fitted"]["scale_up"]  # 32 ranks fit in one 72-GPU domain
    assert tier["ranks_per_domain"] == 72


def test_nccl_backend_without_gpus_is_one_line(capsys):
    torch = pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    if torch.cuda.device_count() >= 2:
        pytest.skip("GPUs present")
    assert main(["measure", "collective", "--backend", "nccl", "--sizes", "1KiB:4KiB"]) == 2
    assert "needs 2 GPUs" in _one_error_line(capsys)
