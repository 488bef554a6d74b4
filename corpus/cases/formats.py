"""Class 6, formats users already have: nccl-tests -J / -S / -I output and tierwise's own table, read by
``calibrate`` without --op; and the malformed versions of each (one line, exit 2, no file written).

The well-formed fixtures calibrate (exit 0) and the file written loads as a cluster (``calibrate`` without
``--cluster`` writes a file every command accepts).
"""

from __future__ import annotations

import json
from pathlib import Path

from corpus.harness import Case, Result

_DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
_J = (_DATA / "nccl-logs" / "h100x8_1node_allreduce_nccl-tests_J.json").read_text()
_S = (_DATA / "nccl-logs" / "h100x8_1node_allreduce_nccl-tests_S_timestamps.log").read_text()
_I = (_DATA / "nccl-logs" / "h100x8_1node_allreduce_nccl-tests_I_per_iter.log").read_text()
_TABLE = (_DATA / "measured" / "gloo_2ranks_loopback_table.txt").read_text()
_DOC = json.loads(_J)


def _doc(**changes) -> str:
    doc = json.loads(_J)
    doc.update(changes)
    return json.dumps(doc)


def _first_result(**changes) -> str:
    doc = json.loads(_J)
    doc["results"][0].update(changes)
    return json.dumps(doc)


def _loads_as_cluster(result: Result) -> None:
    import yaml

    from tierwise.specs.cluster import load_cluster

    path = result.cwd / "c.yaml"
    doc = yaml.safe_load(path.read_text())
    cluster = load_cluster(str(path))
    assert "base" in doc and cluster.fitted, doc


def _ok(name: str, content: str, extra: tuple[str, ...] = ()) -> Case:
    return Case(id=f"formats/calibrate-{name}-loads", argv=["calibrate", f"in.{name}", *extra, "--out", "c.yaml"],
                files={f"in.{name}": content}, exit_code=0, max_lines=0, allowed_new=["c.yaml"],
                check=_loads_as_cluster)


CASES = [
    # the formats, well formed: calibrate without --op, --ranks or --cluster writes a loadable cluster
    _ok("json", _J), _ok("timestamps", _S), _ok("periter", _I), _ok("table", _TABLE),
    Case(id="formats/tiers-accepts-calibrated-file", argv=["tiers", "c.yaml"],
         files={"c.yaml": "base: dgx-h100\nname: calibrated\nfitted:\n  scale_up:\n    num_ranks: 8\n"
                          "    ranks_per_domain: 8\n    op: all-reduce\n    regimes:\n    - {name: all, min_bytes: 0,"
                          " max_bytes: null, latency_s: 3.0e-05, busbw_bytes_per_s: 3.0e+11}\n"},
         exit_code=0, max_lines=0),
]

_BAD = {
    # nccl-tests -J documents, broken
    "json-truncated": (_J[: len(_J) // 2], ["malformed JSON"]),
    "json-truncated-at-start": ('{"version":2,"start_time":"2026-', ["malformed JSON"]),
    "json-empty-object": ("{}", ["in.x"]),
    "json-results-not-a-list": (_doc(results={"size": 8}), ["not a list"]),
    "json-results-empty": (_doc(results=[]), ["no results"]),
    "json-result-is-a-number": (_doc(results=[1, 2, 3]), ["not an object"]),
    "json-size-is-text": (_first_result(size="eight"), ["size"]),
    "json-size-negative": (_first_result(size=-8), ["size"]),
    "json-size-fractional": (_first_result(size=8.5), ["size"]),
    "json-size-huge": (_first_result(size=10**400), ["size"]),
    "json-size-1e400": (_J.replace('"size":8,', '"size":1e400,', 1), ["size"]),
    "json-no-timings": (_first_result(out_of_place=None, in_place=None), ["neither out_of_place nor in_place"]),
    "json-time-is-text": (_first_result(out_of_place={"time": "fast"}), ["not a number"]),
    "json-time-nan": (_first_result(out_of_place={"time": "nan", "alg_bw": 0, "bus_bw": 0}), ["no usable time"]),
    "json-time-zero": (_first_result(out_of_place={"time": 0}), ["no usable time"]),
    "json-time-negative": (_first_result(out_of_place={"time": -3.0}), ["no usable time"]),
    "json-time-bool": (_first_result(out_of_place={"time": True}), ["not a number"]),
    "json-bus-bw-text": (_first_result(out_of_place={"time": 1.0, "bus_bw": "wide"}), ["not a number"]),
    "json-deeply-nested": ("[" * 100_000 + "]" * 100_000, ["JSON"]),
    "json-huge-integer": ('{"results": [{"size": ' + "9" * 5000 + "}]}", ["JSON"]),
    "json-unknown-program": (_doc(args=["./hypercube_perf"]), ["in.x"]),
    "json-one-rank": (_doc(config={"nthreads": 1, "ngpus": 1, "devices": [{"hostname": "h"}]},
                           results=[{"size": 8 << i, "out_of_place": {"time": 3.0 + i, "alg_bw": 1.0, "bus_bw": 0}}
                                    for i in range(4)]), ["--ranks"]),
    "json-list-of-numbers": ("[1, 2, 3]", ["row 0"]),
    "json-list-of-lists": ("[[1], [2]]", ["row 0"]),
    "json-rows-unhashable-note": (json.dumps([{"op": "all-reduce", "num_ranks": 2, "note": {"a": [1]},
                                               "ranks_per_node": [2], "size_bytes": 8, "time_s": 1e-5}]),
                                   ["ranks_per_node"]),
    "json-rows-time-nan": (json.dumps([{"op": "all-reduce", "num_ranks": 2, "size_bytes": 8, "time_s": "nan"}]),
                           ["time_s"]),
    "json-rows-time-huge": ('[{"op": "all-reduce", "num_ranks": 2, "size_bytes": 8, "time_s": 1' + "0" * 400 + "}]",
                            ["time_s"]),
    "json-rows-size-text": (json.dumps([{"op": "all-reduce", "num_ranks": 2, "size_bytes": "big", "time_s": 1e-5},
                                        {"op": "all-reduce", "num_ranks": 2, "size_bytes": 8, "time_s": 1e-5}]),
                            ["size"]),
    "json-rows-one-rank": (json.dumps([{"op": "all-reduce", "num_ranks": 1, "size_bytes": 8, "time_s": 1e-5}]),
                           ["num_ranks"]),
    # -S and -I text, broken
    "timestamps-only": ("\n".join(f"2026-11-30 14:02:{s:02d}" for s in range(10, 40)), ["no nccl-tests result rows"]),
    "header-only": ("\n".join(line for line in _S.splitlines() if line.startswith("#")), ["no nccl-tests result"]),
    "timestamp-instead-of-time": ("           8             2     float     sum      -1  2026-11-30 14:02:10\n",
                                  ["no nccl-tests result rows"]),
    "periter-short-rows": ("\n".join(" ".join(line.split()[:17]) if not line.startswith("#") else line
                                     for line in _I.splitlines()), ["no nccl-tests result rows"]),
    "periter-time-na": (_I.replace("       8             2     float     sum      -1    33.18",
                                   "       8             2     float     sum      -1      N/A", 1), ["no time"]),
    "binary": (b"\x00\x01\x02\xff\xfe" * 400, ["binary file", "in.x"]),
    "empty": ("", ["no nccl-tests result rows"]),
    "nul-bytes-in-rows": (_S.replace("float", "fl\x00at"), ["NUL byte", "binary file"]),
    # tierwise measure collective's table, broken
    "table-header-only": ("# tierwise measure collective: all-reduce, 2 ranks, backend gloo, 20 iters (in-place)\n",
                          ["no result rows"]),
    "table-unknown-op": (_TABLE.replace("collective: all-reduce,", "collective: all-sum,"), ["all-sum"]),
    "table-one-rank": (_TABLE.replace("2 ranks", "1 ranks"), ["--ranks"]),
}

for _name, (_content, _needles) in _BAD.items():
    CASES.append(Case(id=f"formats/calibrate-{_name}", argv=["calibrate", "in.x", "--out", "c.yaml"],
                      files={"in.x": _content}, stderr_has=["in.x", *_needles] if "in.x" not in _needles
                      else _needles, max_lines=1))
