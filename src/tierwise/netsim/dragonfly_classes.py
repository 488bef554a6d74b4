"""Dragonfly hops of the path classes' group-pair units, UGAL's minimal / Valiant split included.

Minimal pairs (issue 19): a flow from router ``r`` of group ``G`` to group ``H`` hashes one of the
``glob_count[G, H]`` global links, crossing the local link from ``r`` to that link's router first and
from the far router to the destination router last; the choices are counted by the per-flow hash up to
``HASH_FLOWS_MAX`` flows (:func:`hashed_global_choices`) and drawn from its law above (:mod:`.classes`).

Hot pairs (issue 34): where UGAL-G (:func:`tierwise.netsim.routing.dragonfly_ugal`; Kim, Dally, Scott,
Abts, ISCA 2008, section 4.2) diverts a group pair -- its flows per minimal global link above twice the
fabric-wide average -- each flow keeps the share ``keep = 2 L_avg / L_min`` on ``MIN_SPREAD`` hashed
minimal sub-paths and spreads ``1 - keep`` over ``k`` Valiant sub-paths (``valiant_count``): the
intermediate groups at ``k`` consecutive offsets from a hashed start, a first global link the source
router owns to that group when it has one (else a hashed one of the pair's), a hashed onward link.
Routing is linear in the sub-paths' byte shares, so a unit's crossings of a link are the sum over its
flows' sub-paths of their shares (a sub-path of a ``w`` share counts ``w`` flows). The hash choices of
these sub-paths are drawn from their law hop by hop, as the minimal pairs' are above ``HASH_FLOWS_MAX``:
start offsets Multinomial(flows, 1/(g-2)) per (unit, source router), the window of ``k`` offsets then
gives each intermediate group its sub-paths exactly; each global link uniform over its candidates; the
onward link per arriving global link; the destination side drawn again per (unit, destination router).
What is dropped is the coupling of one sub-path's first and last hop, as for minimal pairs (measured
against per flow in docs/topology.md and tests/netsim/test_classes.py).
"""

from __future__ import annotations

import numpy as np

from tierwise.netsim._draws import (
    check_counts,
    counts_over_mask,
    multinomial_rows,
    pairs_within,
    uniform_counts,
)
from tierwise.netsim.routing import MIN_SPREAD, flow_hash, valiant_count
from tierwise.topology.graph import Fabric

__all__ = ["ugal_pairs", "dragonfly_hops", "hashed_global_choices", "UGAL_ENTRIES_MAX"]

UGAL_ENTRIES_MAX = 1 << 25
"""Most (unit, router, intermediate group, global link) cells the hot pairs' Valiant hops may take (about
0.3 GB of int64 per array); a larger split is refused (:class:`tierwise.netsim.classes.NotAggregated`)."""


def ugal_pairs(fab: Fabric, nic: np.ndarray):
    """UGAL's decision for an all-to-all among NICs ``nic``, as :func:`tierwise.netsim.routing.dragonfly_ugal`
    takes it: (hot[G, H] diverted pairs, keep[G, H] minimal share ``2 L_avg / L_min``, k Valiant sub-paths)."""
    tb = fab.tables
    g = tb["groups"]
    gsz = np.bincount(tb["nic_router"][nic] // tb["a"], minlength=g).astype(float)
    flows = np.outer(gsz, gsz)
    np.fill_diagonal(flows, 0.0)
    l_min = flows / np.maximum(tb["glob_count"], 1)
    l_avg = flows.sum() / tb["glob_count"].sum()
    hot = (l_min > 2 * l_avg) if g >= 3 else np.zeros((g, g), dtype=bool)
    keep = np.where(hot, 2 * l_avg / np.maximum(l_min, 1e-300), 1.0)
    return hot, keep, valiant_count(int(flows[hot].sum()), g)


def ugal_cells(fab: Fabric, hot: np.ndarray) -> int:
    """Cells the Valiant hops of the ``hot`` pairs take (compared with ``UGAL_ENTRIES_MAX``)."""
    tb = fab.tables
    M = tb["glob"].shape[2]
    return int(hot.sum()) * max(tb["groups"] - 2, 1) * M * max(tb["a"], M)


def dragonfly_hops(fab, rng, hop, units, *, margins, classes, flows_tot, hashed=None, ugal=None):
    """local -> global -> local hops of every group-pair unit ``units = (uid_bb, b1, b2)``; ``margins`` =
    (N_eb, N_be, intra-domain class pairs), ``classes`` = (size, edge, bundle) of the endpoint classes;
    ``hashed`` = (T1, T2) of :func:`hashed_global_choices` replaces the minimal pairs' draws by the per-flow
    hash's counts; ``ugal`` = :func:`ugal_pairs` splits its hot pairs (module docstring)."""
    tb = fab.tables
    a, g = tb["a"], tb["groups"]
    uid_bb, b1, b2 = units
    N_eb, N_be, Dcsr = margins
    if (b1 == b2).any():
        _same_group_hops(tb, hop, uid_bb, classes, Dcsr, flows_tot)
    hot = ugal[0] if ugal is not None else np.zeros((g, g), dtype=bool)
    r = np.arange(a)[None, :]
    for sel, is_hot in ((np.nonzero((b1 != b2) & ~hot[b1, b2])[0], False),
                        (np.nonzero((b1 != b2) & hot[b1, b2])[0], True)):
        if not sel.size:
            continue
        G1, G2 = b1[sel], b2[sel]
        pair = (uid_bb[G1, G2], G1, G2)
        n_src = N_eb[G1[:, None] * a + r, G2[:, None]].astype(np.int64)
        n_dst = N_be[G1[:, None], G2[:, None] * a + r].astype(np.int64)
        if is_hot:
            _hot_pair_hops(fab, rng, hop, pair, (n_src, n_dst), ugal, flows_tot)
        else:
            _minimal_pair_hops(fab, rng, hop, pair, (n_src, n_dst), hashed, flows_tot)


def _same_group_hops(tb, hop, uid_bb, classes, Dcsr, flows_tot):
    """Same group, different routers: one local hop, flows per router pair."""
    csize, cedge, cbundle = classes
    a = tb["a"]
    order = np.argsort(cbundle, kind="stable")
    i, j = pairs_within(cbundle[order])
    i, j = order[i], order[j]
    diff = cedge[i] != cedge[j]
    i, j = i[diff], j[diff]
    X = csize[i] * csize[j] - (np.asarray(Dcsr[i, j]).ravel() if i.size else 0.0)
    gg = cbundle[i]
    hop(uid_bb[gg, gg], tb["local"][gg, cedge[i] % a, cedge[j] % a], X, flows_tot)


def _minimal_pair_hops(fab, rng, hop, pair, n, hashed, flows_tot):
    """A minimal pair's flows: one global link each, hashed (``hashed`` counts) or drawn from its law."""
    tb = fab.tables
    a, M = tb["a"], tb["glob"].shape[2]
    _, G1, G2 = pair
    n_src, n_dst = n
    cnt = np.repeat(np.maximum(tb["glob_count"][G1, G2], 1), a)
    if hashed is None:
        c1 = uniform_counts(rng, n_src.ravel(), cnt, M)
        c3 = uniform_counts(rng, n_dst.ravel(), cnt, M)
    else:
        r = np.arange(a)[None, :]
        c1 = hashed[0][(G1[:, None] * a + r).ravel(), np.repeat(G2, a)]
        c3 = hashed[1][np.repeat(G1, a), :, (G2[:, None] * a + r).ravel()]
        check_counts(c3, n_dst.ravel())
    check_counts(c1, n_src.ravel())
    _global_hops(fab, hop, pair, (c1, c3), np.ones(G1.size), flows_tot)


def _global_hops(fab, hop, pair, counts, w, flows_tot):
    """Entries of minimal (sub-)paths: ``counts`` = (c1[(unit, source router), m], c3[(unit, destination
    router), m]) over the pair's global links m, each worth ``w[unit]`` flows."""
    tb = fab.tables
    a, base, M = tb["a"], tb["router_base"], tb["glob"].shape[2]
    uid, G1, G2 = pair
    c1, c3 = counts
    glink = tb["glob"][G1[:, None], G2[:, None], np.arange(M)[None, :]]
    gsafe = np.maximum(glink, 0)
    r1, r2 = fab.link_src[gsafe] - base, fab.link_dst[gsafe] - base
    ru = np.repeat(np.arange(uid.size), a)
    rr = G1[ru] * a + np.tile(np.arange(a), uid.size)
    wr = w[ru][:, None]
    loc1 = np.where(r1[ru] != rr[:, None], tb["local"][G1[ru][:, None], rr[:, None] % a, r1[ru] % a], -1)
    hop(uid[ru][:, None], loc1, c1 * wr, flows_tot)
    Nm = np.zeros((uid.size, M), dtype=np.int64)
    np.add.at(Nm, ru, c1)
    hop(uid[:, None], glink, Nm * w[:, None], flows_tot)
    rt = G2[ru] * a + np.tile(np.arange(a), uid.size)
    loc3 = np.where(r2[ru] != rt[:, None], tb["local"][G2[ru][:, None], r2[ru] % a, rt[:, None] % a], -1)
    hop(uid[ru][:, None], loc3, c3 * wr, flows_tot)


def _hot_pair_hops(fab, rng, hop, pair, n, ugal, flows_tot):
    """A hot pair's flows: ``keep`` over ``MIN_SPREAD`` minimal sub-paths, the rest over ``k`` Valiant ones."""
    tb = fab.tables
    a, M = tb["a"], tb["glob"].shape[2]
    _, G1, G2 = pair
    n_src, n_dst = n
    _, keep, k = ugal
    kp = keep[G1, G2]
    cnt = np.repeat(np.maximum(tb["glob_count"][G1, G2], 1), a)
    c1 = uniform_counts(rng, MIN_SPREAD * n_src.ravel(), cnt, M)
    c3 = uniform_counts(rng, MIN_SPREAD * n_dst.ravel(), cnt, M)
    _global_hops(fab, hop, pair, (c1, c3), kp / MIN_SPREAD, flows_tot)
    _valiant_hops(fab, rng, hop, pair, n, ((1.0 - kp) / k, k), flows_tot)


def _sub_paths_by_offset(rng, n: np.ndarray, m: int, k: int) -> np.ndarray:
    """Rows of ``n`` flows, each with ``k`` sub-paths through consecutive offsets (mod ``m``) from a uniform
    start: sub-paths per offset (start offsets drawn, then the window counted exactly)."""
    starts = multinomial_rows(rng, n.ravel(), np.full(m, 1.0 / m))
    win = np.bincount(np.arange(k) % m, minlength=m)
    off = np.arange(m)
    return starts @ win[(off[None, :] - off[:, None]) % m]


def _valiant_hops(fab, rng, hop, pair, n, split, flows_tot):
    """Valiant sub-paths G1 -> I -> G2 of a hot pair (module docstring), each worth ``split[0][unit]``."""
    tb = fab.tables
    a, g, base, M = tb["a"], tb["groups"], tb["router_base"], tb["glob"].shape[2]
    uid, G1, G2 = pair
    w, k = split
    x, m = uid.size, g - 2
    off = np.arange(m)[None, :]
    mid = off + (off >= np.minimum(G1, G2)[:, None])
    mid = mid + (mid >= np.maximum(G1, G2)[:, None])  # (x, m) intermediate groups, as routing's offsets
    vs = _sub_paths_by_offset(rng, n[0], m, k).reshape(x, a, m)
    cand = tb["glob"][G1[:, None], mid]  # (x, m, M) links G1 -> I
    owner = np.where(cand >= 0, fab.link_src[np.maximum(cand, 0)] - base, -1)
    rs = (G1[:, None] * a + np.arange(a)[None, :])[:, :, None, None]
    own = owner[:, None] == rs
    choice = np.where(own.any(axis=-1, keepdims=True), own, (cand >= 0)[:, None])
    c1 = counts_over_mask(rng, vs.ravel(), choice.reshape(-1, M)).reshape(x, a, m, M)
    ww = w[:, None, None, None]
    uu = uid[:, None, None, None]
    loc1 = np.where(owner[:, None] != rs, tb["local"][G1[:, None, None, None], rs % a, owner[:, None] % a], -1)
    hop(uu, loc1, c1 * ww, flows_tot)
    arrive = c1.sum(axis=1)  # (x, m, M) sub-paths on each first global link
    hop(uid[:, None, None], cand, arrive * w[:, None, None], flows_tot)
    cand2 = tb["glob"][mid, G2[:, None]]  # (x, m, M) links I -> G2, hashed among them
    cnt2 = np.maximum(tb["glob_count"][mid, G2[:, None]], 1)
    c2 = uniform_counts(rng, arrive.ravel(), np.repeat(cnt2.ravel(), M), M).reshape(x, m, M, M)
    r2 = (fab.link_dst[np.maximum(cand, 0)] - base)[..., None]
    r3 = (fab.link_src[np.maximum(cand2, 0)] - base)[:, :, None, :]
    loc2 = np.where(r2 != r3, tb["local"][mid[:, :, None, None], r2 % a, r3 % a], -1)
    hop(uu, loc2, c2 * ww, flows_tot)
    hop(uid[:, None, None], cand2, c2.sum(axis=2) * w[:, None, None], flows_tot)
    vd = _sub_paths_by_offset(rng, n[1], m, k)  # the destination side's own draw, per (unit, router)
    c3 = uniform_counts(rng, vd.ravel(), np.broadcast_to(cnt2[:, None, :], (x, a, m)).ravel(), M).reshape(x, a, m, M)
    r4 = (fab.link_dst[np.maximum(cand2, 0)] - base)[:, None]
    rt = (G2[:, None] * a + np.arange(a)[None, :])[:, :, None, None]
    loc3 = np.where(r4 != rt, tb["local"][G2[:, None, None, None], r4 % a, rt % a], -1)
    hop(uu, loc3, c3 * ww, flows_tot)


def hashed_global_choices(fab, R, router, dom_size, seed, minimal, chunk: int = 1 << 18):
    """Per-flow global-link choices of a dragonfly all-to-all among GPUs ``R``, counted, not drawn.

    :func:`tierwise.netsim.routing.route` sends a flow from GPU s (router rs, group G) to GPU t (router rt,
    group H) over global link ``m = hash(s, t, seed) mod glob_count[G, H]``, crossing the local links
    rs -> (m's router in G) and (m's router in H) -> rt. Here every such flow of a ``minimal[G, H]`` group
    pair (UGAL's hot pairs apart; intra-domain flows apart, they take the scale-up path) is hashed by
    the same function, in chunks of ``chunk`` flows with reused buffers, and counted: ``T1[rs, H, m]`` and
    ``T2[G, m, rt]``, the only two margins the units' hop entries need. Every link then carries exactly the
    per-flow count. About 30 ns a flow on one core (0.5 s for 4,096 ranks), hence the ``HASH_FLOWS_MAX``
    limit above which the counts are drawn."""

    tb = fab.tables
    a, g = tb["a"], tb["groups"]
    M = tb["glob"].shape[2]
    nr = g * a
    cnt = np.maximum(tb["glob_count"], 1).astype(np.uint64)
    grp = router // a
    n = R.size
    T1 = np.zeros(nr * g * M, dtype=np.int64)
    T2 = np.zeros(g * M * nr, dtype=np.int64)
    rows = max(1, chunk // n)
    z = np.empty(rows * n, dtype=np.uint64)
    tmp = np.empty_like(z)
    t_gpu, t_grp = np.tile(R, rows), np.tile(grp, rows)
    t_router, t_dom = np.tile(router, rows), np.tile(R // dom_size, rows)
    for start in range(0, n, rows):
        k = min(rows, n - start)
        size = k * n
        s_gpu = np.repeat(R[start:start + k], n)
        h = flow_hash(s_gpu, t_gpu[:size], seed, 0, out=z[:size], tmp=tmp[:size])
        gs = np.repeat(grp[start:start + k], n)
        gt = t_grp[:size]
        keep = minimal[gs, gt] & (gs != gt)
        if dom_size > 1:
            keep &= (s_gpu // dom_size) != t_dom[:size]
        gs, gt = gs[keep], gt[keep]
        m = (h[keep] % cnt[gs, gt]).astype(np.int64)
        rs = np.repeat(router[start:start + k], n)[keep]
        T1 += np.bincount((rs * g + gt) * M + m, minlength=T1.size)
        T2 += np.bincount((gs * M + m) * nr + t_router[:size][keep], minlength=T2.size)
    return T1.reshape(nr, g, M), T2.reshape(g, M, nr)
