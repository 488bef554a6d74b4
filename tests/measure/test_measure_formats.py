"""Formats users already have: nccl-tests -J (JSON), -S (timestamps), -I (per-iteration columns), and
`tierwise measure collective`'s own printed table; calibrate without --cluster writes a loadable cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tierwise.errors import MeasureError
from tierwise.measure.calibrate import DEFAULT_BASE, calibrate, cluster_for_device, load_sweeps
from tierwise.measure.nccl_log import parse_nccl_log, parse_nccl_text

DATA = Path(__file__).resolve().parents[1] / "data"
LOGS = DATA / "nccl-logs"
PLAIN = LOGS / "h100x8_1node_nvswitch_allreduce_nccl2.24.3_voltagepark.log"
FORMATS = {
    "J": LOGS / "h100x8_1node_allreduce_nccl-tests_J.json",
    "S": LOGS / "h100x8_1node_allreduce_nccl-tests_S_timestamps.log",
    "I": LOGS / "h100x8_1node_allreduce_nccl-tests_I_per_iter.log",
}


@pytest.fixture(scope="module")
def plain():
    (sweep,) = parse_nccl_log(PLAIN)
    return [r for r in sweep.rows if r.size_bytes <= 64 * 2**20]


@pytest.mark.parametrize("flag", sorted(FORMATS))
def test_each_nccl_tests_format_reads_the_same_rows_as_the_plain_log(flag, plain):
    (sweep,) = load_sweeps(FORMATS[flag])
    assert sweep.op == "all-reduce" and sweep.num_ranks == 8 and sweep.ranks_per_node == 8
    assert sweep.nccl_version == "2.24.3" and sweep.device == "NVIDIA H100 80GB HBM3"
    assert [r.size_bytes for r in sweep.rows] == [r.size_bytes for r in plain] == [8 * 2**i for i in range(24)]
    for got, want in zip(sweep.rows, plain, strict=True):
        assert got.time_s == pytest.approx(want.time_s, rel=1e-9)
        assert got.busbw_bytes_per_s == pytest.approx(want.busbw_bytes_per_s, rel=1e-9)
        assert got.in_place_time_s == pytest.approx(want.in_place_time_s, rel=1e-9)
        assert got.wrong == 0 and got.in_place_wrong == 0


def test_timestamps_are_kept():
    (sweep,) = load_sweeps(FORMATS["S"])
    assert sweep.rows[0].timestamp == "2026-11-30 14:02:10" and sweep.rows[-1].timestamp == "2026-11-30 14:02:33"


def test_per_iteration_columns_are_read_not_mistaken_for_in_place():
    (sweep,) = load_sweeps(FORMATS["I"])
    big = sweep.rows[-1]  # 64 MiB: time 328.56 us, in-place 328.70 us
    assert big.time_s == pytest.approx(328.56e-6) and big.in_place_time_s == pytest.approx(328.70e-6)
    assert big.iter_min_s == pytest.approx(328.56e-6 * 0.97, rel=1e-3)
    assert big.iter_max_s == pytest.approx(328.56e-6 * 1.12, rel=1e-3)
    assert big.iter_p99_s == pytest.approx(328.56e-6 * 1.08, rel=1e-3) and big.iter_cv_pct == 2.5


def test_per_iteration_rows_without_their_header_still_parse():
    text = "\n".join(line for line in FORMATS["I"].read_text().splitlines() if not line.startswith("#"))
    (sweep,) = parse_nccl_text(text, "all_reduce.log", num_ranks=8)
    assert len(sweep.rows) == 24 and sweep.rows[-1].iter_cv_pct == 2.5


def test_json_with_multiple_processes_counts_ranks_and_hosts():
    doc = json.loads(FORMATS["J"].read_text())
    doc["config"]["ngpus"] = 1  # -g 1 under MPI: one devices entry per process
    doc["config"]["devices"] = [{"rank": i, "hostname": f"n{i // 4}", "device_info": "NVIDIA H200"}
                                for i in range(16)]
    (sweep,) = parse_nccl_text(json.dumps(doc), "x.json")
    assert sweep.num_ranks == 16 and sweep.ranks_per_node == 4 and sweep.device == "NVIDIA H200"


def test_json_nan_and_cpu_time():
    doc = json.loads(FORMATS["J"].read_text())
    for item in doc["results"]:
        item["out_of_place"]["cpu_time"] = item["out_of_place"].pop("time")
        item["in_place"]["bus_bw"] = "nan"
    (sweep,) = parse_nccl_text(json.dumps(doc), "x.json")
    assert sweep.rows[-1].time_s == pytest.approx(328.56e-6)
    assert sweep.rows[-1].in_place_busbw_bytes_per_s is None


@pytest.mark.parametrize("text, needle", [
    ('{"version": 2, "results": [{"size": 8, "out_of', "malformed JSON"),
    ('{"version": 2, "results": {}}', "not a list"),
    ('{"version": 2, "results": []}', "no results"),
    ('{"version": 2, "results": [3]}', "not an object"),
    ('{"version": 2, "results": [{"size": "big", "out_of_place": {"time": 1}}]}', "size"),
    ('{"version": 2, "results": [{"size": 8}]}', "neither out_of_place nor in_place"),
    ('{"version": 2, "results": [{"size": 8, "out_of_place": {"time": "fast"}}]}', "not a number"),
    ('{"version": 2, "results": [{"size": 8, "out_of_place": {"time": "nan"}}]}', "no usable time"),
])
def test_malformed_json_documents_are_one_clear_error(text, needle):
    with pytest.raises(MeasureError, match=needle):
        parse_nccl_text(text, "all_reduce.json", num_ranks=8)


def test_the_measure_table_reads_back_without_op():
    text = (DATA / "measured" / "gloo_2ranks_loopback_table.txt").read_text()
    sweeps = {s.op: s for s in parse_nccl_text(text, "measured.txt")}
    rows = json.loads((DATA / "measured" / "gloo_2ranks_loopback.json").read_text())
    assert sorted(sweeps) == sorted({r["op"] for r in rows})
    for op, sweep in sweeps.items():
        mine = [r for r in rows if r["op"] == op]
        assert sweep.num_ranks == 2 and sweep.backend == "gloo" and sweep.ranks_per_node == 2
        assert [r.size_bytes for r in sweep.rows] == [r["size_bytes"] for r in mine]
        for got, want in zip(sweep.rows, mine, strict=True):
            assert got.time_s == pytest.approx(want["time_s"], abs=0.051e-6)  # printed to 0.1 us
    assert "not fitted" in sweeps["reduce-scatter"].notes[0]


def test_calibrate_reads_the_measure_table_and_writes_a_loadable_cluster(tmp_path):
    from tierwise.specs.cluster import load_cluster

    result = calibrate([str(DATA / "measured" / "gloo_2ranks_loopback_table.txt")])
    doc = result.document
    assert doc["base"] == DEFAULT_BASE and "no GPU named" in result.base_note
    tier = doc["fitted"]["scale_up"]
    assert tier["num_ranks"] == 2 and tier["op"] == "all-reduce" and tier["model"] == "host-copy"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert load_cluster(str(path)).fitted["scale_up"].num_ranks == 2


@pytest.mark.parametrize("name, cluster", [
    ("NVIDIA H100 80GB HBM3", "dgx-h100"), ("NVIDIA H200", "hgx-h200"), ("NVIDIA A100-SXM4-40GB", "dgx-a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "dgx-a100"), ("NVIDIA GB200", "gb200-nvl72"), ("NVIDIA B200", "dgx-b200"),
    ("AMD Instinct MI300X", "mi300x-8"), ("Tesla V100-SXM2-32GB", None),
])
def test_cluster_for_device(name, cluster):
    assert cluster_for_device(name) == cluster


@pytest.mark.parametrize("log", [PLAIN.name, "a100x8_1node_nvswitch_allreduce_stas00_reformatted.txt",
                                 FORMATS["J"].name])
def test_calibrate_without_cluster_writes_a_file_every_command_accepts(tmp_path, capsys, log):
    from tierwise.cli import main

    out = tmp_path / "c.yaml"
    assert main(["calibrate", str(LOGS / log), "--out", str(out)]) == 0
    assert "note: no --cluster" in capsys.readouterr().out
    assert main(["tiers", str(out)]) == 0
    assert main(["plan", "--model", "llama3.1-8b", "--cluster", str(out), "--gpus", "8", "--json"]) == 0
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"model": "llama3.1-8b", "cluster": "c.yaml", "num_gpus": 8,
                                        "plan": {"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 64,
                                                 "seq_length": 4096}}))
    assert main(["estimate", str(scenario), "--json"]) == 0
    capsys.readouterr()
