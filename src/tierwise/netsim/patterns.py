"""Collectives and traffic patterns as phases of flows, using the steady state of pipelined algorithms.

A pipelined ring does not need its 2(n-1) steps simulated one by one: in steady state every rank sends
to its successor at the same rate, so a ring (one NCCL channel) is a single *unit* whose flows all move in
lock step at the rate of its slowest hop, and which must move ``factor x S / channels`` bytes per rank
(Patarasuk & Yuan, JPDC 2009; the factors are :func:`tierwise.collectives.volumes.bus_factor`). Its latency
is the pipeline's critical path: a chunk crosses ``steps`` hops one after another, each on average the
ring's mean hop latency (derivation: a chunk of a ring all-reduce travels 2(n-1) consecutive ring hops;
summed over the ring those hops have latency ``(n-m) l_in + m l_out`` per lap of n hops).

Units of one phase run concurrently and share the fabric max-min fairly; phases run in sequence.

* ``ring``: NCCL-style multi-channel ring: ``nl`` channels (ranks per domain) when the group spans
  several domains, each channel leaving a domain through a different GPU and NIC (as
  :func:`tierwise.collectives.alpha_beta.ring_time` assumes) and entering the next domain on
  the same rail;
* ``hierarchical``: reduce-scatter ring inside each domain, then ``nl`` rings between domains (one per
  local rank, each carrying the 1/nl shard), then all-gather inside (collectives-notes.md section 5.4);
* ``tree`` (all-reduce): NCCL's tree: per channel a chain through each domain and a double binary tree
  between domains (Sanders, Speck & Traeff 2009), reduce and broadcast pipelined together, so every
  chain edge carries the channel's buffer once each way and every tree edge half of it each way;
* ``direct`` all-to-all: every rank sends S/n to every other rank, each flow on its own;
* ``permutation``: every rank sends S to one other rank of a seeded random derangement, or with
  ``shift`` to rank ``r + shift`` (e.g. one dragonfly group's worth: the adversarial pattern);
* ``pipeline``: rank r sends S to rank r + n/stages (activations between pipeline stages).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tierwise.collectives.volumes import bus_factor
from tierwise.errors import TopologyError

__all__ = ["Phase", "collective_phases"]


@dataclass
class Phase:
    name: str
    src: np.ndarray
    dst: np.ndarray
    unit: np.ndarray
    """Unit id of each flow; a pipelined unit moves in lock step."""
    unit_bytes: np.ndarray
    """Bytes each flow of the unit must move."""
    unit_steps: np.ndarray
    """Sequential hops on the unit's latency critical path (0: one path latency, for direct flows)."""
    pipelined: bool
    flow_weight: np.ndarray | None = None
    """Bytes each flow moves per byte of its unit's progress (default 1)."""
    unit_steps_split: tuple[np.ndarray, np.ndarray] | None = None
    """(intra-domain, inter-domain) hops on the latency critical path, when known apart."""
    extra: dict = field(default_factory=dict)


def _ring_steps(kind: str, n: int) -> int:
    return 2 * (n - 1) if kind == "all-reduce" else n - 1


def _by_domain(ranks: np.ndarray, domain_size: int):
    dom = ranks // domain_size
    order = np.lexsort((ranks, dom))
    r, d = ranks[order], dom[order]
    starts = np.r_[0, np.nonzero(np.diff(d))[0] + 1]
    counts = np.diff(np.r_[starts, r.size])
    pos = np.arange(r.size) - np.repeat(starts, counts)
    return r, d, pos, np.repeat(counts, counts), starts.size


def _ring_phase(name, kind, ranks, domain_size, size_bytes, channels: int) -> Phase:
    r, d, pos, cnt, _ = _by_domain(ranks, domain_size)
    n = r.size
    src, dst, unit = [], [], []
    dom_index = np.unique(d, return_inverse=True)[1]
    for c in range(channels):
        # domain D is entered at local rank s = (c + D) mod nl and walked downwards s, s-1, ..., s+1, so it
        # is left from local rank s+1 towards the next domain's local rank s+1: the hop between domains
        # stays on one rail (NCCL builds rail-aligned rings), and each channel uses a different NIC.
        start = (c + dom_index) % cnt
        rot = (start - pos) % cnt
        order = r[np.lexsort((rot, d))]
        src.append(order)
        dst.append(np.roll(order, -1))
        unit.append(np.full(n, c))
    factor = float(bus_factor(kind, n))
    return Phase(name, np.concatenate(src), np.concatenate(dst), np.concatenate(unit),
                 np.full(channels, factor * size_bytes / channels), np.full(channels, _ring_steps(kind, n)),
                 pipelined=True)


def _rings_of(name, kind, groups: list[np.ndarray] | tuple, size_bytes) -> Phase:
    """One single-channel ring per group (``groups`` = (ranks, group id) arrays, ranks in ring order)."""
    ranks, gid = groups
    order = np.lexsort((ranks, gid))
    ranks, gid = ranks[order], gid[order]
    starts = np.r_[0, np.nonzero(np.diff(gid))[0] + 1]
    counts = np.diff(np.r_[starts, ranks.size])
    nxt = np.arange(ranks.size) + 1
    ends = starts + counts
    nxt[ends - 1] = starts
    keep = np.repeat(counts, counts) > 1
    uid = np.repeat(np.arange(starts.size), counts)
    n = counts.astype(float)
    factor = np.where(n > 1, bus_factor(kind, np.maximum(n, 2)), 0.0)
    steps = np.where(kind == "all-reduce", 2 * (counts - 1), counts - 1)
    return Phase(name, ranks[keep], ranks[nxt][keep], uid[keep], factor * size_bytes, steps, pipelined=True)


def collective_phases(kind: str, algorithm: str, ranks: np.ndarray, domain_size: int, size_bytes: float,
                      *, seed: int = 1, stages: int = 4, shift: int | None = None) -> list[Phase]:
    """Phases of ``kind`` over GPU ids ``ranks`` (see the module docstring)."""
    ranks = np.sort(np.asarray(ranks, dtype=np.int64))
    n = ranks.size
    _, _, pos, cnt, m = _by_domain(ranks, domain_size)
    nl = int(cnt.max()) if n else 1
    if n < 2:
        return []
    if kind in ("all-reduce", "all-gather", "reduce-scatter") and algorithm == "ring":
        channels = nl if (m > 1 and nl > 1) or m == 1 else 1
        return [_ring_phase("ring", kind, ranks, domain_size, size_bytes, channels)]
    if kind in ("all-reduce", "all-gather", "reduce-scatter") and algorithm == "hierarchical":
        r, d, pos, _, _ = _by_domain(ranks, domain_size)
        intra = _rings_of("intra-domain", "reduce-scatter", (r, d), size_bytes)
        inter_kind = kind
        inter = _rings_of("inter-domain", inter_kind, (r, pos), size_bytes / nl)
        if kind == "all-reduce":
            ag = _rings_of("intra-domain", "all-gather", (r, d), size_bytes)
            return [p for p in (intra, inter, ag) if p.src.size]
        first, last = (intra, inter) if kind == "reduce-scatter" else (inter, intra)
        return [p for p in (first, last) if p.src.size]
    if kind == "all-reduce" and algorithm == "tree":
        return [_tree_phase(ranks, domain_size, size_bytes, nl)]
    if kind == "all-to-all":
        s = np.repeat(ranks, n)
        t = np.tile(ranks, n)
        keep = s != t
        s, t = s[keep], t[keep]
        return [Phase("all-to-all", s, t, np.arange(s.size), np.full(s.size, size_bytes / n),
                      np.zeros(s.size, dtype=np.int64), pipelined=False)]
    if kind == "permutation" and shift:
        perm = (np.arange(n) + shift) % n
        return [Phase("permutation", ranks, ranks[perm], np.arange(n), np.full(n, float(size_bytes)),
                      np.zeros(n, dtype=np.int64), pipelined=False)]
    if kind == "permutation":
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n)
        fixed = perm == np.arange(n)
        while fixed.any():  # derangement: rotate the fixed points among themselves (or with a neighbour)
            idx = np.nonzero(fixed)[0]
            if idx.size == 1:
                j = (idx[0] + 1) % n
                perm[idx[0]], perm[j] = perm[j], perm[idx[0]]
            else:
                perm[idx] = perm[np.roll(idx, 1)]
            fixed = perm == np.arange(n)
        return [Phase("permutation", ranks, ranks[perm], np.arange(n), np.full(n, float(size_bytes)),
                      np.zeros(n, dtype=np.int64), pipelined=False)]
    if kind == "pipeline":
        off = max(1, n // max(stages, 2))
        s, t = ranks[: n - off], ranks[off:]
        return [Phase("pipeline", s, t, np.arange(s.size), np.full(s.size, float(size_bytes)),
                      np.zeros(s.size, dtype=np.int64), pipelined=False)]

    raise TopologyError(f"--algorithm {algorithm} is not simulated for {kind}; use ring or hierarchical "
                        f"for all-reduce/all-gather/reduce-scatter (tree for all-reduce), direct for all-to-all")


def _double_binary_trees(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents (-1 at a root) of two binary trees over m domains whose interior nodes are the other's leaves.

    Tree A is the heap-ordered tree (parent of i is (i-1)//2: interior nodes 0..m/2-1); tree B is the same
    shape on the reversed order, so (for even m) every domain is interior in exactly one tree, the property
    that lets the two trees together run at full bandwidth (Sanders et al. 2009, section 3).
    """
    i = np.arange(m)
    a = np.where(i > 0, (i - 1) // 2, -1)
    rev = m - 1 - i
    b = np.where(rev > 0, m - 1 - (rev - 1) // 2, -1)
    return a, b


def _tree_phase(ranks, domain_size, size_bytes, nl) -> Phase:
    r, d, pos, cnt, m = _by_domain(ranks, domain_size)
    dom_index = np.unique(d, return_inverse=True)[1]
    channels = nl
    src, dst, unit, weight = [], [], [], []
    parent_a, parent_b = _double_binary_trees(m)
    for c in range(channels):
        # chain through each domain starting at its head, local rank c: head, head+1, ...
        rot = (pos - c) % cnt
        order = np.lexsort((rot, d))
        rr, dd, rot_sorted = r[order], dom_index[order], rot[order]
        nxt_same = np.r_[dd[1:] == dd[:-1], False]
        a_, b_ = rr[:-1][nxt_same[:-1]], rr[1:][nxt_same[:-1]]
        src += [a_, b_]
        dst += [b_, a_]
        unit += [np.full(2 * a_.size, c)]
        weight += [np.ones(2 * a_.size)]
        head = rr[rot_sorted == 0]  # one per domain, in domain order
        for parent in (parent_a, parent_b):
            child = np.nonzero(parent >= 0)[0]
            ch, pa = head[child], head[parent[child]]
            src += [ch, pa]
            dst += [pa, ch]
            unit += [np.full(2 * ch.size, c)]
            weight += [np.full(2 * ch.size, 0.5)]
    depth = int(np.ceil(np.log2(max(m, 1)))) if m > 1 else 0
    steps_in = np.full(channels, 2 * (nl - 1))
    steps_out = np.full(channels, 2 * depth)
    return Phase("tree", np.concatenate(src), np.concatenate(dst), np.concatenate(unit),
                 np.full(channels, float(size_bytes) / channels), steps_in + steps_out, pipelined=True,
                 flow_weight=np.concatenate(weight), unit_steps_split=(steps_in, steps_out))
