"""Context parallelism: ring attention's K/V passes, each at the pace of the ring's slowest hop, hidden behind
the attention core."""

from __future__ import annotations

import numpy as np

from tierwise.pricing.comm import hop_times, pick, placed_hops

__all__ = ["cp_layer_comm"]


def cp_layer_comm(cluster, plans, P, C, traffic, strides, interference, *, parameters):
    """(tier, seconds, exposed seconds, bytes) of one layer's ring-attention traffic on one rank.

    Every rank passes its K/V chunk to the next at once, so a pass lasts as long as the ring's slowest hop (the
    wrap-around included): a ring that leaves a node anywhere runs every pass at the scale-out rate. The
    forward's passes hide behind the attention core, the backward's behind its two GEMMs' worth (2 x core)
    (Liu et al. 2023, "Ring Attention", sec. 3); the hidden part still costs ``overlap_interference`` of its
    time, as TP's and DP's do.
    """
    n = P.n
    (ring,) = traffic["cp"]
    hops = placed_hops(cluster, plans.cp, strides["cp"], ring=True)
    if not np.any(plans.cp > 1):
        zero = np.zeros(n)
        return hops.tier, zero, zero, zero
    p2p = pick(hops.slowest, hop_times(cluster, ring.bytes, hops, parameters=parameters))
    fwd = ring.counts["forward"] * p2p
    t = ring.calls * p2p
    exposed = np.maximum(fwd - C.core_t, 0) + np.maximum(2 * fwd - 2 * C.core_t, 0)
    exposed = exposed + interference * (t - exposed)
    return hops.tier, t, exposed, ring.calls * ring.bytes
