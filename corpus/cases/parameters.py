"""Parameter files (issue 32): ``$TIERWISE_PARAMETERS`` naming a file whose value is out of its range,
not finite, of the wrong type or null, for every parameter (generated from ``specs/parameter_ranges.py``, so
a parameter added there is covered here).

Each case must be one line naming the key as ``section.key[.sub]``, exit 2: never an answer computed with a
negative time or an efficiency above 1.
"""

from __future__ import annotations

import itertools

from corpus.harness import Case
from tierwise.specs.parameter_ranges import RANGES, Range

_BAD = {"below": "below", "above": "above", "nan": ".nan", "inf": "-.inf", "null": "~", "string": "'fast'",
        "list": "[1, 2]", "bool": "true", "bigint": "1" + "0" * 400, "huge-string": "huge-string"}
"""The kinds of bad value, taken in turn (one case per parameter keeps the corpus fast)."""


def _yaml(kind: str, rule: Range) -> str:
    if kind == "below":
        return repr(rule.lo if rule.lo_open else rule.lo - 1.0)
    if kind == "above":
        return repr(rule.hi if rule.hi_open else rule.hi * 2 + 1.0)
    if kind == "huge-string":
        return "x" * 100_000
    return kind


def _leaves():
    for section, rules in RANGES.items():
        for key, rule in rules.items():
            if isinstance(rule, dict):
                algorithm, inner = next(iter(rule.items()))
                yield section, [key, algorithm, inner.keys[0]], inner
            elif rule.keys is not None:
                yield section, [key, (rule.keys or ("hopper",))[0]], rule
            else:
                yield section, [key], rule


def _document(section: str, path: list[str], value: str) -> str:
    lines = [f"{section}:"]
    for depth, name in enumerate(path):
        lines.append("  " * (depth + 1) + f"{name}:" + (f" {value}" if depth == len(path) - 1 else ""))
    return "\n".join(lines) + "\n"


CASES: list[Case] = []
for (_section, _path, _rule), _kind in zip(_leaves(), itertools.cycle(_BAD), strict=False):
    _name = ".".join([_section, *_path])
    CASES.append(Case(
        id=f"parameters/{_name}-{_kind}",
        argv=["tiers", "dgx-h100"],
        files={"p.yaml": _document(_section, _path, _yaml(_BAD[_kind], _rule))},
        env={"TIERWISE_PARAMETERS": "p.yaml"},
        stderr_has=[_name, "p.yaml"],
        max_lines=1,
    ))

CASES += [
    Case(id="parameters/misspelt-key", argv=["tiers", "dgx-h100"], files={"p.yaml": "compute:\n  matmul_residul: 0.9\n"},
         env={"TIERWISE_PARAMETERS": "p.yaml"}, stderr_has=["matmul_residul", "did you mean 'matmul_residual'"],
         max_lines=1),
    Case(id="parameters/empty-section", argv=["tiers", "dgx-h100"], files={"p.yaml": "collectives:\n"},
         env={"TIERWISE_PARAMETERS": "p.yaml"}, stderr_has=["collectives", "must be a mapping"], max_lines=1),
    Case(id="parameters/plan-negative-overhead",
         argv=["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
         files={"p.yaml": "compute:\n  torch_op_overhead: -1.0e-3\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"},
         stderr_has=["compute.torch_op_overhead", "0 <="], max_lines=1),
    Case(id="parameters/plan-efficiency-above-one",
         argv=["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
         files={"p.yaml": "collectives:\n  link_efficiency: {scale_up: 3.0}\n"}, env={"TIERWISE_PARAMETERS": "p.yaml"},
         stderr_has=["collectives.link_efficiency.scale_up", "<= 1"], max_lines=1),
]
