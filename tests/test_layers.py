"""No module imports from a layer above it (issue 13, part 3; the order of ../shared/ARCHITECTURE.md).

Every ``import tierwise.x`` / ``from tierwise.x import ...`` in src/tierwise, at module level or inside a
function (a lazy import is still a dependency), is read with :mod:`ast` and checked against the layer
order, lowest first::

    errors < limits < units; errors < files, atomic, units < report; all of them < specs < hierarchy < collectives
        < workload < pricing < parallel < estimate < serve, goodput, planner, validate < design < sweep < cli
    specs < topology < netsim (netsim also above collectives) < cli; topology < goodput, design, serve
    documents < serve, planner (their typed records finished into their JSON documents)
    collectives < pricing < estimate < measure < testbed (also above netsim) < cli

report renders HTML from a command's --json document, so it sits just above atomic and anything may use it.

A layer may import itself and any layer below it; nothing else. The package root (``tierwise/__init__``,
the Python API) and ``__main__`` sit on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tierwise"

ABOVE = {
    # layer: the layers directly below it
    "errors": (),
    "_version": (),
    "limits": ("errors",),  # the range of every number a user gives
    "units": ("errors", "limits"),
    "files": ("errors",),  # the guarded reader and strict YAML/JSON loaders
    "atomic": ("errors",),  # outputs: checked before the work, written atomically
    "report": ("atomic", "files", "units"),  # HTML pages built from a command's --json document (units: labels)
    "documents": ("errors",),  # each command's JSON document: finished (schema_version) and its schema
    "specs": ("units", "files", "atomic", "_version"),
    "hierarchy": ("specs",),
    "collectives": ("hierarchy",),
    "workload": ("collectives",),
    "pricing": ("workload",),  # one roofline per kernel family; traffic priced on the tier its group spans
    "parallel": ("pricing",),  # one module per parallel axis: its records, pricing and overlap rule
    "estimate": ("parallel",),
    "planner": ("estimate", "documents"),  # documents: its typed answers finished into the plan and scale
    # documents (documents/training.py reads them by attribute)
    "validate": ("estimate", "report"),
    "serve": ("estimate", "topology", "documents"),  # prefill / decode / KV transfer on the same tiers and
    # efficiencies; topology: the server prices a P/D pair of pools is costed by (serve/cost.py); documents: its
    # typed records finished into the serve document (documents/serving.py reads them by attribute)
    "goodput": ("estimate", "topology"),  # failures x fault domains x checkpoints (topology: component counts)
    "design": ("planner", "goodput", "topology"),  # cluster designs, cost and power, the trend
    "topology": ("specs",),
    "netsim": ("topology", "collectives"),
    "measure": ("estimate",),  # `measure compute` prices each measured kernel beside the measurement, and
    # `--hf-step`'s training step with the estimator
    "testbed": ("measure", "netsim"),  # network namespaces + tc-shaped links on one machine
    "sweep": ("planner", "validate", "design", "serve", "netsim"),  # many scenarios, resumable, Parquet
    "cli": ("planner", "validate", "netsim", "measure", "serve", "goodput", "design", "testbed", "sweep",
            "documents"),
    "__main__": ("cli",),
    "_arguments": ("units", "files"),  # the Python API's argument checks (types recognised without imports)
    "<root>": ("cli", "_arguments"),
}


def _below(layer: str) -> set[str]:
    out: set[str] = set()
    todo = list(ABOVE[layer])
    while todo:
        lower = todo.pop()
        if lower not in out:
            out.add(lower)
            todo.extend(ABOVE[lower])
    return out


def layer_of(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    if rel.parts == ("__init__",):
        return "<root>"
    return rel.parts[0]


def imported_layers(source: str) -> list[tuple[int, str]]:
    """(line, layer) of every tierwise module ``source`` imports."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            root = node.module == "tierwise"
            names = [f"tierwise.{a.name}" for a in node.names] if root else [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tierwise":
                out.append((node.lineno, parts[1] if len(parts) > 1 else "<root>"))
    return out


def violations(layer: str, source: str) -> list[str]:
    allowed = _below(layer) | {layer}
    return [f"line {line}: {layer} imports {target}" for line, target in imported_layers(source)
            if target not in allowed]


def _modules():
    return sorted(p for p in SRC.rglob("*.py"))


def test_every_package_has_a_layer():
    layers = {layer_of(p) for p in _modules()}
    assert layers <= set(ABOVE), f"give these a place in the layer order: {sorted(layers - set(ABOVE))}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_imports_a_layer_above_it(path):
    assert violations(layer_of(path), path.read_text()) == []


def test_the_check_catches_an_upward_import():
    """The checker itself: a lazy import of the estimator from collectives, and of measure from collectives
    (the package cycle issue 13 removed: collectives/model.py importing measure/hostcopy.py), are caught."""
    lazy = "def f():\n    from tierwise.estimate.step import estimate\n"
    assert violations("collectives", lazy) == ["line 2: collectives imports estimate"]
    assert violations("collectives", "from tierwise.measure import hostcopy\n") == [
        "line 1: collectives imports measure"]
    assert violations("collectives", "from tierwise import measure\n") == ["line 1: collectives imports measure"]
    assert violations("measure", "from tierwise.collectives.fitted import predict_fitted\n") == []
    assert violations("estimate", "import tierwise.netsim\n") == ["line 1: estimate imports netsim"]
