"""All-reduce written on point-to-point send/recv (gloo), so the algorithm choice can be seen on the testbed.

Each function sums ``tensor`` (1-D, float32) in place over ``ranks`` (global rank ids in algorithm order;
the caller's rank is one of them):

* :func:`ring_all_reduce`: reduce-scatter then all-gather around the ring, ``n - 1`` steps each, ``S / n``
  bytes per rank per step (Patarasuk & Yuan, JPDC 2009);
* :func:`tree_all_reduce`: binomial-tree reduce to ``ranks[0]`` then binomial-tree broadcast, ``ceil(log2 n)``
  rounds each, the whole buffer per message (Thakur, Rabenseifner & Gropp, IJHPCA 2005, section 4);
* :func:`hierarchical_all_reduce`: reduce inside each node to its leader (binomial tree on loopback), ring
  all-reduce among the leaders across nodes, broadcast inside each node (collectives-notes.md 5.4).

In a ring step every rank posts its send before its receive (``isend`` then ``recv``), so all links of the
ring carry one message each at once.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ring_all_reduce", "tree_all_reduce", "hierarchical_all_reduce", "ALGORITHMS"]

ALGORITHMS = ("ring", "tree", "hierarchical")


def _bounds(numel: int, parts: int) -> list[tuple[int, int]]:
    base, extra = divmod(numel, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((start, start + size))
        start += size
    return out


def ring_all_reduce(tensor, ranks: Sequence[int], rank: int) -> None:
    import torch
    import torch.distributed as dist

    n = len(ranks)
    if n < 2:
        return
    p = list(ranks).index(rank)
    right, left = ranks[(p + 1) % n], ranks[(p - 1) % n]
    chunks = [tensor[a:b] for a, b in _bounds(tensor.numel(), n)]
    scratch = torch.empty_like(chunks[0])
    for step in range(n - 1):  # reduce-scatter: after it, rank p owns the sum of chunk (p + 1) mod n
        send, recv = chunks[(p - step) % n], chunks[(p - step - 1) % n]
        req = dist.isend(send, right)
        buf = scratch[: recv.numel()]
        dist.recv(buf, left)
        recv.add_(buf)
        req.wait()
    for step in range(n - 1):  # all-gather
        send, recv = chunks[(p + 1 - step) % n], chunks[(p - step) % n]
        req = dist.isend(send, right)
        dist.recv(recv, left)
        req.wait()


def _tree_reduce(tensor, ranks: Sequence[int], rank: int) -> None:
    import torch
    import torch.distributed as dist

    n, p = len(ranks), list(ranks).index(rank)
    scratch = None
    k = 1
    while k < n:
        if p % (2 * k) == k:
            dist.send(tensor, ranks[p - k])
            return
        if p % (2 * k) == 0 and p + k < n:
            scratch = torch.empty_like(tensor) if scratch is None else scratch
            dist.recv(scratch, ranks[p + k])
            tensor.add_(scratch)
        k *= 2


def _tree_broadcast(tensor, ranks: Sequence[int], rank: int) -> None:
    import torch.distributed as dist

    n, p = len(ranks), list(ranks).index(rank)
    k = 1
    while k < n:
        k *= 2
    while k > 1:
        k //= 2
        if p % (2 * k) == 0 and p + k < n:
            dist.send(tensor, ranks[p + k])
        elif p % (2 * k) == k:
            dist.recv(tensor, ranks[p - k])


def tree_all_reduce(tensor, ranks: Sequence[int], rank: int) -> None:
    if len(ranks) < 2:
        return
    _tree_reduce(tensor, ranks, rank)
    _tree_broadcast(tensor, ranks, rank)


def hierarchical_all_reduce(tensor, nodes: Sequence[Sequence[int]], rank: int) -> None:
    """``nodes``: the ranks of each node (the first of each is its leader)."""
    mine = next(group for group in nodes if rank in group)
    _tree_reduce(tensor, mine, rank)
    if rank == mine[0]:
        ring_all_reduce(tensor, [group[0] for group in nodes], rank)
    _tree_broadcast(tensor, mine, rank)
