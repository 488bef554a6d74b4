"""Hostile numbers and files for ``design``, ``trend`` and the cost/lever options of ``estimate``, ``plan`` and
``topo`` (issue 17): one line naming the value, exit 2."""

from __future__ import annotations

from corpus.harness import Case

_D = ["design", "--model", "llama3.1-8b", "--gpus", "64"]
_T = ["trend", "--model", "llama3.1-8b"]
_P = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"]

CASES: list[Case] = [
    Case(id="design/gpus-zero", argv=["design", "--model", "llama3.1-8b", "--gpus", "0"], stderr_has=["--gpus"]),
    Case(id="design/gpus-huge", argv=["design", "--model", "llama3.1-8b", "--gpus", str(2**40)],
         stderr_has=["--gpus"]),
    Case(id="design/tokens-nan", argv=[*_D, "--tokens", "nan"], stderr_has=["--tokens"]),
    Case(id="design/tokens-neg", argv=[*_D, "--tokens", "-5"], stderr_has=["--tokens"]),
    Case(id="design/budget-inf", argv=[*_D, "--budget", "inf"], stderr_has=["--budget"]),
    Case(id="design/within-neg", argv=[*_D, "--within", "-1"], stderr_has=["--within"]),
    Case(id="design/precision-fp4", argv=[*_D, "--precision", "fp4"], stderr_has=["fp4"]),
    Case(id="design/prices-missing", argv=[*_D, "--prices", "nope.yaml"], stderr_has=["nope.yaml"]),
    Case(id="design/prices-unknown-key", argv=[*_D, "--prices", "p.yaml"], files={"p.yaml": "gpu_usd: 1\n"},
         stderr_has=["gpu_usd"]),
    Case(id="design/prices-nan", argv=[*_D, "--prices", "p.yaml"], files={"p.yaml": "pue: .nan\n"},
         stderr_has=["pue"]),
    Case(id="design/html-dir-missing", argv=[*_D, "--html", "no/such/dir/x.html"], stderr_has=["--html"]),
    Case(id="trend/gpus-neg", argv=[*_T, "--gpus", "-8"], stderr_has=["--gpus"]),
    Case(id="trend/cluster-unknown", argv=[*_T, "--gpus", "64", "--cluster", "h900-dgx"], stderr_has=["h900-dgx"]),
    Case(id="trend/cluster-empty-file", argv=[*_T, "--gpus", "64", "--cluster", "c.yaml"], files={"c.yaml": ""},
         stderr_has=["empty"]),
    Case(id="plan/reduce-dtype-fp16", argv=[*_P, "--reduce-dtype", "fp16"], stderr_has=["fp16"]),
    Case(id="plan/powersgd-neg", argv=[*_P, "--powersgd-rank", "-2"], stderr_has=["--powersgd-rank"]),
    Case(id="plan/sync-every-zero", argv=[*_P, "--sync-every", "0"], stderr_has=["--sync-every"]),
    Case(id="plan/staleness-huge", argv=[*_P, "--async-staleness", str(2**40)], stderr_has=["--async-staleness"]),
    Case(id="plan/powersgd-and-onebit", argv=[*_P, "--powersgd-rank", "2", "--onebit"], stderr_has=["choose one"]),
    Case(id="plan/tokens-zero", argv=[*_P, "--tokens", "0"], stderr_has=["--tokens"]),
    Case(id="topo/fabric-unknown", argv=["topo", "fat-tree", "--gpus", "64", "--fabric", "omnipath"],
         stderr_has=["omnipath"]),
    Case(id="topo/leaf-placement-unknown", argv=["topo", "fat-tree", "--gpus", "64", "--leaf-placement", "roof"],
         stderr_has=["roof"]),
    Case(id="topo/cluster-unknown", argv=["topo", "fat-tree", "--gpus", "64", "--cluster", "dgx-h900"],
         stderr_has=["dgx-h900"]),
]
