"""Outputs and links (issue 32): every output option onto a symbolic link writes through it, never replacing
the link with a regular file; a dangling link creates its target; a loop of links is one line, exit 2.
``sweep run --out`` into a folder of the user's never replaces a file tierwise did not write there.

Generated over the output options (add an option to ``_OUTPUTS`` and it is covered).
"""

from __future__ import annotations

import os
from pathlib import Path

from corpus.cases.outputs import _LOG
from corpus.harness import Case, Result

_GOOD_GRID = "kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: [16]\nplan: {tp: 8}\n"

# option id -> (argv before the option, the option, files the command needs, whether a run is quick enough
# to let it succeed in the corpus (else only the refusals run))
_OUTPUTS = {
    "plan-html": (["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"], "--html", {}, True),
    "scale-html": (["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16"], "--html", {},
                   True),
    "design-html": (["design", "--model", "llama3.1-8b", "--gpus", "64"], "--html", {}, True),
    "serve-html": (["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"], "--html", {}, True),
    "goodput-html": (["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"], "--html", {},
                     True),
    "simulate-html": (["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"], "--html", {},
                      True),
    "validate-html": (["validate", "--source", "nemo_2407_perf"], "--html", {}, True),
    "simulate-emit-cluster": (["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix", "16",
                               "--size", "1MB"], "--emit-cluster", {}, True),
    "calibrate-out": (["calibrate", "all_reduce.log"], "--out", {"all_reduce.log": _LOG}, True),
    "validate-fit-out": (["validate", "--fit"], "--fit-out", {}, False),
    "measure-out": (["measure", "collective", "--sizes", "1KiB", "--iters", "1", "--warmup", "0"], "--out", {},
                    False),
    "sweep-show-html": (["sweep", "show", "{tmp}/res"], "--html", {}, False),
}

_OLD = "the user's file, to be replaced through the link\n"


def _through(link: str, target: str, existed: bool):
    def check(result: Result) -> None:
        path = result.cwd / link
        assert path.is_symlink(), f"{link} is no longer a symbolic link"
        written = (result.cwd / target).read_text(errors="replace")
        assert written and written != _OLD, f"{target} was not written through the link"
        if existed:
            assert os.readlink(path) == target

    return check


CASES: list[Case] = []
for _id, (_argv, _flag, _files, _quick) in _OUTPUTS.items():
    CASES.append(Case(id=f"links/{_id}-loop", argv=[*_argv, _flag, "loop1"],
                      files={**_files, "loop1": "<symlink:loop2>", "loop2": "<symlink:loop1>"},
                      stderr_has=[_flag, "loop of symbolic links"], max_lines=1, timeout_s=20.0))
    CASES.append(Case(id=f"links/{_id}-link-into-missing-directory", argv=[*_argv, _flag, "far"],
                      files={**_files, "far": "<symlink:nowhere/out.txt>"},
                      stderr_has=[_flag, "does not exist"], max_lines=1, timeout_s=20.0))
    if not _quick:
        continue
    CASES.append(Case(id=f"links/{_id}-link-to-a-file", argv=[*_argv, _flag, "link"],
                      files={**_files, "real": _OLD, "link": "<symlink:real>"}, exit_code=0, max_lines=3,
                      timeout_s=30.0, check=_through("link", "real", True)))
    CASES.append(Case(id=f"links/{_id}-dangling-link", argv=[*_argv, _flag, "link"],
                      files={**_files, "sub/": "", "link": "<symlink:sub/new>"}, exit_code=0, max_lines=3,
                      timeout_s=30.0, allowed_new=["sub/new"], check=_through("link", "sub/new", False)))


def _unchanged(name: str, content: str):
    def check(result: Result) -> None:
        p = result.cwd / name
        assert not p.is_symlink() and p.read_text() == content, f"{name} was replaced"

    return check


def _target_untouched(result: Result) -> None:
    assert not (result.cwd / "elsewhere.json").exists(), "sweep.json was written through a link"
    assert Path(result.cwd / "res" / "sweep.json").is_symlink()


_NOTES = '{"my": "notes about this folder"}\n'
CASES += [
    Case(id="links/sweep-run-out-keeps-a-users-sweep-json", argv=["sweep", "run", "grid.yaml", "--out", "res"],
         files={"grid.yaml": _GOOD_GRID, "res/sweep.json": _NOTES}, stderr_has=["sweep.json", "--out"],
         max_lines=1, timeout_s=20.0, check=_unchanged("res/sweep.json", _NOTES)),
    Case(id="links/sweep-run-out-keeps-a-users-empty-sweep-json", argv=["sweep", "run", "grid.yaml", "--out", "res"],
         files={"grid.yaml": _GOOD_GRID, "res/sweep.json": ""}, stderr_has=["sweep.json"], max_lines=1,
         timeout_s=20.0, check=_unchanged("res/sweep.json", "")),
    Case(id="links/sweep-run-out-sweep-json-is-a-link", argv=["sweep", "run", "grid.yaml", "--out", "res"],
         files={"grid.yaml": _GOOD_GRID, "res/sweep.json": "<symlink:../elsewhere.json>"}, stderr_has=["sweep.json"],
         max_lines=1, timeout_s=20.0, check=_target_untouched),
    Case(id="links/sweep-run-out-sweep-json-is-a-directory", argv=["sweep", "run", "grid.yaml", "--out", "res"],
         files={"grid.yaml": _GOOD_GRID, "res/sweep.json/": ""}, stderr_has=["sweep.json"], max_lines=1,
         timeout_s=20.0),
    Case(id="links/sweep-run-out-lock-name-is-a-link", argv=["sweep", "run", "grid.yaml", "--out", "res"],
         files={"grid.yaml": _GOOD_GRID, "keep": "x\n", "res/.lock-shard-1-of-1": "<symlink:../keep>"},
         stderr_has=["not a lock file"], max_lines=1, timeout_s=20.0, allowed_new=["res/sweep.json"],
         check=_unchanged("keep", "x\n")),
    Case(id="links/sweep-run-out-lock-name-is-a-fifo", argv=["sweep", "run", "grid.yaml", "--out", "res"],
         files={"grid.yaml": _GOOD_GRID, "res/.lock-shard-1-of-1": "<fifo>"}, stderr_has=["not a lock file"],
         max_lines=1, timeout_s=20.0, allowed_new=["res/sweep.json"]),
]
