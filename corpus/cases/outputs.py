"""Class 4, outputs and data: every output option into a place that cannot take the file.

``measure collective --out``, ``calibrate --out``, ``validate --html``, ``validate --fit-out`` and
``simulate --emit-cluster`` into a missing directory, under a regular file, onto a directory, a named pipe,
``/dev/full``, ``/proc`` or ``/sys``, a name ending in ``/``: one line, exit 2, nothing left behind, and
*before* the work (a benchmark spawns torch processes, a fit runs for seconds: the 20 s limit checks it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from corpus.harness import Case, Result

_LOG = (Path(__file__).resolve().parents[2] / "tests" / "data" / "nccl-logs" /
        "h100x8_1node_nvswitch_allreduce_nccl2.24.3_voltagepark.log").read_text()

# option -> (argv before the target, the option, files the command needs, extension)
_OPTIONS = {
    "measure-out": (["measure", "collective", "--sizes", "1KiB:4KiB", "--iters", "1", "--warmup", "0"], "--out",
                    {}, "json"),
    "calibrate-out": (["calibrate", "all_reduce.log"], "--out", {"all_reduce.log": _LOG}, "yaml"),
    "validate-html": (["validate", "--source", "nemo_2407_perf"], "--html", {}, "html"),
    "validate-fit-out": (["validate", "--fit"], "--fit-out", {}, "yaml"),
    "simulate-emit-cluster": (["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix", "16",
                               "--size", "1MB"], "--emit-cluster", {}, "yaml"),
}

# place -> (target, extra files, what stderr names)
_PLACES = {
    "missing-parent": ("{tmp}/nope/x.{ext}", {}, ["does not exist", "mkdir"]),
    "missing-grandparent": ("{tmp}/a/b/c/x.{ext}", {}, ["does not exist"]),
    "parent-is-a-file": ("{tmp}/afile/x.{ext}", {"afile": "not a directory\n"}, ["not a directory"]),
    "target-is-a-directory": ("{tmp}/adir", {"adir/": ""}, ["is a directory"]),
    "target-ends-in-slash": ("{tmp}/newdir/", {}, ["not a directory"]),
    "target-is-a-fifo": ("{tmp}/pipe", {"pipe": "<fifo>"}, ["not a regular file"]),
    "dev-full": ("/dev/full", {}, ["/dev/full"]),
    "proc": ("/proc/tierwise-out.{ext}", {}, ["/proc"]),
    "sys": ("/sys/tierwise-out.{ext}", {}, ["/sys"]),
}

CASES: list[Case] = []
for _opt_id, (_argv, _flag, _files, _ext) in _OPTIONS.items():
    for _place_id, (_target, _extra, _needles) in _PLACES.items():
        CASES.append(Case(
            id=f"outputs/{_opt_id}-{_place_id}",
            argv=[*_argv, _flag, _target.format(tmp="{tmp}", ext=_ext)],
            files={**_files, **_extra},
            stderr_has=[_flag, *_needles],
            max_lines=1,
            timeout_s=20.0,
        ))


def _unchanged(name: str, content: str):
    def check(result: Result) -> None:
        assert (result.cwd / name).read_text() == content, f"{name} was changed"

    return check


_NOT_ROWS = '{"my": "notes"}\n'
_INSTALLED_DIGEST: list[str] = []


def _installed_parameters() -> str:
    import importlib.util

    spec = importlib.util.find_spec("tierwise")
    assert spec is not None and spec.origin is not None
    return str(Path(spec.origin).parent / "specs" / "catalog" / "parameters.yaml")


def _installed_untouched(result: Result) -> None:
    digest = hashlib.sha256(Path(_installed_parameters()).read_bytes()).hexdigest()
    assert digest == _INSTALLED_DIGEST[0], "the installed parameters.yaml changed"


try:
    _INSTALLED_DIGEST.append(hashlib.sha256(Path(_installed_parameters()).read_bytes()).hexdigest())
except (AssertionError, OSError):  # pragma: no cover - the package is not importable here
    _INSTALLED_DIGEST.append("")

CASES += [
    # an existing file that is not a result list is never overwritten (rows are merged into --out)
    Case(id="outputs/measure-out-onto-a-file-that-is-not-a-result",
         argv=["measure", "collective", "--sizes", "1KiB", "--iters", "1", "--out", "notes.json"],
         files={"notes.json": _NOT_ROWS}, stderr_has=["notes.json", "not a tierwise result"], timeout_s=20.0,
         check=_unchanged("notes.json", _NOT_ROWS)),
    Case(id="outputs/measure-out-onto-binary", argv=["measure", "collective", "--out", "r.json"],
         files={"r.json": b"\x00\xff\xfe" * 50}, stderr_has=["r.json"], timeout_s=20.0),
    Case(id="outputs/measure-out-onto-deeply-nested-json", argv=["measure", "collective", "--out", "r.json"],
         files={"r.json": "[" * 100_000}, stderr_has=["r.json"], timeout_s=20.0, max_lines=1),
    Case(id="outputs/measure-out-onto-a-list-of-numbers", argv=["measure", "collective", "--out", "r.json"],
         files={"r.json": "[1, 2, 3]"}, stderr_has=["r.json", "not a tierwise result"], timeout_s=20.0,
         max_lines=1, check=_unchanged("r.json", "[1, 2, 3]")),
    Case(id="outputs/measure-out-empty-name", argv=["measure", "collective", "--out", ""],
         stderr_has=["--out"], timeout_s=20.0),
    Case(id="outputs/calibrate-out-empty-name", argv=["calibrate", "all_reduce.log", "--out", ""],
         files={"all_reduce.log": _LOG}, stderr_has=["--out"]),
    Case(id="outputs/validate-html-empty-name", argv=["validate", "--html", ""], stderr_has=["--html"],
         max_lines=1, timeout_s=20.0),
    Case(id="outputs/simulate-emit-cluster-empty-name",
         argv=["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix", "16", "--size", "1MB",
               "--emit-cluster", ""], stderr_has=["--emit-cluster"], max_lines=1),
    Case(id="outputs/calibrate-out-is-its-input", argv=["calibrate", "all_reduce.log", "--out", "./all_reduce.log"],
         files={"all_reduce.log": _LOG}, stderr_has=["also an input"], max_lines=1,
         check=_unchanged("all_reduce.log", _LOG)),
    Case(id="outputs/calibrate-out-is-its-own-input-directory", argv=["calibrate", "all_reduce.log", "--out", "."],
         files={"all_reduce.log": _LOG}, stderr_has=["is a directory"]),
    # validate --fit: the installed parameters are never the output
    Case(id="outputs/validate-fit-without-fit-out", argv=["validate", "--fit"], stderr_has=["--fit-out"],
         max_lines=1, timeout_s=20.0, check=_installed_untouched),
    Case(id="outputs/validate-fit-out-without-fit", argv=["validate", "--fit-out", "p.yaml"],
         stderr_has=["--fit"], max_lines=1, timeout_s=20.0),
    Case(id="outputs/validate-fit-out-is-the-installed-file",
         argv=["validate", "--fit", "--fit-out", _installed_parameters()], stderr_has=["installed"],
         max_lines=1, timeout_s=60.0, check=_installed_untouched),
    # a parameters file named by TIERWISE_PARAMETERS that cannot be used: one line, not a crash
    Case(id="outputs/parameters-env-string-number", argv=["tiers", "dgx-h100"],
         files={"p.yaml": "compute:\n  torch_op_overhead: 1e-05\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"},
         stderr_has=["torch_op_overhead", "1.0e-05"], max_lines=1),
    Case(id="outputs/parameters-env-missing-file", argv=["tiers", "dgx-h100"],
         env={"TIERWISE_PARAMETERS": "nope.yaml"}, stderr_has=["nope.yaml"], max_lines=1),
    Case(id="outputs/parameters-env-not-a-mapping",
         argv=["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
         files={"p.yaml": "- 1\n- 2\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"}, stderr_has=["mapping"],
         max_lines=1),
    Case(id="outputs/parameters-env-unknown-section", argv=["tiers", "dgx-h100"],
         files={"p.yaml": "computer:\n  x: 1\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"},
         stderr_has=["computer"], max_lines=1),
    Case(id="outputs/parameters-env-nan", argv=["tiers", "dgx-h100"],
         files={"p.yaml": "compute:\n  matmul_efficiency_max: .nan\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"},
         stderr_has=["matmul_efficiency_max"], max_lines=1),
    Case(id="outputs/parameters-env-bad-collectives", argv=["tiers", "dgx-h100"],
         files={"p.yaml": "collectives:\n  tree_efficiency: fast\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"},
         stderr_has=["p.yaml"], max_lines=1),
    Case(id="outputs/parameters-env-directory", argv=["tiers", "dgx-h100"], files={"d/": ""},
         env={"TIERWISE_PARAMETERS": "d"}, stderr_has=["directory"], max_lines=1),
]
