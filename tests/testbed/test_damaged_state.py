"""Damaged testbed state and results files (issue 32, tracebacks): one line naming the file and the field,
never a TypeError or KeyError; ``testbed check`` on intact files still predicts every row."""

from __future__ import annotations

import json

import pytest
import yaml

from tierwise.cli import main
from tierwise.testbed.check import predict_rows
from tierwise.testbed.run import cluster_mapping
from tierwise.testbed.spec import CLUSTER_FILE, RESULTS_FILE, STATE_FILE, TestbedError, load_state, parse_spec

SPEC = parse_spec(nodes=2, ranks_per_node=2, link="1 Gb/s")
PROBES = {"loopback_bytes_per_s": 5e9, "loopback_latency_s": 2e-5, "link_latency_s": 5e-5,
          "memory_bytes_per_s": 1e10}
ROW = {"op": "all-reduce", "algorithm": "gloo", "size_bytes": 1048576, "measured_s": 0.02, "layout": "contiguous"}


def _testbed(folder, state=None, rows=None):
    folder.mkdir(exist_ok=True)
    (folder / STATE_FILE).write_text(json.dumps(state if state is not None else {"spec": SPEC.to_dict()}))
    (folder / CLUSTER_FILE).write_text(yaml.safe_dump(cluster_mapping(SPEC, PROBES), sort_keys=False))
    (folder / RESULTS_FILE).write_text(json.dumps(rows if rows is not None else [ROW]))
    return folder


def test_intact_files_are_predicted(tmp_path):
    folder = _testbed(tmp_path / "tb")
    rows = predict_rows(str(folder), [ROW])
    assert rows[0]["analytic_s"] > 0 and rows[0]["simulated_s"] > 0


_SPEC = SPEC.to_dict()


@pytest.mark.parametrize(("state", "word"), [
    ({"spec": None}, "not a mapping"),
    ({"spec": [1, 2]}, "not a mapping"),
    ({"spec": {**_SPEC, "num_nodes": "two"}}, "--nodes"),
    ({"spec": {**_SPEC, "num_nodes": 10**400}}, "--nodes"),
    ({"spec": {**_SPEC, "num_nodes": None}}, "--nodes"),
    ({"spec": {**_SPEC, "ranks_per_node": -1}}, "--ranks-per-node"),
    ({"spec": {**_SPEC, "link_text": ["1 Gb/s"]}}, "--link"),
    ({"spec": {**_SPEC, "link_text": "x" * 100_000}}, "--link"),
    ({"spec": {**_SPEC, "latency_s": "soon"}}, "--latency"),
    ({"spec": {**_SPEC, "oversubscription": 0.5}}, "--oversubscription"),
    ({"spec": {**_SPEC, "name": "../../etc"}}, "--name"),
    ({"spec": {**_SPEC, "extra": 1}}, "unknown field 'extra'"),
    ({"spec": {k: v for k, v in _SPEC.items() if k != "link_text"}}, "no 'link_text'"),
])
def test_a_damaged_state_file_is_one_line(tmp_path, capsys, state, word):
    folder = _testbed(tmp_path / "tb", state=state)
    with pytest.raises(TestbedError) as err:
        load_state(str(folder))
    assert STATE_FILE in str(err.value) and "damaged" in str(err.value) and word in str(err.value)
    assert main(["testbed", "check", "--dir", str(folder)]) == 2
    out = capsys.readouterr()
    assert out.err.count("\n") == 1 and "Traceback" not in out.err and len(out.err) < 600


@pytest.mark.parametrize(("rows", "word"), [
    ({"not": "a list"}, "not a list"),
    ([1], "row 0 is not a mapping"),
    ([{**ROW, "op": "gossip"}], "op 'gossip'"),
    ([{k: v for k, v in ROW.items() if k != "measured_s"}], "measured_s missing"),
    ([ROW, {**ROW, "measured_s": "fast"}], "row 1 has measured_s"),
    ([{**ROW, "measured_s": -1.0}], "measured_s"),
    ([{**ROW, "size_bytes": 10**400}], "size_bytes"),
    ([{**ROW, "size_bytes": None}], "size_bytes"),
    ([{**ROW, "algorithm": 3}], "algorithm"),
    ([{**ROW, "layout": "spiral"}], "layout 'spiral'"),
])
def test_damaged_results_are_one_line(tmp_path, capsys, rows, word):
    folder = _testbed(tmp_path / "tb", rows=rows)
    assert main(["testbed", "check", "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and RESULTS_FILE in err and word in err
