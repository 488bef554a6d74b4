"""What a testbed is: nodes, ranks per node, the shaped link, the optional oversubscribed uplink.

Everything a user gives is validated here, before any namespace exists (``tierwise testbed up`` fails with one
line and creates nothing). Names: every namespace is ``twtb-<name>-<role>`` (:data:`PREFIX`), so ``down`` and
the CI check find exactly what a testbed created and nothing else.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tierwise.errors import MeasureError, UnitError
from tierwise.files import load_json, read_user_text
from tierwise.limits import check_float, check_int
from tierwise.units import parse_bandwidth, parse_time

__all__ = ["PREFIX", "TestbedError", "TestbedSpec", "parse_spec", "MAX_NODES", "MAX_RANKS_PER_NODE",
           "LAYOUTS", "node_of_rank", "load_state", "STATE_FILE", "CLUSTER_FILE", "RESULTS_FILE"]

PREFIX = "twtb-"
"""Every namespace the testbed creates starts with this (and only those are ever touched)."""
MAX_NODES = 16
MAX_RANKS_PER_NODE = 8
MIN_LINK_BYTES_PER_S = 125e3
"""1 Mbit/s: slower links turn a 64 MiB sweep into minutes."""
MAX_LINK_BYTES_PER_S = 1.25e9
"""10 Gbit/s: past a few Gbit/s a 2-core host's copies, not the shaper, set the rate (docs/testbed.md)."""
MAX_OVERSUBSCRIPTION = 16.0
LAYOUTS = ("contiguous", "interleaved")
STATE_FILE, CLUSTER_FILE, RESULTS_FILE = "testbed.json", "cluster.yaml", "results.json"
_NAME = re.compile(r"^[a-z0-9]{1,8}$")


class TestbedError(MeasureError):
    """A testbed that cannot be built or used: bad values, no root, no iproute2, no testbed up."""

    __test__ = False  # not a pytest class despite the name


@dataclass(frozen=True, kw_only=True)
class TestbedSpec:
    """One emulated cluster."""

    __test__ = False

    name: str = "tb"
    """Namespaces are ``twtb-<name>-...``; two testbeds with different names coexist."""
    num_nodes: int
    ranks_per_node: int
    link_bytes_per_s: float
    """The tbf rate on both ends of each node's veth (one-way, on-wire bytes incl. Ethernet headers)."""
    link_text: str
    """The rate as the user wrote it."""
    latency_s: float | None = None
    """Requested added one-way delay; needs netem (reported ``not emulated`` without it)."""
    oversubscription: float | None = None
    """Two leaf bridges joined by one shaped uplink of ``(nodes / 2) x link / oversubscription``."""

    @property
    def num_ranks(self) -> int:
        return self.num_nodes * self.ranks_per_node

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Node namespaces first, then the switch namespace."""
        return (*(f"{PREFIX}{self.name}-n{i}" for i in range(self.num_nodes)), f"{PREFIX}{self.name}-sw")

    def node_ip(self, node: int) -> str:
        return f"10.213.0.{node + 1}"

    @property
    def leaf_of_node(self) -> tuple[int, ...]:
        """Leaf bridge of each node (all 0 without an uplink; first half 0, second half 1 with one)."""
        if self.oversubscription is None:
            return (0,) * self.num_nodes
        half = self.num_nodes // 2
        return tuple(0 if i < half else 1 for i in range(self.num_nodes))

    @property
    def uplink_bytes_per_s(self) -> float | None:
        """The uplink's tbf rate: the leaf's nodes' total rate over the oversubscription."""
        if self.oversubscription is None:
            return None
        return (self.num_nodes // 2) * self.link_bytes_per_s / self.oversubscription

    def to_dict(self) -> dict:
        return asdict(self)


def parse_spec(*, nodes, ranks_per_node, link: str, latency: str | None = None,
               oversubscription: float | None = None, name: str = "tb") -> TestbedSpec:
    """A :class:`TestbedSpec` from the user's values, or :class:`TestbedError` naming the bad one."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise TestbedError(f"--name {name!r}: use 1-8 lowercase letters or digits (namespaces are twtb-NAME-...)")
    nodes = check_int(nodes, "--nodes", minimum=1, maximum=MAX_NODES, error=TestbedError)
    rpn = check_int(ranks_per_node, "--ranks-per-node", minimum=1, maximum=MAX_RANKS_PER_NODE, error=TestbedError)
    if nodes * rpn < 2:
        raise TestbedError(f"--nodes {nodes} x --ranks-per-node {rpn} is one rank; a collective needs >= 2")
    try:
        rate = parse_bandwidth(link, what="--link", minimum=MIN_LINK_BYTES_PER_S, maximum=MAX_LINK_BYTES_PER_S)
        lat = None if latency is None else parse_time(latency, what="--latency", allow_zero=True, maximum=1.0)
    except UnitError as exc:
        raise TestbedError(str(exc)) from None
    over = None
    if oversubscription is not None:
        over = check_float(oversubscription, "--oversubscription", minimum=1.0, maximum=MAX_OVERSUBSCRIPTION,
                           error=TestbedError)
        if nodes < 2 or nodes % 2:
            raise TestbedError(f"--oversubscription needs an even --nodes >= 2 (two leaves); got --nodes {nodes}")
    return TestbedSpec(name=name, num_nodes=nodes, ranks_per_node=rpn, link_bytes_per_s=rate,
                       link_text=str(link), latency_s=lat, oversubscription=over)


def node_of_rank(rank: int, spec: TestbedSpec, layout: str) -> int:
    """``contiguous``: rank r on node r // ranks_per_node; ``interleaved``: node r mod nodes (a ring in rank
    order then crosses a node boundary at every hop)."""
    if layout == "interleaved":
        return rank % spec.num_nodes
    return rank // spec.ranks_per_node


def load_state(directory: str | Path) -> dict:
    """The state ``testbed up`` wrote in ``directory``, or TestbedError saying to run ``testbed up``."""

    path = Path(directory) / STATE_FILE
    if not path.is_file():
        raise TestbedError(f"no testbed in {str(directory)!r} ({STATE_FILE} missing); run tierwise testbed up first")
    data = load_json(read_user_text(str(path), what="testbed state"), str(path), TestbedError)
    if not isinstance(data, dict) or "spec" not in data:
        raise TestbedError(f"{path} is not a testbed state file; run tierwise testbed up again")
    spec_from_state(data, str(path))  # a damaged spec is one line here, before anything uses it
    return data


def spec_from_state(state: dict, where: str = STATE_FILE) -> TestbedSpec:
    """The spec a state file records, checked as ``testbed up`` checks the user's values: a damaged file (a
    field missing, of the wrong type or out of range, an unknown field) is one :class:`TestbedError` line
    naming the file and the field, never a ``TypeError``."""
    raw = state.get("spec") if isinstance(state, dict) else None
    known = {f.name for f in fields(TestbedSpec)}
    fix = "run tierwise testbed down, then testbed up again"
    if not isinstance(raw, dict):
        raise TestbedError(f"{where} is damaged: its 'spec' is not a mapping; {fix}")
    unknown = sorted(map(str, set(raw) - known))
    missing = [k for k in ("num_nodes", "ranks_per_node", "link_text") if k not in raw]
    if unknown or missing:
        what = f"unknown field {unknown[0][:40]!r}" if unknown else f"no {missing[0]!r}"
        raise TestbedError(f"{where} is damaged: its spec has {what}; {fix}")
    try:
        return parse_spec(nodes=raw["num_nodes"], ranks_per_node=raw["ranks_per_node"], link=raw["link_text"],
                          latency=raw.get("latency_s"), oversubscription=raw.get("oversubscription"),
                          name=raw.get("name", "tb"))
    except TestbedError as exc:
        raise TestbedError(f"{where} is damaged ({exc}); {fix}") from None


def dumps(data) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"
