"""``tierwise sweep run`` / ``sweep show`` and the new ``--html`` pages (issue 19): bad grids, shards, worker
counts, results directories and queries, all one line, exit 2, before any work, nothing left behind."""

from __future__ import annotations

import io

from corpus.harness import Case

GOOD = "kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: [16]\nplan: {tp: 8}\n"
_RUN = ["sweep", "run", "grid.yaml", "--out", "{tmp}/res"]


def _parquet() -> bytes:
    """A one-row part file, as 'sweep run' writes them (the columns 'show' needs)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # the corpus still imports without the sweep extra; these cases then fail loudly
        return b""
    buf = io.BytesIO()
    pq.write_table(pa.table({"point_id": ["0123456789abcdef"], "kind": ["estimate"], "status": ["ok"],
                             "wall_s": [0.1]}), buf)
    return buf.getvalue()


_GRIDS = {
    "unknown-model": (GOOD.replace("llama3.1-8b", "llama9-1t"), ["llama9-1t"]),
    "unknown-cluster": (GOOD.replace("dgx-h100", "dgx-z900"), ["dgx-z900"]),
    "unknown-kind": (GOOD.replace("estimate", "estimat"), ["estimat", "did you mean"]),
    "unknown-key": (GOOD + "gpu: 8\n", ["'gpu'"]),
    "missing-key": ("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: 16\n", ["'plan'"]),
    "empty-list": (GOOD.replace("[16]", "[]"), ["'gpus'", "empty"]),
    "gpus-zero": (GOOD.replace("[16]", "[0]"), ["gpus"]),
    "gpus-huge": (GOOD.replace("[16]", "[10000000000]"), ["gpus"]),
    "gpus-text": (GOOD.replace("[16]", "[many]"), ["gpus"]),
    "no-kind": ("model: llama3.1-8b\n", ["kind"]),
    "studies-not-list": ("studies: 3\n", ["studies"]),
    "study-not-mapping": ("studies: [3]\n", ["study 1"]),
    "bad-cluster-mapping": (GOOD.replace("cluster: dgx-h100", "cluster: {bse: dgx-h100}"), ["bse"]),
    "bad-objective": ("kind: plan\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: 8\nobjective: fastest\n",
                      ["fastest"]),
    "bad-topology": ("kind: simulate\ntopology: {family: fat-tre, gpus: 64}\npattern: all-reduce\n", ["fat-tre"]),
    "bad-pattern": ("kind: simulate\ntopology: fat-tree\npattern: gossip\n", ["gossip"]),
    "bad-size": ("kind: simulate\ntopology: fat-tree\npattern: all-reduce\nsize: lots\n", ["lots"]),
    "too-many-points": ("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\nplan: {tp: 8}\ngpus: ["
                        + ", ".join(str(8 * (i + 1)) for i in range(1001)) + "]\nglobal_batch: ["
                        + ", ".join(str(i + 1) for i in range(1000)) + "]\n", ["1,000,000"]),
}

CASES: list[Case] = []
for _name, (_text, _needles) in _GRIDS.items():
    CASES.append(Case(id=f"sweep/grid-{_name}", argv=_RUN, files={"grid.yaml": _text}, stderr_has=_needles,
                      max_lines=1, timeout_s=20.0))

for _name, (_argv, _needles) in {
    "shard-past-count": (["--shard", "3/2"], ["--shard", "3/2"]),
    "shard-zero": (["--shard", "0/2"], ["--shard"]),
    "shard-of-zero": (["--shard", "1/0"], ["--shard"]),
    "shard-text": (["--shard", "half"], ["--shard", "i/N"]),
    "workers-zero": (["--workers", "0"], ["--workers"]),
    "workers-negative": (["--workers", "-3"], ["--workers"]),
    "workers-huge": (["--workers", "100000"], ["--workers"]),
    "batch-size-zero": (["--batch-size", "0"], ["--batch-size"]),
    "executor-unknown": (["--executor", "slurm"], ["slurm", "local or ray"]),
}.items():
    CASES.append(Case(id=f"sweep/run-{_name}", argv=[*_RUN, *_argv], files={"grid.yaml": GOOD}, stderr_has=_needles,
                      max_lines=1, timeout_s=20.0))

for _name, (_out, _files, _needles) in {
    "out-is-a-file": ("{tmp}/afile", {"afile": "x\n"}, ["--out", "is a file"]),
    "out-parent-missing": ("{tmp}/nope/res", {}, ["--out", "does not exist"]),
    "out-parent-is-a-file": ("{tmp}/afile/res", {"afile": "x\n"}, ["--out", "not a directory"]),
    "out-dev-null": ("/dev/null", {}, ["--out", "not a directory"]),
    "out-proc": ("/proc/tierwise-sweep", {}, ["--out"]),
    "grid-missing": (None, {}, ["grid.yaml"]),
    "grid-is-a-directory": (None, {"grid.yaml/": ""}, ["directory"]),
}.items():
    files = {"grid.yaml": GOOD, **_files} if "grid" not in _name else dict(_files)
    CASES.append(Case(id=f"sweep/run-{_name}", argv=["sweep", "run", "grid.yaml", "--out", _out or "{tmp}/res"],
                      files=files, stderr_has=_needles, max_lines=1, timeout_s=20.0))

_PART = {"res/part-x.parquet": _parquet()}
for _name, (_argv, _files, _needles) in {
    "missing-dir": (["sweep", "show", "{tmp}/nope"], {}, ["nope", "does not exist"]),
    "dir-is-a-file": (["sweep", "show", "{tmp}/afile"], {"afile": "x\n"}, ["is a file"]),
    "empty-dir": (["sweep", "show", "{tmp}/res"], {"res/": ""}, ["no results"]),
    "bad-sql": (["sweep", "show", "{tmp}/res", "--query", "SELEC * FROM results"], _PART, ["--query", "SELEC"]),
    "unknown-column": (["sweep", "show", "{tmp}/res", "--query", "SELECT nope FROM results"], _PART, ["nope"]),
    "damaged-part": (["sweep", "show", "{tmp}/res"], {"res/part-x.parquet": b"PAR1 not really parquet"},
                     ["cannot be read"]),
    "damaged-part-on-resume": (["sweep", "run", "grid.yaml", "--out", "{tmp}/res"],
                               {"grid.yaml": GOOD, "res/part-x.parquet": b"PAR1 not really"}, ["part-x.parquet"]),
    "html-into-missing-dir": (["sweep", "show", "{tmp}/res", "--html", "{tmp}/nope/x.html"], _PART, ["--html"]),
}.items():
    CASES.append(Case(id=f"sweep/show-{_name}", argv=_argv, files=_files, stderr_has=_needles, max_lines=1,
                      timeout_s=20.0, allowed_new=(["res/.lock-shard-1-of-1"] if "resume" in _name else [])))

# the new --html pages: into a place that cannot take the file, refused before the work
_PAGES = {
    "plan": ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "scale": ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16"],
    "simulate": ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"],
}
for _page, _argv in _PAGES.items():
    for _place, (_target, _files, _needles) in {
        "missing-parent": ("{tmp}/nope/x.html", {}, ["does not exist"]),
        "onto-a-directory": ("{tmp}/adir", {"adir/": ""}, ["is a directory"]),
        "dev-full": ("/dev/full", {}, ["/dev/full"]),
    }.items():
        CASES.append(Case(id=f"sweep/html-{_page}-{_place}", argv=[*_argv, "--html", _target], files=_files,
                          stderr_has=["--html", *_needles], max_lines=1, timeout_s=20.0))


# ---- issue 32: the user's SQL is read-only and bounded -----------------------------------------------------

def _part_unchanged(result) -> None:
    assert (result.cwd / "res" / "part-x.parquet").read_bytes() == _PART["res/part-x.parquet"], "a part changed"


_SHOW = ["sweep", "show", "{tmp}/res", "--query"]
for _name, (_sql, _needles) in {
    "copy-to-a-file": ("COPY (SELECT 1) TO 'x.csv'", ["COPY", "read-only"]),
    "copy-over-a-part": ("COPY (SELECT 'zz' AS point_id) TO '{tmp}/res/part-x.parquet' (FORMAT parquet, "
                         "USE_TMP_FILE false)", ["COPY"]),
    "copy-into-results-folder": ("COPY (SELECT 1) TO '{tmp}/res/part-evil.parquet' (FORMAT parquet)", ["COPY"]),
    "attach": ("ATTACH '{tmp}/res/new.db' AS n", ["ATTACH"]),
    "attach-memory": ("ATTACH ':memory:' AS m", ["ATTACH"]),
    "install": ("INSTALL httpfs", ["INSTALL"]),
    "load": ("LOAD httpfs", ["LOAD"]),
    "force-install": ("FORCE INSTALL spatial", ["INSTALL"]),
    "set-external-access": ("SET enable_external_access = true", ["SET"]),
    "pragma": ("PRAGMA enable_profiling", ["PRAGMA"]),
    "export": ("EXPORT DATABASE '{tmp}/dump'", ["EXPORT"]),
    "create-table": ("CREATE TABLE t AS SELECT * FROM results", ["CREATE"]),
    "create-secret": ("CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", ["CREATE"]),
    "two-statements": ("SELECT 1; COPY (SELECT 1) TO 'y.csv'", ["2 statements"]),
    "drop-view": ("DROP VIEW results", ["DROP"]),
    "read-etc-passwd": ("SELECT * FROM read_csv('/etc/passwd')", ["--query"]),
    "read-text": ("SELECT * FROM read_text('/etc/hostname')", ["--query"]),
    "glob": ("SELECT * FROM glob('/*')", ["--query"]),
    "read-parquet-elsewhere": ("SELECT * FROM read_parquet('/proc/self/environ')", ["--query"]),
    "huge-query-text": ("SELECT '" + "x" * 100_000 + "' AS y FROM nope", ["--query"]),
    "empty": (" ", ["--query"]),
}.items():
    CASES.append(Case(id=f"sweep/sql-{_name}", argv=[*_SHOW, _sql], files=dict(_PART), stderr_has=_needles,
                      max_lines=1, timeout_s=20.0, check=_part_unchanged))

CASES += [
    Case(id="sweep/sql-long-query-stops", argv=[*_SHOW, "SELECT count(*) FROM range(100000000000) a, range(9) b",
                                                 "--timeout", "1"], files=dict(_PART),
         stderr_has=["ran past 1 s", "LIMIT"], max_lines=1, timeout_s=20.0),
    Case(id="sweep/sql-timeout-zero", argv=[*_SHOW, "SELECT 1", "--timeout", "0"], files=dict(_PART),
         stderr_has=["--timeout"], max_lines=1, timeout_s=20.0),
    Case(id="sweep/sql-huge-cell-is-cut", argv=[*_SHOW, "SELECT repeat('x', 200000000) AS big", "--json"],
         files=dict(_PART), exit_code=0, timeout_s=30.0,
         check=lambda r: __import__("json").loads(r.stdout)["query"]["rows"][0][0].endswith("...")),
    Case(id="sweep/sql-many-huge-cells-stop", argv=[*_SHOW, "SELECT repeat('x', 100000) FROM range(2000)", "--json"],
         files=dict(_PART), exit_code=0, timeout_s=30.0,
         check=lambda r: __import__("json").loads(r.stdout)["query"]["truncated"] is True),
]

# one point spelled several ways (in one grid, or by two runs) is one point and one row
_SPELLED = ("studies:\n"
            "  - {kind: simulate, topology: fat-tree, pattern: all-reduce, size: 1MB, routing: adaptive}\n"
            "  - {kind: simulate, topology: fat-tree, pattern: allreduce, size: 1 MB, routing: ADAPTIVE}\n"
            "  - {kind: simulate, topology: fat-tree, pattern: All_Reduce, size: 1000000, routing: adaptive}\n"
            "  - {kind: estimate, model: llama3.1-8b, cluster: dgx-h100, gpus: 16, plan: {tp: 8}}\n"
            "  - {kind: estimate, model: LLAMA3.1-8B, cluster: DGX-H100, gpus: 16.0, plan: {tp: 8}}\n")


def _one_row_per_point(result) -> None:
    import json

    doc = json.loads(result.stdout)
    assert doc["points_in_grid"] == 2 and doc["ran"] == 2, doc


CASES.append(Case(id="sweep/one-point-many-spellings", argv=["sweep", "run", "grid.yaml", "--out", "res", "--json"],
                  files={"grid.yaml": _SPELLED}, exit_code=0, timeout_s=60.0, check=_one_row_per_point,
                  allowed_new=["res", "res/*"]))

# ---- issue 32, hangs: an unreachable Ray cluster is refused within RAY_CONNECT_TIMEOUT_S (5 s) ------------
for _name, _address, _needle in [
    ("refused-port", "127.0.0.1:1", "cannot be reached"),
    ("ray-client-refused", "ray://127.0.0.1:1", "cannot be reached"),
    ("unknown-host", "no-such-host.invalid:6379", "cannot be reached"),
    ("not-an-address", "somewhere", "not host:port"),
    ("bad-port", "127.0.0.1:99999", "not host:port"),
    ("huge", "h" * 100_000 + ":1", "RAY_ADDRESS"),
]:
    CASES.append(Case(id=f"sweep/ray-address-{_name}", argv=[*_RUN, "--executor", "ray"], files={"grid.yaml": GOOD},
                      env={"RAY_ADDRESS": _address}, stderr_has=[_needle], max_lines=1, timeout_s=20.0))
