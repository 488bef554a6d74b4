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
