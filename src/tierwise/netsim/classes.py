"""All-to-all by path classes: n (n - 1) flows as a few thousand weighted units (issue 19).

Why it is exact where the fabric is symmetric. Max-min fair rates are unique (Bertsekas & Gallager,
*Data Networks*, section 6.5.2), so a permutation of the GPUs that maps the instance onto itself (same
flows, same demands, resources mapped onto resources of equal capacity) maps the allocation onto itself:
flows in one orbit get equal rates, and resources in one orbit carry equal loads. Progressive filling on
the quotient -- one unit per class of flows with ``A[r, u]`` = the class's crossings of the links in
resource class ``r``, one resource per class of links with their summed capacity -- then sees, at every
step, the per-link share ``residual_r / load_r`` of the original (numerator and denominator both scale
with the number of links in the class), so it freezes the same flows at the same rates; the event-driven
re-sharing of :func:`tierwise.netsim.simulate._direct` keeps that invariant because flows of one class
finish together. Here:

* **endpoint classes**: the alive GPUs behind one edge switch (fat-tree leaf or dragonfly router) with the
  same number of alive GPUs in their scale-up domain and on their NIC; their NIC up-links, NIC down-links
  and scale-up links are each lumped into one resource of summed capacity;
* **units**: the intra-domain flows of each pair of endpoint classes; the cross-domain flows inside one
  edge switch; and the cross-switch flows of each pair of *bundles* (fat-tree pods for 3 tiers, leaves for
  2 tiers, dragonfly groups), moving in lock step as one unit with their crossings of every link.

With adaptive routing a fat tree's fabric resources are per-leaf and per-pod link groups, the same for all
flows of a unit, so on a full, healthy fabric (every leaf and pod alike) the answer is the per-flow one.
Under **ECMP** each flow hashes its own next hops (RFC 2992), so flows of a unit cross different links;
at 16K GPUs a leaf pair's 1,024 flows spread over 1,024 different 3-tier paths, so no aggregation can keep
each flow's path. We keep each *link's* flow count instead: a hash of independent (source, destination)
pairs picks each next hop uniformly, so the count on a link is a sum of independent uniform choices, and
we draw those counts hop by hop -- Multinomial(flows of the unit leaving leaf l, uplinks) for the leaf's
uplinks, then each uplink's flows Multinomial over the next hop's choices and over destination leaves in
proportion to their flows. Every link's count has the per-flow distribution (Binomial(n, 1/u)); the
coupling between a flow's first and last hop is dropped. Flows of a unit then share one rate, limited by
the unit's hottest link (per flow, the hot link's flows are the slow ones and set the completion time
either way). A drawn hottest link is another draw than the hashed one, so up to ``HASH_FLOWS_MAX`` flows
(4,096 ranks) the counts are not drawn but counted by the per-flow router's own hash
(:func:`_hashed_tree_choices`; 30 ns a flow in chunks): every link then carries its per-flow count and the
ECMP time is the per-flow one; ``tests/netsim/test_classes.py`` checks both paths against per flow.

Dragonfly (minimal routing; UGAL keeps minimal paths for uniform traffic on a balanced dragonfly, Kim et
al. ISCA 2008 section 4.2): a flow from router ``r`` of group ``G`` to group ``H`` hashes one of the
``glob_count[G, H]`` global links, crossing the local link from ``r`` to that link's router first and from
the far router to the destination router last. That one hash decides every hop, under ECMP and UGAL alike,
and the local links it loads unevenly set the completion time (the most loaded link's flows finish last,
per flow and per unit alike). Up to ``HASH_FLOWS_MAX`` flows the choices are therefore not drawn but
counted by the per-flow router's own hash (:func:`_hashed_global_choices`, chunked: 30 ns a flow), so every
link carries exactly its per-flow count and the answer is the per-flow one; above it they are drawn as on
a fat tree (a different draw of the hottest link: measured 0.98-1.01 of the hashed answer at 2,048-16,384
GPUs, docs/topology.md). Group pairs UGAL sends non-minimally (:func:`tierwise.netsim.routing.dragonfly_ugal`)
split over minimal and Valiant sub-paths as the per-flow router splits them, their choices drawn
(:mod:`tierwise.netsim.dragonfly_classes`; measured 0.998-1.005 of per flow, docs/topology.md). Where the fabric or routing is one this module does not model (failures that
reroute or fail over, rail-only PXN, a switchless mesh, a torus), :func:`class_problem` raises
:class:`NotAggregated` and the caller simulates per flow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.netsim._draws import check_counts, multinomial_rows, pairs_within
from tierwise.netsim.dragonfly_classes import (
    UGAL_ENTRIES_MAX,
    dragonfly_hops,
    hashed_global_choices,
    ugal_cells,
    ugal_pairs,
)
from tierwise.netsim.routing import flow_hash, nic_access, splitmix
from tierwise.topology.graph import Fabric

__all__ = ["ClassProblem", "NotAggregated", "class_problem", "LUMP_KINDS", "HASH_FLOWS_MAX"]

LUMP_KINDS = ("access up", "access down", "scale-up up", "scale-up down")

HASH_FLOWS_MAX = 1 << 24
"""Up to this many flows (4,096 ranks) a dragonfly's global-link choices and a fat tree's ECMP next hops are
hashed flow by flow as the per-flow router hashes them (about 30 ns a flow, 0.5-1.5 s at the limit on the
dev VM); above it they are drawn (the module docstring)."""


class NotAggregated(Exception):
    """The fabric or routing is outside what path classes model; the reason is the message."""


@dataclass
class ClassProblem:
    """A max-min instance over units (classes of flows) and resources (links or groups, then lumps)."""

    A: object
    """resources x units (scipy CSR): flows of the unit crossing the resource (lumps: summed over links)."""
    cap: np.ndarray
    num_fabric: int
    """Resources ``[0, num_fabric)`` are fabric links (ECMP) or link groups (adaptive); the rest are lumps."""
    lump_kind: np.ndarray
    lump_edge: np.ndarray
    """Edge switch (graph node id) of the lump's class."""
    lump_links: np.ndarray
    """Links lumped together."""
    unit_flows: np.ndarray
    unit_local: np.ndarray
    """True for intra-domain (scale-up) units."""
    unit_lat_mean: np.ndarray
    unit_lat_max: np.ndarray
    unit_paths: np.ndarray
    """Paths per flow (1: UGAL's Valiant splits are routed per flow, :func:`class_problem`)."""
    link_flows: np.ndarray
    """Flows offered to every directed link (sampled under ECMP), for the link-load distribution."""
    num_flows: int
    hop_choices: str = "none"
    """How the hashed next hops were counted: "hashed" (the per-flow hash, below ``HASH_FLOWS_MAX``), "drawn"
    (above it), "hashed+drawn" (hashed, but UGAL's split of diverted dragonfly group pairs drawn), or "none"
    (a fat tree under adaptive routing: link groups make the choice moot)."""


class _Builder:
    """Accumulates (unit, link-or-lump, flows) entries and each unit's path latency, hop by hop."""

    def __init__(self, fab: Fabric):
        self.u, self.r, self.w = [], [], []
        self.fab = fab
        self.num_links = fab.num_links
        self.flows, self.local = [], []
        self.next_unit = 0
        self.pending = []  # (units, lat_mean contribution, lat_max contribution) of endpoint lumps
        self.pending_hops = []  # (per-unit mean, per-unit max) of one fabric hop
        self.lat_values = np.unique(fab.link_lat)

    def new_units(self, flows: np.ndarray, local: bool) -> np.ndarray:
        ids = np.arange(self.next_unit, self.next_unit + flows.size)
        self.next_unit += flows.size
        self.flows.append(np.asarray(flows, dtype=float))
        self.local.append(np.full(flows.size, local))
        return ids

    def add(self, unit, res, flows, *, link: bool, filtered: bool = False):
        """Entries; ``link`` True: ``res`` are fabric link ids, else lump ids (stored as ``-1 - id``)."""
        if not filtered:
            unit, res, flows = np.broadcast_arrays(np.asarray(unit), np.asarray(res), np.asarray(flows, dtype=float))
            keep = (flows > 0) & (res >= 0)
            unit, res, flows = unit[keep], res[keep], flows[keep]
        self.u.append(np.asarray(unit, dtype=np.int32))
        self.r.append(np.asarray(res if link else -1 - res, dtype=np.int32))
        self.w.append(np.asarray(flows, dtype=float))

    def hop(self, units, links, flows, unit_flows_total):
        """Add one hop's entries (``flows`` of each unit on each link) and its latency to the units' path
        latency: the flow-weighted mean of the hop's latency, and its largest."""
        units, links, flows = np.broadcast_arrays(np.asarray(units), np.asarray(links), np.asarray(flows, dtype=float))
        keep = (flows > 0) & (links >= 0)
        u, lk, f = units[keep], links[keep], flows[keep]
        self.add(u, lk, f, link=True, filtered=True)
        lat = self.fab.link_lat[lk]
        num = unit_flows_total.size
        mean = np.bincount(u, weights=lat * f, minlength=num) / np.maximum(unit_flows_total, 1e-300)
        mx = np.zeros(num)
        if self.lat_values.size == 1:
            mx[u] = self.lat_values[0]
        else:
            for v in self.lat_values:  # ascending: the largest latency a unit's hop has wins
                mx[u[lat == v]] = v
        self.pending_hops.append((mean, mx))

    def latencies(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, max) path latency of every unit: endpoint lumps plus every fabric hop."""
        num_units = self.next_unit
        lat_mean = np.zeros(num_units)
        lat_max = np.zeros(num_units)
        for u, m, mx in self.pending:
            lat_mean += np.bincount(u, weights=m, minlength=num_units)
            hop_max = np.zeros(num_units)
            np.maximum.at(hop_max, u, mx)
            lat_max += hop_max
        for m, mx in self.pending_hops:
            lat_mean[: m.size] += m
            lat_max[: mx.size] += mx
        return lat_mean, lat_max

    def finish(self, link_map: np.ndarray, num_fabric: int, lump_cap: np.ndarray):
        from scipy import sparse

        units = np.concatenate(self.u) if self.u else np.zeros(0, dtype=np.int32)
        self.u = None
        res = np.concatenate(self.r) if self.r else np.zeros(0, dtype=np.int32)
        self.r = None
        w = np.concatenate(self.w) if self.w else np.zeros(0)
        self.w = None
        is_link = res >= 0
        link_flows = np.bincount(res[is_link], weights=w[is_link], minlength=self.num_links)
        rid = np.where(is_link, link_map.astype(np.int32)[np.maximum(res, 0)], num_fabric + (-1 - res))
        del res, is_link
        A = sparse.coo_matrix((w, (rid, units)), shape=(num_fabric + lump_cap.size, self.next_unit)).tocsr()
        return A, link_flows


@dataclass
class _Endpoints:
    """Endpoint classes of an all-to-all (module docstring) and their lumped NIC / scale-up resources."""

    R: np.ndarray
    nic: np.ndarray
    dom_size: int
    su: bool
    tree: dict | None
    edge: np.ndarray
    cls: np.ndarray
    cedge: np.ndarray
    cbundle: np.ndarray
    csize: np.ndarray
    num_edges: int
    num_bundles: int
    lump_cap: np.ndarray = None
    lump_links: np.ndarray = None
    lump_rep: np.ndarray = None
    first: np.ndarray = None
    """Position in ``R`` of the first GPU on each NIC in use (``nic[first]`` are the NICs, sorted)."""

    @property
    def num_classes(self) -> int:
        return self.cedge.size


def _lump(c, kind):
    """Lump id of class ``c``'s resource ``kind`` (an index of ``LUMP_KINDS``)."""
    return 4 * np.asarray(c) + kind


def class_problem(fab: Fabric, alive: np.ndarray, *, routing: str, seed: int, link_ok: np.ndarray,
                  nics: np.ndarray, link_cap: np.ndarray, hash_flows_max: int | None = None) -> ClassProblem:
    """The path-class instance of a direct all-to-all among GPUs ``alive`` (see the module docstring).

    A dragonfly's global-link choices and a fat tree's ECMP next hops are hashed flow by flow (as per flow)
    when the all-to-all has at most ``hash_flows_max`` flows (default ``HASH_FLOWS_MAX``), else drawn
    (``hash_flows_max=0`` always draws: tests compare the two). On a dragonfly under adaptive routing the
    group pairs UGAL diverts are split as :func:`tierwise.netsim.routing.dragonfly_ugal` splits them
    (:mod:`tierwise.netsim.dragonfly_classes`)."""
    if hash_flows_max is None:
        hash_flows_max = HASH_FLOWS_MAX
    ep = _endpoints(fab, alive, link_ok, nics, link_cap)
    ugal = None
    if fab.family == "dragonfly" and routing == "adaptive":
        ugal = ugal_pairs(fab, ep.nic)
        if ugal_cells(fab, ugal[0]) > UGAL_ENTRIES_MAX:
            raise NotAggregated(f"UGAL's split of {int(ugal[0].sum()):,} diverted group pairs over "
                                f"{fab.tables['groups']} groups (more than {UGAL_ENTRIES_MAX:,} cells)")
    rng = np.random.default_rng([int(seed), 19])
    bld = _Builder(fab)
    intra, flows_in = _intra_domain_units(bld, fab, ep)
    flows_edge = _edge_units(bld, fab, ep, intra)
    n = ep.R.size
    hashing = n * (n - 1) <= hash_flows_max
    flows_far = _bundle_units(bld, fab, ep, intra, rng=rng, routing=routing, seed=seed, hashing=hashing,
                              ugal=ugal)
    expected = float(n) * (n - 1)
    total = flows_in + flows_edge + flows_far
    if abs(total - expected) > 1e-6 * expected:
        raise AssertionError(f"path classes hold {total} flows, expected {expected}")
    if fab.family != "dragonfly" and (routing == "adaptive" or ep.tree["tiers"] == 1):
        hop_choices = "none"
    else:
        hop_choices = "hashed" if hashing else "drawn"
        if ugal is not None and ugal[0].any() and hashing:
            hop_choices = "hashed+drawn"
    return _assemble(bld, fab, ep, routing=routing, link_cap=link_cap, num_flows=int(expected),
                     hop_choices=hop_choices)


def _aggregable(fab: Fabric, alive, link_ok, nics):
    """(sorted GPUs, their NICs, domain size, NVSwitch scale-up?) or :class:`NotAggregated` with the reason."""
    fam = fab.family
    tb = fab.tables
    single_tree = fam in ("fat-tree", "rail-optimized", "nvl72") and len(tb.get("trees", [])) == 1
    if fam != "dragonfly" and not single_tree:
        raise NotAggregated(f"the {fam} fabric")
    if fab.scale_up not in ("nvswitch", "none"):
        raise NotAggregated(f"a {fab.scale_up} scale-up domain")
    R = np.sort(np.asarray(alive, dtype=np.int64))
    nic = nics[R]
    up, down = nic_access(fab)
    if ((nic < 0).any() or (nic != fab.gpu_nic[R]).any() or not link_ok[fab.link_tier >= 2].all()
            or not (link_ok[up[nic]] & link_ok[down[nic]]).all()):
        raise NotAggregated("failed links or NICs")
    dom_size = fab.domain_size if fab.scale_up != "none" else 1
    su = fab.scale_up == "nvswitch" and dom_size > 1
    if su and not (link_ok[tb["gpu_up"][R]] & link_ok[tb["gpu_down"][R]]).all():
        raise NotAggregated("failed scale-up links")
    return R, nic, dom_size, su


def _endpoints(fab: Fabric, alive, link_ok, nics, link_cap) -> _Endpoints:
    """Endpoint classes: GPUs behind one edge switch with the same alive GPUs per domain and per NIC."""
    R, nic, dom_size, su = _aggregable(fab, alive, link_ok, nics)
    tb = fab.tables
    tree = None
    if fab.family == "dragonfly":
        edge = tb["nic_router"][nic]
        bundle_of, num_edges = (lambda e: e // tb["a"]), tb["groups"] * tb["a"]
    else:
        tree = tb["trees"][0]
        edge = tree["nic_leaf"][nic]
        half = tree["k"] // 2
        bundle_of = {1: np.zeros_like, 2: lambda e: e, 3: lambda e: e // half}[tree["tiers"]]
        num_edges = tree["num_leaves"]
    dom = R // dom_size
    dcount = np.bincount(dom)[dom]
    ncount = np.bincount(nic)[nic]
    keys, cls = np.unique(np.stack([edge, dcount, ncount], axis=1), axis=0, return_inverse=True)
    cls = cls.ravel()
    cbundle = bundle_of(keys[:, 0])
    ep = _Endpoints(R=R, nic=nic, dom_size=dom_size, su=su, tree=tree, edge=edge, cls=cls, cedge=keys[:, 0],
                    cbundle=cbundle, csize=np.bincount(cls, minlength=keys.shape[0]).astype(float),
                    num_edges=num_edges, num_bundles=int(cbundle.max()) + 1)
    _lumps(fab, ep, link_cap)
    return ep


def _lumps(fab: Fabric, ep: _Endpoints, link_cap) -> None:
    """Lumped endpoint resources, 4 per class (``LUMP_KINDS``): capacity, links lumped, a representative."""
    C, cls = ep.num_classes, ep.cls
    up, down = nic_access(fab)
    un, first = np.unique(ep.nic, return_index=True)
    lump_cap = np.zeros((C, 4))
    lump_links = np.zeros((C, 4), dtype=np.int64)
    lump_cap[:, 0] = np.bincount(cls[first], weights=link_cap[up[un]], minlength=C)
    lump_cap[:, 1] = np.bincount(cls[first], weights=link_cap[down[un]], minlength=C)
    lump_links[:, 0] = lump_links[:, 1] = np.bincount(cls[first], minlength=C)
    lump_rep = np.zeros((C, 4), dtype=np.int64)
    lump_rep[cls[first], 0] = up[un]
    lump_rep[cls[first], 1] = down[un]
    if ep.su:
        gu, gd = fab.tables["gpu_up"][ep.R], fab.tables["gpu_down"][ep.R]
        lump_cap[:, 2] = np.bincount(cls, weights=link_cap[gu], minlength=C)
        lump_cap[:, 3] = np.bincount(cls, weights=link_cap[gd], minlength=C)
        lump_links[:, 2] = lump_links[:, 3] = ep.csize
        lump_rep[cls, 2] = gu
        lump_rep[cls, 3] = gd
    ep.lump_cap, ep.lump_links, ep.lump_rep, ep.first = lump_cap, lump_links, lump_rep, first


def _intra_domain_units(bld: _Builder, fab: Fabric, ep: _Endpoints):
    """Intra-domain flows, one unit per pair of classes sharing domains. Returns ((d1, d2, flows, CSR of
    them), flows placed)."""
    from scipy import sparse

    C, cls, n = ep.num_classes, ep.cls, ep.R.size
    dom_idx = np.unique(ep.R // ep.dom_size, return_inverse=True)[1].ravel()
    M = sparse.csr_matrix((np.ones(n), (dom_idx, cls)), shape=(int(dom_idx.max()) + 1, C))
    D = ((M.T @ M).tocsr() - sparse.diags(ep.csize)).tocoo()
    keepD = D.data > 0.5
    d1, d2, dv = D.row[keepD], D.col[keepD], D.data[keepD]
    placed = 0.0
    if ep.su and dv.size:
        uid = bld.new_units(dv, local=True)
        bld.add(uid, _lump(d1, 2), dv, link=False)
        bld.add(uid, _lump(d2, 3), dv, link=False)
        lat = fab.link_lat[ep.lump_rep[d1, 2]] + fab.link_lat[ep.lump_rep[d2, 3]]
        bld.pending.append((uid, lat, lat))
        placed = float(dv.sum())
    Dcsr = sparse.csr_matrix((dv, (d1, d2)), shape=(C, C)) if dv.size else sparse.csr_matrix((C, C))
    return (d1, d2, dv, Dcsr), placed


def _edge_units(bld: _Builder, fab: Fabric, ep: _Endpoints, intra) -> float:
    """Cross-domain flows inside one edge switch: one unit per edge. Returns the flows placed."""
    Dcsr = intra[3]
    csize, rep = ep.csize, ep.lump_rep
    order = np.argsort(ep.cedge, kind="stable")
    i, j = pairs_within(ep.cedge[order])
    i, j = order[i], order[j]
    X = csize[i] * csize[j] - np.where(i == j, csize[i], 0.0) - (np.asarray(Dcsr[i, j]).ravel() if i.size else 0.0)
    X = np.maximum(X, 0.0)
    ue, e_inv = np.unique(ep.cedge[i], return_inverse=True)
    per_edge = np.bincount(e_inv, weights=X, minlength=ue.size)
    has = per_edge > 0
    if not has.any():
        return 0.0
    uid_of_edge = np.full(ue.size, -1, dtype=np.int64)
    uid_of_edge[has] = bld.new_units(per_edge[has], local=False)
    uu = uid_of_edge[e_inv]
    bld.add(uu, _lump(i, 0), X, link=False)
    bld.add(uu, _lump(j, 1), X, link=False)
    lat = fab.link_lat[rep[i, 0]] + fab.link_lat[rep[j, 1]]
    bld.pending.append((uu[X > 0], (lat * X / np.maximum(per_edge[e_inv], 1))[X > 0], lat[X > 0]))
    return float(X.sum())


def _bundle_margins(ep: _Endpoints, intra):
    """Flows between bundles: N_cb[class, bundle] (to GPUs of the bundle behind other edge switches, less
    intra-domain ones), N_bc[bundle, class], and N_bb[bundle, bundle]."""
    d1, d2, dv, _ = intra
    B, csize, cedge, cbundle = ep.num_bundles, ep.csize, ep.cedge, ep.cbundle
    esize = np.bincount(cedge, weights=csize, minlength=ep.num_edges)
    bsize = np.bincount(cbundle, weights=csize, minlength=B)
    own = cbundle[:, None] == np.arange(B)[None, :]
    N_cb = csize[:, None] * (bsize[None, :] - np.where(own, esize[cedge][:, None], 0.0))
    N_bc = csize[None, :] * (bsize[:, None] - np.where(own.T, esize[cedge][None, :], 0.0))
    cross = cedge[d1] != cedge[d2]
    if cross.any():
        np.subtract.at(N_cb, (d1[cross], cbundle[d2[cross]]), dv[cross])
        np.subtract.at(N_bc, (cbundle[d1[cross]], d2[cross]), dv[cross])
    N_bb = np.zeros((B, B))
    np.add.at(N_bb, cbundle, N_cb)
    return N_cb, N_bc, N_bb


def _bundle_units(bld: _Builder, fab: Fabric, ep: _Endpoints, intra, *, rng, routing, seed, hashing,
                  ugal) -> float:
    """Cross-switch flows: one unit per pair of bundles, endpoint lumps then fabric hops. Returns the flows."""
    N_cb, N_bc, N_bb = _bundle_margins(ep, intra)
    b1, b2 = np.nonzero(N_bb > 0.5)
    if not b1.size:
        return 0.0
    B, cbundle, cedge, rep = ep.num_bundles, ep.cbundle, ep.cedge, ep.lump_rep
    uid_bb = np.full((B, B), -1, dtype=np.int64)
    uid_bb[b1, b2] = bld.new_units(N_bb[b1, b2], local=False)
    flows_tot = np.zeros(bld.next_unit)
    flows_tot[uid_bb[b1, b2]] = N_bb[b1, b2]
    c1, bb1 = np.nonzero(N_cb > 0)
    bb2, c2 = np.nonzero(N_bc > 0)
    for kind, c, uu, f in ((0, c1, uid_bb[cbundle[c1], bb1], N_cb[c1, bb1]),
                           (1, c2, uid_bb[bb2, cbundle[c2]], N_bc[bb2, c2])):
        bld.add(uu, _lump(c, kind), f, link=False)
        lat = fab.link_lat[rep[c, kind]]
        bld.pending.append((uu, lat * f / flows_tot[uu], lat))
    N_eb = np.zeros((ep.num_edges, B))
    np.add.at(N_eb, cedge, N_cb)
    N_be = np.zeros((B, ep.num_edges))
    np.add.at(N_be, (slice(None), cedge), N_bc)
    units = (uid_bb, b1, b2)
    if fab.family == "dragonfly":
        hashed = None
        if hashing:
            minimal = ~ugal[0] if ugal is not None else np.ones((B, B), dtype=bool)
            hashed = hashed_global_choices(fab, ep.R, ep.edge, ep.dom_size if ep.su else 1, seed, minimal)
        dragonfly_hops(fab, rng, bld.hop, units, margins=(N_eb, N_be, intra[3]),
                       classes=(ep.csize, cedge, cbundle), flows_tot=flows_tot, hashed=hashed, ugal=ugal)
    else:
        th = None
        if hashing and routing != "adaptive" and ep.tree["tiers"] > 1:
            th = _hashed_tree_choices(ep.tree, ep.R, ep.edge, ep.dom_size if ep.su else 1, seed)
        _tree_hops(ep.tree, rng, bld.hop, units, margins=(N_eb, N_be, N_bb), flows_tot=flows_tot, hashed=th)
    return float(N_bb[b1, b2].sum())


def _assemble(bld: _Builder, fab: Fabric, ep: _Endpoints, *, routing, link_cap, num_flows, hop_choices):
    """The max-min instance: fabric links (ECMP) or link groups (adaptive), then the lumps."""
    lat_mean, lat_max = bld.latencies()
    if routing == "adaptive":
        link_map, fcap = fab.link_group, fab.group_capacity(link_cap)
    else:
        link_map, fcap = np.arange(fab.num_links), link_cap
    A, link_flows = bld.finish(link_map, fcap.size, ep.lump_cap.ravel())
    C, cls, first = ep.num_classes, ep.cls, ep.first
    up, down = nic_access(fab)
    un = ep.nic[first]
    # a lump's links carry equal shares of its flows (its GPUs / NICs are alike)
    per_link = (np.asarray(A[fcap.size:].sum(axis=1)).ravel() / np.maximum(ep.lump_links.ravel(), 1)).reshape(C, 4)
    link_flows[up[un]] = per_link[cls[first], 0]
    link_flows[down[un]] = per_link[cls[first], 1]
    if ep.su:
        link_flows[fab.tables["gpu_up"][ep.R]] = per_link[cls, 2]
        link_flows[fab.tables["gpu_down"][ep.R]] = per_link[cls, 3]
    return ClassProblem(A=A, cap=np.r_[fcap, ep.lump_cap.ravel()], num_fabric=fcap.size,
                        lump_kind=np.tile(np.arange(4), C), lump_edge=np.repeat(fab.link_dst[ep.lump_rep[:, 0]], 4),
                        lump_links=ep.lump_links.ravel(), unit_flows=np.concatenate(bld.flows),
                        unit_local=np.concatenate(bld.local), unit_lat_mean=lat_mean, unit_lat_max=lat_max,
                        unit_paths=np.ones(bld.next_unit), link_flows=link_flows, num_flows=num_flows,
                        hop_choices=hop_choices)


def _hashed_tree_choices(tree, R, leaf, dom_size, seed, chunk: int = 1 << 18):
    """ECMP choices of a fat tree's cross-leaf flows among GPUs ``R``, counted by the per-flow hash.

    :func:`tierwise.netsim.routing.route` takes uplink ``a = h mod u`` (``h = hash(s, t, seed)``) and, between
    pods of a 3-tier tree, aggregation uplink ``j = splitmix(h) mod (k/2)``. Counted (intra-domain and
    same-leaf flows apart), in the shapes :func:`_tree_hops` reads: 2 tiers ``(T[ls, lt, a],)``; 3 tiers
    ``(T1[ls, pod_t, a], TJ[pod_s, pod_t, a, j], T3[pod_s, lt, a])``."""

    tiers, u, L = tree["tiers"], tree["u"], tree["num_leaves"]
    half = tree["k"] // 2
    P = -(-L // half)
    n = R.size
    if tiers == 2:
        out = [np.zeros(L * L * u, dtype=np.int64)]
    else:
        out = [np.zeros(L * P * u, dtype=np.int64), np.zeros(P * P * u * half, dtype=np.int64),
               np.zeros(P * L * u, dtype=np.int64)]
    rows = max(1, chunk // n)
    z = np.empty(rows * n, dtype=np.uint64)
    tmp = np.empty_like(z)
    for start in range(0, n, rows):
        kk = min(rows, n - start)
        size = kk * n
        s_gpu = np.repeat(R[start:start + kk], n)
        t_gpu = np.tile(R, kk)
        h = flow_hash(s_gpu, t_gpu, seed, 0, out=z[:size], tmp=tmp[:size])
        ls = np.repeat(leaf[start:start + kk], n)
        lt = np.tile(leaf, kk)
        keep = ls != lt
        if dom_size > 1:
            keep &= (s_gpu // dom_size) != (t_gpu // dom_size)
        h, ls, lt = h[keep], ls[keep], lt[keep]
        a = (h % np.uint64(u)).astype(np.int64)
        if tiers == 2:
            out[0] += np.bincount((ls * L + lt) * u + a, minlength=out[0].size)
            continue
        ps, pt = ls // half, lt // half
        out[0] += np.bincount((ls * P + pt) * u + a, minlength=out[0].size)
        out[2] += np.bincount((ps * L + lt) * u + a, minlength=out[2].size)
        inter = ps != pt
        j = (splitmix(h[inter]) % np.uint64(half)).astype(np.int64)
        out[1] += np.bincount(((ps[inter] * P + pt[inter]) * u + a[inter]) * half + j, minlength=out[1].size)
    if tiers == 2:
        return (out[0].reshape(L, L, u),)
    return out[0].reshape(L, P, u), out[1].reshape(P, P, u, half), out[2].reshape(P, L, u)


def _tree_hops(tree, rng, hop, units, *, margins, flows_tot, hashed=None):
    """Leaf -> (agg -> core -> agg) -> leaf hops of every bundle-pair unit ``units = (uid_bb, b1, b2)``
    (module docstring), ``margins = (N_eb, N_be, N_bb)``; ``hashed`` (from :func:`_hashed_tree_choices`)
    replaces the draws by the per-flow hash's counts."""
    (uid_bb, b1, b2), (N_eb, N_be, N_bb) = units, margins
    tiers, u = tree["tiers"], tree["u"]
    if tiers == 1:
        return
    if tiers == 2:
        # bundles are leaves: a flow picks spine a uniformly; leaf_up[l1, a] and spine_down[a, l2]
        N = N_bb[b1, b2]
        cnt = (multinomial_rows(rng, N.astype(np.int64), np.full(u, 1.0 / u)) if hashed is None
               else hashed[0][b1, b2])
        check_counts(cnt, N)
        uu = uid_bb[b1, b2][:, None]
        a = np.arange(u)[None, :]
        hop(uu, tree["leaf_up"][b1[:, None], a], cnt, flows_tot)
        hop(uu, tree["spine_down"][a, b2[:, None]], cnt, flows_tot)
        return
    half, trunk = tree["k"] // 2, tree["trunk"]
    L = tree["num_leaves"]
    leaves_of = np.arange(L)
    # first hop: per (unit, source leaf), uplink a uniform
    pod = leaves_of // half
    # all (unit, leaf of the source pod) rows at once
    unit_idx = np.arange(b1.size)
    per_pod = np.bincount(pod, minlength=int(pod.max()) + 1)
    starts = np.r_[0, np.cumsum(per_pod)[:-1]]
    k = per_pod[b1]
    rows_u = np.repeat(unit_idx, k)
    rows_l = starts[b1][rows_u] + (np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k))
    n1 = N_eb[rows_l, b2[rows_u]].astype(np.int64)
    c1 = multinomial_rows(rng, n1, np.full(u, 1.0 / u)) if hashed is None else hashed[0][rows_l, b2[rows_u]]
    check_counts(c1, n1)
    uid = uid_bb[b1, b2]
    a = np.arange(u)[None, :]
    hop(uid[rows_u][:, None], tree["leaf_up"][rows_l[:, None], a], c1, flows_tot)
    Na = np.zeros((b1.size, u), dtype=np.int64)
    np.add.at(Na, rows_u, c1)
    inter = b1 != b2
    if inter.any():
        # aggregation uplink j uniform: agg_up[P1, a, j] and core_down[a, j // trunk, P2, j % trunk]
        ui = np.nonzero(inter)[0]
        ru = np.repeat(ui, u)
        ra = np.tile(np.arange(u), ui.size)
        c2 = (multinomial_rows(rng, Na[ru, ra], np.full(half, 1.0 / half)) if hashed is None
              else hashed[1][b1[ru], b2[ru], ra])
        check_counts(c2, Na[ru, ra])
        j = np.arange(half)[None, :]
        hop(uid[ru][:, None], tree["agg_up"][b1[ru][:, None], ra[:, None], j], c2, flows_tot)
        hop(uid[ru][:, None], tree["core_down"][ra[:, None], j // trunk, b2[ru][:, None], j % trunk], c2, flows_tot)
    # last hop: per (unit, destination leaf), downlink from aggregation switch a uniform (so a leaf's
    # downlink group receives exactly its flows, as per flow)
    k2 = per_pod[b2]
    rows_u2 = np.repeat(unit_idx, k2)
    rows_l2 = starts[b2][rows_u2] + (np.arange(int(k2.sum())) - np.repeat(np.cumsum(k2) - k2, k2))
    n3 = N_be[b1[rows_u2], rows_l2].astype(np.int64)
    c3 = multinomial_rows(rng, n3, np.full(u, 1.0 / u)) if hashed is None else hashed[2][b1[rows_u2], rows_l2]
    check_counts(c3, n3)
    hop(uid[rows_u2][:, None], tree["agg_down"][b2[rows_u2][:, None], a, (rows_l2 % half)[:, None]], c3, flows_tot)
