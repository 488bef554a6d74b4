"""The transfers each collective makes on the testbed, priced twice: analytically and by the flow simulator.

A schedule is a list of transfers ``src -> dst`` of ``bytes``, each after the transfers it depends on (its
sender must have received the data first). Both rungs price the same schedule on the same figures, read
from the testbed's cluster file (:class:`Figures`; nothing is fitted):

* **analytic** (:func:`analytic_time`): transfers grouped into levels by dependency depth; a level takes
  ``max over resources (bytes on it / its rate) + one latency`` (``link_latency_s`` when a transfer of the
  level crosses nodes, else ``loopback_latency_s``); levels add. For a ring in rank order this is the
  alpha-beta ring, ``2 (n - 1) (l + S / (n B))`` with ``B`` the slowest hop's share of its link
  (Patarasuk & Yuan, JPDC 2009; :func:`tierwise.collectives.alpha_beta.ring_time` for a contiguous layout,
  asserted equal in the tests);
* **simulated** (:func:`simulated_time`): the same transfers routed by :func:`tierwise.netsim.routing.route`
  on a fabric built like the testbed (:func:`testbed_fabric`: one scale-up switch per node at the loopback
  rate, one NIC per node at the link rate, one leaf, or two leaves joined by the uplink's rate) and shared
  max-min fairly (:func:`tierwise.netsim.maxmin.max_min_rates`), event by event: a transfer starts one path
  latency after its dependencies finish and the rates are re-shared whenever one starts or ends.

Resources: a transfer inside a node uses its sender's and receiver's loopback rate (per rank); one across
nodes uses the sender node's uplink and the receiver node's downlink at the link's TCP payload rate, and
the leaves' uplink when it crosses leaves.

Schedules (``n`` ranks, ``S`` nccl-tests size, rank order as gloo's context holds it):

* gloo ``all-reduce`` (ring, ``gloo/allreduce.cc``) and the own ``ring``: ``2 (n - 1)`` steps of ``S / n``
  to the next rank; gloo ``reduce-scatter`` is that all-reduce on a clone (``ProcessGroupGloo``), gloo
  ``all-gather`` ``n - 1`` such steps (``gloo/allgather.cc``); both also pay the copies outside the algorithm
  (:func:`tierwise.collectives.fitted.outside_copy_bytes`) at the measured memory rate;
* gloo ``broadcast`` (``gloo/broadcast.cc``): binomial tree from rank 0, lowest bit first, sends posted
  without waiting: virtual rank ``v`` receives at the round of its highest set bit and then sends the whole
  buffer to ``v + 2^i`` for every later round ``i``;
* gloo ``all-to-all`` (``gloo/alltoall.cc``): every rank posts ``S / n`` to every other at once;
* own ``tree``: binomial reduce to rank 0, then binomial broadcast largest distance first;
* own ``hierarchical``: binomial reduce inside each node to its leader, ring all-reduce of ``S`` among the
  leaders, binomial broadcast inside each node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.collectives.fitted import outside_copy_bytes
from tierwise.netsim.maxmin import incidence, max_min_rates
from tierwise.netsim.routing import route
from tierwise.topology.build import build_fabric
from tierwise.topology.spec import TopologySpec

__all__ = ["Figures", "figures_from_cluster", "Schedule", "schedule", "analytic_time", "simulated_time",
           "testbed_fabric", "OPS", "ALGORITHMS"]

OPS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all")
ALGORITHMS = ("gloo", "ring", "tree", "hierarchical")


@dataclass(frozen=True, kw_only=True)
class Figures:
    """What the schedules are priced on (all one-way, bytes/s and seconds)."""

    num_nodes: int
    ranks_per_node: int
    link_bytes_per_s: float
    """TCP payload rate of one node link, each direction."""
    loopback_bytes_per_s: float
    """One TCP stream over a node's loopback (per rank, each direction)."""
    link_latency_s: float
    loopback_latency_s: float
    memory_bytes_per_s: float
    """Read + write bytes per second of a streaming copy (the copies outside gloo's algorithms)."""
    uplink_bytes_per_s: float | None = None
    """Payload rate between the two leaves (None: one leaf)."""

    @property
    def leaf_nodes(self) -> int:
        return self.num_nodes // 2 if self.uplink_bytes_per_s is not None else self.num_nodes


def figures_from_cluster(cluster, num_nodes: int) -> Figures:
    """:class:`Figures` from a loaded cluster file (:func:`tierwise.specs.cluster.load_cluster`): scale-up =
    loopback, scale-out = the node's NICs, ``host_bandwidth`` = memory copy rate, a leaf level's
    oversubscription = the uplink's share."""
    link = cluster.nics_per_node * cluster.nic_bytes_per_s
    uplink = None
    for level in cluster.scale_out_levels:
        if level.oversubscription > 1.0 or level.domain_size < num_nodes * cluster.gpus_per_node:
            uplink = level.domain_size // cluster.gpus_per_node * link / level.oversubscription
            break
    return Figures(num_nodes=num_nodes, ranks_per_node=cluster.gpus_per_node, link_bytes_per_s=link,
                   loopback_bytes_per_s=cluster.scale_up_bytes_per_s, link_latency_s=cluster.scale_out_latency_s,
                   loopback_latency_s=cluster.scale_up_latency_s, memory_bytes_per_s=cluster.host_bytes_per_s,
                   uplink_bytes_per_s=uplink)


@dataclass(frozen=True)
class Schedule:
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    deps: tuple[tuple[int, ...], ...]
    copy_bytes: float = 0.0
    """Memory traffic outside the algorithm (priced at the memory rate, added to both rungs)."""


class _Builder:
    def __init__(self) -> None:
        self.src: list[int] = []
        self.dst: list[int] = []
        self.nbytes: list[float] = []
        self.deps: list[tuple[int, ...]] = []

    def add(self, s: int, d: int, b: float, deps=()) -> int:
        self.src.append(s)
        self.dst.append(d)
        self.nbytes.append(float(b))
        self.deps.append(tuple(x for x in deps if x is not None))
        return len(self.src) - 1

    def ring(self, ranks: Sequence[int], steps: int, chunk: float, after: dict | None = None) -> dict:
        """``steps`` ring steps; returns each rank's last receive. ``after``: rank -> transfer it waits for."""
        n = len(ranks)
        last_recv = dict(after or {})
        last_send: dict[int, int | None] = {}
        for _ in range(steps):
            new_recv = {}
            for p, r in enumerate(ranks):
                t = self.add(r, ranks[(p + 1) % n], chunk, (last_recv.get(r), last_send.get(r)))
                last_send[r] = t
                new_recv[ranks[(p + 1) % n]] = t
            last_recv = new_recv
        return last_recv

    def tree_reduce(self, ranks: Sequence[int], size: float, after: dict | None = None) -> dict:
        """Binomial reduce to ranks[0]; returns rank -> its transfers received (the root's)."""
        n = len(ranks)
        got: dict[int, list[int]] = {r: [x for x in [(after or {}).get(r)] if x is not None] for r in ranks}
        k = 1
        while k < n:
            for p in range(n):
                if p % (2 * k) == k:
                    t = self.add(ranks[p], ranks[p - k], size, got[ranks[p]])
                    got[ranks[p - k]].append(t)
            k *= 2
        return got

    def tree_broadcast(self, ranks: Sequence[int], size: float, root_deps: Sequence[int]) -> dict:
        """Binomial broadcast from ranks[0], largest distance first, blocking sends (in order)."""
        n = len(ranks)
        have: dict[int, list[int]] = {ranks[0]: list(root_deps)}
        k = 1
        while k < n:
            k *= 2
        while k > 1:
            k //= 2
            for p in range(0, n, 2 * k):
                if p + k < n:
                    t = self.add(ranks[p], ranks[p + k], size, have[ranks[p]])
                    have[ranks[p]] = [t]
                    have[ranks[p + k]] = [t]
        return have

    def build(self, copy_bytes: float = 0.0) -> Schedule:
        return Schedule(np.array(self.src, dtype=np.int64), np.array(self.dst, dtype=np.int64),
                        np.array(self.nbytes), tuple(self.deps), copy_bytes)


def schedule(op: str, algorithm: str, size_bytes: float, node_of_rank: Sequence[int]) -> Schedule:
    """The transfers of ``op`` with ``algorithm`` (module docstring) on ranks placed by ``node_of_rank``."""

    n = len(node_of_rank)
    ranks = list(range(n))
    b = _Builder()
    size = float(size_bytes)
    if algorithm != "gloo" and op != "all-reduce":
        raise ValueError(f"algorithm {algorithm} is an all-reduce")
    if algorithm in ("gloo", "ring") and op in ("all-reduce", "reduce-scatter"):
        b.ring(ranks, 2 * (n - 1), size / n)
        copies = outside_copy_bytes(op, size, n) if op == "reduce-scatter" else 0.0
        return b.build(float(copies))
    if op == "all-gather":
        b.ring(ranks, n - 1, size / n)
        return b.build(float(outside_copy_bytes(op, size, n)))
    if op == "broadcast":
        received: dict[int, int] = {}
        dim = max(1, int(np.ceil(np.log2(n))))
        for i in range(dim):  # gloo/broadcast.cc: lowest bit first, sends do not wait
            for v in range(n):
                if v & ~((1 << (i + 1)) - 1) or v & (1 << i):
                    continue
                peer = v | (1 << i)
                if peer < n:
                    received[peer] = b.add(v, peer, size, (received.get(v),))
        return b.build()
    if op == "all-to-all":
        for s in ranks:
            for d in ranks:
                if s != d:
                    b.add(s, d, size / n)
        return b.build()
    if algorithm == "tree":
        got = b.tree_reduce(ranks, size)
        b.tree_broadcast(ranks, size, got[0])
        return b.build()
    if algorithm == "hierarchical":
        nodes = [[r for r in ranks if node_of_rank[r] == k] for k in sorted(set(node_of_rank))]
        leaders = [group[0] for group in nodes]
        reduced = {}
        for group in nodes:
            reduced.update(b.tree_reduce(group, size))
        after = {lead: (reduced[lead][-1] if reduced[lead] else None) for lead in leaders}
        if len(leaders) > 1:
            last = b.ring(leaders, 2 * (len(leaders) - 1), size / len(leaders), after)
        else:
            last = after
        for group in nodes:
            b.tree_broadcast(group, size, [x for x in [last.get(group[0])] if x is not None])
        return b.build()
    raise ValueError(f"no schedule for {op} with {algorithm}")


def _placement(fig: Figures, node_of_rank: Sequence[int]) -> np.ndarray:
    """Graph GPU id of each rank (node k holds GPUs k * ranks_per_node ...)."""
    seen: dict[int, int] = {}
    out = []
    for node in node_of_rank:
        out.append(node * fig.ranks_per_node + seen.get(node, 0))
        seen[node] = seen.get(node, 0) + 1
    return np.array(out, dtype=np.int64)


def _resources(fig: Figures, node_of_rank: Sequence[int], sched: Schedule):
    """(transfer index, resource id) pairs and the capacity of each resource (module docstring)."""
    n, N = len(node_of_rank), fig.num_nodes
    node = np.asarray(node_of_rank)
    s_node, d_node = node[sched.src], node[sched.dst]
    local = s_node == d_node
    # resources: rank send [0, n), rank recv [n, 2n), node up [2n, 2n+N), node down, leaf up [.., +2)
    cap = np.r_[np.full(2 * n, fig.loopback_bytes_per_s), np.full(2 * N, fig.link_bytes_per_s),
                np.full(2, fig.uplink_bytes_per_s or np.inf)]
    idx = np.arange(sched.src.size)
    pairs = [(idx[local], sched.src[local]), (idx[local], n + sched.dst[local]),
             (idx[~local], 2 * n + s_node[~local]), (idx[~local], 2 * n + N + d_node[~local])]
    if fig.uplink_bytes_per_s is not None:
        leaf = lambda x: x // fig.leaf_nodes  # noqa: E731
        cross = ~local & (leaf(s_node) != leaf(d_node))
        pairs.append((idx[cross], 2 * n + 2 * N + leaf(s_node[cross])))
    unit = np.concatenate([p[0] for p in pairs])
    res = np.concatenate([p[1] for p in pairs])
    return unit, res, cap, local


def analytic_time(op: str, algorithm: str, size_bytes: float, fig: Figures, node_of_rank: Sequence[int]) -> float:
    """Seconds by levels of the schedule (module docstring); no fitted figure enters."""
    sched = schedule(op, algorithm, size_bytes, node_of_rank)
    unit, res, cap, local = _resources(fig, node_of_rank, sched)
    level = np.zeros(sched.src.size, dtype=np.int64)
    for t, deps in enumerate(sched.deps):
        level[t] = 1 + max((level[d] for d in deps), default=-1)
    total = 0.0
    for lv in range(int(level.max()) + 1 if level.size else 0):
        mask = level[unit] == lv
        load = np.bincount(res[mask], weights=sched.nbytes[unit[mask]], minlength=cap.size)
        members = level == lv
        lat = fig.loopback_latency_s if local[members].all() else fig.link_latency_s
        total += float((load / cap).max()) + lat
    return total + sched.copy_bytes / fig.memory_bytes_per_s


def testbed_fabric(fig: Figures):
    """A :class:`tierwise.topology.graph.Fabric` shaped like the testbed (module docstring).

    One leaf: a 1-tier fat tree of radix >= nodes. Two leaves: a 2-tier fat tree of radix ``nodes`` (each
    leaf ``nodes / 2`` ports down and up) whose leaf-spine links are scaled so that each leaf's uplinks
    together carry the uplink's rate. Latency: each NIC link ``link_latency_s / 2`` and each scale-up hop
    ``loopback_latency_s / 2`` (a transfer crosses two of either).
    """

    N = fig.num_nodes
    two = fig.uplink_bytes_per_s is not None
    radix = max(2, N + N % 2)
    spec = TopologySpec(family="fat-tree", gpus=N * fig.ranks_per_node, gpus_per_node=fig.ranks_per_node,
                        nics_per_node=1, radix=radix, tiers=2 if two else 1, exact_tiers=two, oversubscription=1.0,
                        nic_bandwidth=f"{fig.link_bytes_per_s!r} B/s", scale_up="nvswitch",
                        scale_up_bandwidth=f"{fig.loopback_bytes_per_s!r} B/s",
                        hop_latency=f"{fig.link_latency_s / 2!r} s", scale_up_latency=f"{fig.loopback_latency_s / 2!r} s")
    fab = build_fabric(spec)
    if two:
        up = radix // 2
        fab.link_cap = np.where(fab.link_tier == 2, fig.uplink_bytes_per_s / up, fab.link_cap)
    return fab


def simulated_time(op: str, algorithm: str, size_bytes: float, fig: Figures, node_of_rank: Sequence[int],
                   fabric=None) -> float:
    """Seconds by event-driven max-min sharing of the schedule's transfers on :func:`testbed_fabric`."""

    sched = schedule(op, algorithm, size_bytes, node_of_rank)
    fab = testbed_fabric(fig) if fabric is None else fabric
    gpu = _placement(fig, node_of_rank)
    paths, ok = route(fab, gpu[sched.src], gpu[sched.dst])
    if not ok.all():
        raise ValueError("the testbed fabric left a transfer unrouted")
    hops = paths.shape[1]
    res = np.where(paths >= 0, fab.link_group[np.maximum(paths, 0)], -1).ravel()
    cap = fab.group_capacity()
    A = incidence(np.repeat(np.arange(sched.src.size), hops), res, sched.src.size, cap.size)
    path_lat = np.where(paths >= 0, fab.link_lat[np.maximum(paths, 0)], 0.0).sum(axis=1)
    return _dataflow(A, cap, sched, path_lat) + sched.copy_bytes / fig.memory_bytes_per_s


def _dataflow(A, cap: np.ndarray, sched: Schedule, path_lat: np.ndarray) -> float:
    """Event loop: re-share max-min rates whenever a transfer starts or ends; return the last end."""

    count = sched.src.size
    waiting = np.array([len(d) for d in sched.deps])
    children: list[list[int]] = [[] for _ in range(count)]
    for t, deps in enumerate(sched.deps):
        for d in deps:
            children[d].append(t)
    start = np.where(waiting == 0, path_lat, np.inf)
    remaining = sched.nbytes.astype(float).copy()
    done = np.zeros(count, dtype=bool)
    now = 0.0
    while not done.all():
        active = (start <= now * (1 + 1e-12) + 1e-15) & ~done
        upcoming = start[(start > now) & ~done]
        if not active.any():
            now = float(upcoming.min())
            continue
        rate = max_min_rates(A, cap, active=active)
        with np.errstate(divide="ignore", invalid="ignore"):
            finish = np.where(active, remaining / rate, np.inf)
        dt = float(finish.min())
        if upcoming.size:
            dt = min(dt, float(upcoming.min()) - now)
        now += dt
        remaining = np.where(active, remaining - rate * dt, remaining)
        ended = active & (remaining <= sched.nbytes * 1e-9 + 1e-9)
        for t in np.nonzero(ended)[0]:
            done[t] = True
            remaining[t] = 0.0
            for c in children[t]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    start[c] = now + path_lat[c]
    return now
