"""All-to-all beyond the per-flow limit (issue 19): path classes run it; where they cannot (--per-flow, a
fabric they do not model, failures that fail over) the refusal is one line naming --ranks and the reason."""

from __future__ import annotations

from corpus.harness import Case

_A2A = ["simulate", "all-to-all", "--size", "1MB", "--radix", "64"]

CASES: list[Case] = [
    Case(id="netsim-classes/per-flow-past-limit", argv=[*_A2A, "--gpus", "2048", "--per-flow"],
         stderr_has=["--ranks <= 1024", "--per-flow"], timeout_s=60),
    Case(id="netsim-classes/torus-past-limit", argv=["simulate", "all-to-all", "--topology", "torus", "--gpus", "2048",
                                                     "--size", "1MB"],
         stderr_has=["--ranks <= 1024", "torus"], timeout_s=60),
    Case(id="netsim-classes/failover-past-limit", argv=[*_A2A, "--gpus", "2048", "--fail-links", "5%"],
         stderr_has=["--ranks <= 1024", "failed links"], timeout_s=60),
]
