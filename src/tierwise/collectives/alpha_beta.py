"""Ideal alpha-beta times of collective algorithms over a two-level hierarchy.

These are the building blocks of the analytic model: :mod:`tierwise.collectives.model` feeds them
effective bandwidths and per-step latencies (after protocol and efficiency factors), and the network
simulator compares against them with efficiency 1. All arguments may be numpy arrays (broadcast together).

Symbols: ``S`` size in nccl-tests convention (see :mod:`.volumes`), ``n`` ranks, ``nl`` ranks per inner
domain (the ranks of the group that share a scale-up domain), ``m = n / nl`` domains, ``b_in`` one-way
bandwidth per rank inside a domain, ``b_out`` one-way scale-out bandwidth per rank (its share of its
host's NICs), ``l_in``/``l_out`` latency of one step inside/between domains.

Sources: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH"
(IJHPCA 2005), sections 4.4-4.6 (ring and Rabenseifner all-reduce costs); Patarasuk & Yuan,
"Bandwidth optimal all-reduce algorithms for clusters of workstations" (JPDC 2009) for the pipelined
ring's 2(n-1)/n S/B bound; Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth broadcast,
reduction and scan" (Parallel Computing 2009) for the double binary tree NCCL uses between nodes;
``collectives-notes.md`` section 5.4 for the hierarchical form.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ring_time",
    "hierarchical_time",
    "tree_time",
    "direct_all_to_all_time",
    "tree_egress_factor",
]


def _f(x):
    return np.asarray(x, dtype=float)


def _ring_steps(kind: str, n):
    if kind == "all-reduce":
        return 2.0 * (n - 1.0)
    if kind in ("reduce-scatter", "all-gather"):
        return n - 1.0
    if kind == "broadcast":
        return n - 1.0
    raise ValueError(f"ring has no {kind}")


def _ring_volume_factor(kind: str, n):
    if kind == "all-reduce":
        return 2.0 * (n - 1.0) / n
    if kind in ("reduce-scatter", "all-gather"):
        return (n - 1.0) / n
    if kind == "broadcast":
        return np.ones_like(n)
    raise ValueError(f"ring has no {kind}")


def ring_time(kind, size_bytes, n, nl, b_in, b_out, l_in, l_out):
    """Pipelined ring: ``steps x latency + volume / bottleneck bandwidth``.

    * bandwidth: each rank sends ``factor x S`` (factor 2(n-1)/n for all-reduce); inside a domain at
      ``b_in``; across domains, with one channel per NIC, every channel's ring leaves each domain once
      carrying ``factor x S / channels``, so the domain's egress ``factor x S`` shares the ``nl x b_out``
      NIC bandwidth of the group's ranks in that domain (collectives-notes.md section 2): a full 8-GPU
      node's ring runs at 8 x the NIC rate. The bottleneck rate is ``min(b_in, nl x b_out)`` (only the
      tiers actually spanned count);
    * latency: 2(n-1) steps for all-reduce (n-1 otherwise), of which 2(m-1) (or m-1) cross domains.
    """
    n, nl = _f(n), _f(nl)
    m = n / nl
    size = _f(size_bytes)
    volume = _ring_volume_factor(kind, n) * size
    bw = np.where(nl > 1, _f(b_in), np.inf)
    bw = np.minimum(bw, np.where(m > 1, nl * _f(b_out), np.inf))
    steps = _ring_steps(kind, n)
    inter_steps = _ring_steps(kind, m) if kind != "broadcast" else m - 1.0
    inter_steps = np.where(m > 1, inter_steps, 0.0)
    latency = (steps - inter_steps) * _f(l_in) + inter_steps * _f(l_out)
    return np.where(n > 1, latency + volume / bw, 0.0)


def hierarchical_time(kind, size_bytes, n, nl, b_in, b_out, l_in, l_out):
    """Reduce-scatter inside each domain -> all-reduce between domains -> all-gather inside, in sequence.

    For all-reduce, per rank: ``(nl-1)/nl x S`` at ``b_in`` twice, and ``2 (m-1)/m x S/nl`` at ``b_out``
    (each rank's own share of its NICs carries its 1/nl shard); latencies ``2 (nl-1) l_in + 2 (m-1) l_out``.
    Reduce-scatter and all-gather do one half of it: ``(nl-1)/nl x S`` inside and ``(m-1)/m x S/nl``
    outside. (``collectives-notes.md`` 5.4; Intel Gaudi docs state the same peak.)
    """
    n, nl = _f(n), _f(nl)
    m = n / nl
    size = _f(size_bytes)
    b_in, b_out = _f(b_in), _f(b_out)
    halves = 2.0 if kind == "all-reduce" else 1.0
    if kind not in ("all-reduce", "reduce-scatter", "all-gather"):
        raise ValueError(f"hierarchical has no {kind}")
    intra = np.where(nl > 1, halves * ((nl - 1) / nl * size / b_in + (nl - 1) * _f(l_in)), 0.0)
    inter = np.where(m > 1, halves * ((m - 1) / m * size / nl / b_out + (m - 1) * _f(l_out)), 0.0)
    return np.where(n > 1, intra + inter, 0.0)


def tree_time(kind, size_bytes, n, nl, b_in, b_out, l_in, l_out):
    """NCCL's tree all-reduce: a chain inside each domain, a double binary tree between domains.

    Pipelined, so the slower of the two parts sets the rate:

    * chain: every rank forwards the whole buffer up (reduce) and down (broadcast), egress ``2 S``, except
      the chain's two ends, which send S; NCCL's channels rotate the chain order so every rank is an end
      in 2 of nl channels: average egress ``2 (nl-1)/nl x S`` at ``b_in`` when nl > 1;
    * double binary tree (Sanders et al. 2009): each tree carries S/2; a node is inner in one tree and a
      leaf in the other. The busiest node, inner with a parent and two children, sends S/2 up and S/2 to
      each child in its inner tree plus S/2 up as a leaf of the other: 2S; with three domains no node has
      both a parent and two children (1.5S), with two each sends S/2 per tree (S). See
      :func:`tree_egress_factor`. This crosses the ``nl x b_out`` NIC bandwidth of the group's ranks in
      the domain. With two domains it is S against a ring's 2(n-1)/n S, which is why two-node tree busbw
      exceeds the node's NIC total.
    * latency: ``2 ((nl-1) l_in + ceil(log2 m) l_out)`` (NCCL ``tuning.cc`` composition).
    """
    if kind != "all-reduce":
        raise ValueError(f"tree has no {kind}")
    n, nl = _f(n), _f(nl)
    m = n / nl
    size = _f(size_bytes)
    chain = np.where(nl > 1, 2.0 * (nl - 1) / nl * size / _f(b_in), 0.0)
    trees = np.where(m > 1, tree_egress_factor(m) * size / (nl * _f(b_out)), 0.0)
    depth = np.ceil(np.log2(np.maximum(m, 1.0)))
    latency = 2.0 * ((nl - 1) * _f(l_in) + depth * _f(l_out))
    return np.where(n > 1, latency + np.maximum(chain, trees), 0.0)


def tree_egress_factor(m):
    """Bytes (in units of S) the busiest domain sends in a double-binary-tree all-reduce over m domains.

    Derivation in :func:`tree_time`: 1 for m = 2, 1.5 for m = 3, 2 for m >= 4 (0 for m = 1).
    """
    m = _f(m)
    return np.select([m <= 1, m == 2, m == 3], [0.0, 1.0, 1.5], 2.0)


def direct_all_to_all_time(size_bytes, n, nl, b_in, b_out, l_in, l_out):
    """Pairwise all-to-all: S/n to each peer, intra-domain and inter-domain parts running concurrently.

    Per rank: ``(nl-1) x S/n`` at ``b_in`` and ``(n-nl) x S/n`` at ``b_out`` (its own NIC share);
    the slower part sets the time. Latency: one step per tier used (the sends are issued together).
    Once a scale-out hop is crossed busbw ~ the per-GPU NIC rate (NVIDIA GTC25 all-to-all slide,
    ``collectives-notes.md`` 3.5).
    """
    n, nl = _f(n), _f(nl)
    size = _f(size_bytes)
    intra = np.where(nl > 1, (nl - 1) * size / n / _f(b_in) + _f(l_in), 0.0)
    inter = np.where(n > nl, (n - nl) * size / n / _f(b_out) + _f(l_out), 0.0)
    return np.where(n > 1, np.maximum(intra, inter), 0.0)


def rail_only_all_to_all_time(size_bytes, n, nl, b_in, b_out, l_in, l_out):
    """Pairwise all-to-all on a rail-only fabric: a rank reaches a peer on another rail only through the GPU of
    its own domain on that rail (NCCL PXN; Wang et al., "Rail-only", arXiv 2307.12169, section 4).

    Per rank, besides :func:`direct_all_to_all_time`'s parts, the cross-rail share ``(nl-1)/nl`` of the
    ``(n-nl) x S/n`` bytes for other domains crosses the scale-up link first (its ``nl`` ranks in a domain sit
    on ``nl`` rails, the peers' rails spread evenly), and each forwarded message waits one scale-up step before
    its NIC sends it. The forward is pipelined with the NIC leg (the proxy sends chunk k while chunk k+1
    crosses NVLink), so the two legs still run concurrently: with NVLink far faster than the NIC the penalty is
    the extra step latency, with a PCIe-class scale-up the forwarded bytes set the time (the flow simulator's
    rail-only check, docs/topology.md: 1.000x at 450 GB/s, 1.56x at 32 GB/s). Wang et al.'s two sequential
    phases (NVLink shuffle, then the rail all-to-all) are the no-overlap bound of this form.
    """
    n, nl = _f(n), _f(nl)
    size = _f(size_bytes)
    off = np.where(n > nl, (n - nl) * size / n, 0.0)
    forwarded = np.where(nl > 1, (nl - 1) / nl * off, 0.0)
    intra = np.where(nl > 1, ((nl - 1) * size / n + forwarded) / _f(b_in) + _f(l_in), 0.0)
    inter = np.where(n > nl, off / _f(b_out) + _f(l_out) + np.where(nl > 1, _f(l_in), 0.0), 0.0)
    return np.where(n > 1, np.maximum(intra, inter), 0.0)
