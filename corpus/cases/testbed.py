"""The testbed's own values (issue 18): bad counts, rates, names and layouts fail with one line naming the
value, before any namespace is created (``allowed_new`` is empty: not even the --dir folder appears)."""

from __future__ import annotations

from corpus.harness import Case

CASES: list[Case] = []

_UP = ["testbed", "up", "--dir", "{tmp}/tb"]
for cid, extra, needle in [
    ("nodes-negative", ["--nodes", "-1"], "--nodes"),
    ("nodes-zero", ["--nodes", "0"], "--nodes"),
    ("nodes-huge", ["--nodes", "100000"], "--nodes"),
    ("ranks-zero", ["--nodes", "2", "--ranks-per-node", "0"], "--ranks-per-node"),
    ("one-rank", ["--nodes", "1", "--ranks-per-node", "1"], "one rank"),
    ("link-unit", ["--nodes", "2", "--link", "1gbit"], "gbit"),
    ("link-nan", ["--nodes", "2", "--link", "nan Gb/s"], "--link"),
    ("link-zero", ["--nodes", "2", "--link", "0 Gb/s"], "--link"),
    ("link-too-fast", ["--nodes", "2", "--link", "400 Gb/s"], "--link"),
    ("latency-negative", ["--nodes", "2", "--latency", "-5us"], "--latency"),
    ("oversub-below-one", ["--nodes", "4", "--oversubscription", "0.5"], "--oversubscription"),
    ("oversub-nan", ["--nodes", "4", "--oversubscription", "nan"], "--oversubscription"),
    ("oversub-odd-nodes", ["--nodes", "3", "--oversubscription", "2"], "even"),
    ("name-bad", ["--nodes", "2", "--name", "../x"], "--name"),
]:
    CASES.append(Case(id=f"testbed/up-{cid}", argv=[*_UP, *extra], stderr_has=[needle]))

_RUN = ["testbed", "run", "--dir", "{tmp}/tb"]
for cid, extra, needle in [
    ("op-unknown", ["--op", "all-scatter"], "all-scatter"),
    ("algorithm-unknown", ["--algorithm", "butterfly"], "butterfly"),
    ("algorithm-not-all-reduce", ["--algorithm", "ring", "--op", "broadcast"], "--algorithm"),
    ("sizes-backwards", ["--sizes", "64MiB:1KiB"], "backwards"),
    ("iters-zero", ["--iters", "0"], "--iters"),
    ("layout-unknown", ["--layout", "random"], "--layout"),
    ("no-testbed", [], "testbed up"),
]:
    CASES.append(Case(id=f"testbed/run-{cid}", argv=[*_RUN, *extra], stderr_has=[needle]))
CASES.append(Case(id="testbed/check-no-testbed", argv=["testbed", "check", "--dir", "{tmp}/none"],
                  stderr_has=["testbed up"]))
CASES.append(Case(id="testbed/down-name-bad", argv=["testbed", "down", "--name", "A B"], stderr_has=["--name"]))


# ---- issue 32: damaged state and results files (testbed check reads them without root) --------------------

def _intact():
    import json

    import yaml

    from tierwise.testbed.run import cluster_mapping
    from tierwise.testbed.spec import parse_spec

    spec = parse_spec(nodes=2, ranks_per_node=2, link="1 Gb/s")
    probes = {"loopback_bytes_per_s": 5e9, "loopback_latency_s": 2e-5, "link_latency_s": 5e-5,
              "memory_bytes_per_s": 1e10}
    return spec.to_dict(), yaml.safe_dump(cluster_mapping(spec, probes), sort_keys=False), json


_SPEC, _CLUSTER, _json = _intact()
_ROW = {"op": "all-reduce", "algorithm": "gloo", "size_bytes": 1048576, "measured_s": 0.02}
_STATES = {
    "spec-null": ('{"spec": null}', "not a mapping"),
    "spec-list": ('{"spec": [1]}', "not a mapping"),
    "not-json": ("{spec: ", "testbed.json"),
    "empty": ("", "testbed.json"),
    "binary": ("\x00\x01\x02", "testbed.json"),
    "a-list": ("[1, 2]", "not a testbed state"),
    "nodes-text": (_json.dumps({"spec": {**_SPEC, "num_nodes": "two"}}), "--nodes"),
    "nodes-huge-int": (_json.dumps({"spec": {**_SPEC, "num_nodes": 10**400}}), "--nodes"),
    "nodes-null": (_json.dumps({"spec": {**_SPEC, "num_nodes": None}}), "--nodes"),
    "ranks-negative": (_json.dumps({"spec": {**_SPEC, "ranks_per_node": -1}}), "--ranks-per-node"),
    "link-list": (_json.dumps({"spec": {**_SPEC, "link_text": ["1 Gb/s"]}}), "--link"),
    "link-100kb": (_json.dumps({"spec": {**_SPEC, "link_text": "x" * 100_000}}), "--link"),
    "latency-text": (_json.dumps({"spec": {**_SPEC, "latency_s": "soon"}}), "--latency"),
    "oversubscription-below-one": (_json.dumps({"spec": {**_SPEC, "oversubscription": 0.5}}), "--oversubscription"),
    "name-path": (_json.dumps({"spec": {**_SPEC, "name": "../../etc"}}), "--name"),
    "unknown-field": (_json.dumps({"spec": {**_SPEC, "extra": 1}}), "unknown field"),
    "missing-field": (_json.dumps({"spec": {k: v for k, v in _SPEC.items() if k != "link_text"}}), "link_text"),
}
for _name, (_state, _needle) in _STATES.items():
    CASES.append(Case(id=f"testbed/damaged-state-{_name}", argv=["testbed", "check", "--dir", "tb"],
                      files={"tb/testbed.json": _state, "tb/cluster.yaml": _CLUSTER,
                             "tb/results.json": _json.dumps([_ROW])},
                      stderr_has=[_needle], max_lines=1))

_RESULTS = {
    "not-a-list": ('{"a": 1}', "not a list"),
    "row-not-mapping": ("[1]", "row 0"),
    "op-unknown": (_json.dumps([{**_ROW, "op": "gossip"}]), "gossip"),
    "measured-missing": (_json.dumps([{k: v for k, v in _ROW.items() if k != "measured_s"}]), "measured_s"),
    "measured-text": (_json.dumps([_ROW, {**_ROW, "measured_s": "fast"}]), "row 1"),
    "measured-negative": (_json.dumps([{**_ROW, "measured_s": -1.0}]), "measured_s"),
    "size-huge-int": (_json.dumps([{**_ROW, "size_bytes": 10**400}]), "size_bytes"),
    "size-null": (_json.dumps([{**_ROW, "size_bytes": None}]), "size_bytes"),
    "algorithm-number": (_json.dumps([{**_ROW, "algorithm": 3}]), "algorithm"),
    "layout-unknown": (_json.dumps([{**_ROW, "layout": "spiral"}]), "spiral"),
    "truncated": (_json.dumps([_ROW])[:20], "results.json"),
}
for _name, (_rows, _needle) in _RESULTS.items():
    CASES.append(Case(id=f"testbed/damaged-results-{_name}", argv=["testbed", "check", "--dir", "tb"],
                      files={"tb/testbed.json": _json.dumps({"spec": _SPEC}), "tb/cluster.yaml": _CLUSTER,
                             "tb/results.json": _rows},
                      stderr_has=[_needle, "results.json"] if _needle != "results.json" else [_needle],
                      max_lines=1))
CASES.append(Case(id="testbed/damaged-cluster-file", argv=["testbed", "check", "--dir", "tb"],
                  files={"tb/testbed.json": _json.dumps({"spec": _SPEC}), "tb/cluster.yaml": "nic_bandwidth: [\n",
                         "tb/results.json": _json.dumps([_ROW])}, stderr_has=["cluster.yaml"], max_lines=1))

# ---- issue 32, hangs: a testbed run at absurd sizes is refused before any rank starts ----------------------
_TB = {"tb/testbed.json": _json.dumps({"spec": _SPEC}), "tb/cluster.yaml": _CLUSTER}
for _name, _argv, _needle in [
    ("run-buffer-1tib", ["run", "--sizes", "1GiB:1TiB"], "1 GiB"),
    ("run-years", ["run", "--sizes", "512MiB", "--iters", "100000"], "past the 30 minutes limit"),
    ("run-many-sizes", ["run", "--sizes", "1MiB:1GiB", "--factor", "1.2", "--iters", "10000"], "limit"),
    ("check-years", ["check", "--sizes", "1GiB", "--iters", "100000"], "limit"),
    ("ddp-petabytes", ["ddp", "--width", "65536", "--layers", "1024"], "--width 65536"),
]:
    CASES.append(Case(id=f"testbed/absurd-{_name}", argv=["testbed", *_argv, "--dir", "tb"],
                      files=dict(_TB), stderr_has=[_needle], max_lines=1, timeout_s=20.0))
