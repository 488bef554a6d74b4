"""Paths of flows: scale-up hop(s) inside a domain, otherwise NIC -> fabric switches -> NIC.

* **ECMP** (RFC 2992): every switch hashes the flow's (source, destination, seed) to pick one of the
  equal-cost next hops; we draw all of a flow's choices from one splitmix64 hash (Steele et al.,
  "Fast splittable pseudorandom number generators", OOPSLA 2014), so two flows collide on a link exactly
  when their hashes agree, as in a real fabric. A path through a failed link is rehashed with a new salt
  (the fabric manager removing the dead next hop), up to 16 times, then reported unreachable.
* **Adaptive spraying** is applied by the caller: it maps each link of the ECMP path to its link group
  (all equal-cost parallel links at that hop), which ideal per-packet spraying fills evenly.

Paths are (flows x max hops) arrays of link ids padded with -1. NIC choice fails over: a GPU whose NIC
cable is down uses the first healthy NIC of its node. In rail-only fabrics a flow to another rail first
crosses the scale-up domain to the source node's GPU on the destination's rail (PXN).
"""

from __future__ import annotations

import numpy as np

from tierwise.topology.graph import Fabric

__all__ = ["splitmix", "effective_nics", "route", "dragonfly_ugal", "valiant_count", "MIN_SPREAD"]

_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (uint64 in, uint64 out)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _splitmix_inplace(z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """:func:`splitmix` of ``z`` (uint64) computed in place, ``tmp`` a scratch array of its shape."""
    z += _GOLD
    np.right_shift(z, np.uint64(30), out=tmp)
    z ^= tmp
    z *= _M1
    np.right_shift(z, np.uint64(27), out=tmp)
    z ^= tmp
    z *= _M2
    np.right_shift(z, np.uint64(31), out=tmp)
    z ^= tmp
    return z


def flow_hash(src, dst, seed: int, salt: int, out: np.ndarray | None = None,
              tmp: np.ndarray | None = None) -> np.ndarray:
    """The ECMP hash of flows ``src[i] -> dst[i]`` (GPU ids): splitmix(splitmix(key) ^ seed/salt word).

    In place in ``out`` (uint64, the flows' shape) with scratch ``tmp`` when given: a caller hashing many
    flows in chunks reuses two buffers instead of allocating a dozen temporaries per chunk (path classes
    count hashed choices this way, :mod:`tierwise.netsim.classes`)."""
    src, dst = np.asarray(src), np.asarray(dst)
    shape = np.broadcast_shapes(src.shape, dst.shape)
    z = np.empty(shape, dtype=np.uint64) if out is None else out
    tmp = np.empty(shape, dtype=np.uint64) if tmp is None else tmp
    np.multiply(src.astype(np.uint64), np.uint64(0x100000001B3), out=z)
    z ^= dst.astype(np.uint64)
    _splitmix_inplace(z, tmp)
    z ^= np.uint64((seed * 1_000_003 + salt) & 0xFFFFFFFFFFFFFFFF)
    return _splitmix_inplace(z, tmp)


def _hash(src, dst, seed: int, salt: int) -> np.ndarray:
    return flow_hash(src, dst, seed, salt)


def nic_access(fab: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """(uplink, downlink) of every NIC to its first switch (-1 for a torus)."""
    t = fab.tables
    if "trees" in t:
        up = np.full(fab.num_nics, -1, dtype=np.int64)
        down = up.copy()
        for tree in t["trees"]:
            m = tree["nic_up"] >= 0
            up[m], down[m] = tree["nic_up"][m], tree["nic_down"][m]
        return up, down
    if "nic_up" in t:
        return t["nic_up"], t["nic_down"]
    return np.full(fab.num_nics, -1, dtype=np.int64), np.full(fab.num_nics, -1, dtype=np.int64)


def effective_nics(fab: Fabric, link_ok: np.ndarray) -> np.ndarray:
    """NIC each GPU uses after failover (-1 if its node has none left)."""
    if fab.family == "torus":
        return fab.gpu_nic.copy()
    up, down = nic_access(fab)
    healthy = link_ok[up] & link_ok[down]
    nic = fab.gpu_nic.copy()
    bad = ~healthy[nic]
    if bad.any():
        R = fab.nics_per_node
        node = np.nonzero(bad)[0] // fab.gpus_per_node
        cand = node[:, None] * R + np.arange(R)[None, :]
        ok = healthy[cand]
        first = np.argmax(ok, axis=1)
        nic[bad] = np.where(ok.any(axis=1), cand[np.arange(len(node)), first], -1)
    return nic


def _scale_up_path(fab: Fabric, s: np.ndarray, t: np.ndarray) -> np.ndarray:
    tb = fab.tables
    if fab.scale_up == "nvswitch":
        return np.stack([tb["gpu_up"][s], tb["gpu_down"][t]], axis=1)
    if fab.scale_up == "mesh":
        return tb["mesh"][s, t % fab.domain_size][:, None]
    return np.full((s.size, 0), -1, dtype=np.int64)


def _fat_tree_hops(tree: dict, s_nic, t_nic, h1, h2) -> np.ndarray:
    n = s_nic.size
    out = np.full((n, 4), -1, dtype=np.int64)
    tiers = tree["tiers"]
    if tiers == 1:
        return out
    ls, lt = tree["nic_leaf"][s_nic], tree["nic_leaf"][t_nic]
    cross = ls != lt
    u = tree["u"]
    a = (h1 % np.uint64(u)).astype(np.int64)
    if tiers == 2:
        out[:, 0] = np.where(cross, tree["leaf_up"][ls, a], -1)
        out[:, 1] = np.where(cross, tree["spine_down"][a, lt], -1)
        return out
    half = tree["k"] // 2
    ps, pt = ls // half, lt // half
    out[:, 0] = np.where(cross, tree["leaf_up"][ls, a], -1)
    inter = ps != pt
    j = (h2 % np.uint64(half)).astype(np.int64)
    trunk = tree["trunk"]
    out[:, 1] = np.where(inter, tree["agg_up"][ps, a, j], -1)
    out[:, 2] = np.where(inter, tree["core_down"][a, j // trunk, pt, j % trunk], -1)
    out[:, 3] = np.where(cross, tree["agg_down"][pt, a, lt % half], -1)
    return out


def _dragonfly_hops(fab: Fabric, s_nic, t_nic, h1) -> np.ndarray:
    tb = fab.tables
    a = tb["a"]
    rs, rt = tb["nic_router"][s_nic], tb["nic_router"][t_nic]
    gs, gt = rs // a, rt // a
    out = np.full((s_nic.size, 3), -1, dtype=np.int64)
    same_g = gs == gt
    out[:, 0] = np.where(same_g & (rs != rt), tb["local"][gs, rs % a, rt % a], -1)
    x = ~same_g
    cnt = np.maximum(tb["glob_count"][gs, gt], 1)
    m = (h1 % cnt.astype(np.uint64)).astype(np.int64)
    g_link = tb["glob"][gs, gt, m]
    r1 = fab.link_src[np.maximum(g_link, 0)] - tb["router_base"]
    r2 = fab.link_dst[np.maximum(g_link, 0)] - tb["router_base"]
    out[:, 0] = np.where(x & (r1 != rs), tb["local"][gs, rs % a, r1 % a], out[:, 0])
    out[:, 1] = np.where(x, g_link, -1)
    out[:, 2] = np.where(x & (r2 != rt), tb["local"][gt, r2 % a, rt % a], -1)
    return out


def _torus_path(fab: Fabric, s, t, h1) -> np.ndarray:
    tb = fab.tables
    dims = tb["dims"]
    coords = tb["coords"]
    cur = coords[s].copy()
    cols = []
    for d, k in enumerate(dims):
        if k < 2:
            continue
        delta = (coords[t, d] - cur[:, d]) % k
        tie = (2 * delta == k) & ((h1 >> np.uint64(d)) & np.uint64(1)).astype(bool)
        go_plus = (2 * delta < k) | tie
        steps = np.where(go_plus, delta, (k - delta) % k)
        for step in range(k // 2):
            move = steps > step
            node = np.ravel_multi_index(tuple(cur.T), dims)
            link = np.where(go_plus, tb["plus"][node, d], tb["minus"][node, d])
            cols.append(np.where(move, link, -1))
            cur[:, d] = np.where(move, (cur[:, d] + np.where(go_plus, 1, -1)) % k, cur[:, d])
    if not cols:
        return np.full((s.size, 0), -1, dtype=np.int64)
    return np.stack(cols, axis=1)


def _fabric_hops(fab: Fabric, s_nic, t_nic, s_gpu, t_gpu, seed: int, salt: int) -> np.ndarray:
    h1 = _hash(s_gpu, t_gpu, seed, salt)
    if fab.family == "torus":
        return _torus_path(fab, s_nic, t_nic, h1)
    up, down = nic_access(fab)
    if fab.family == "dragonfly":
        mid = _dragonfly_hops(fab, s_nic, t_nic, h1)
    else:
        h2 = splitmix(h1)
        trees = fab.tables["trees"]
        tree_of = fab.tables["nic_tree"][s_nic]
        mid = np.full((s_nic.size, 4), -1, dtype=np.int64)
        for i, tree in enumerate(trees):
            m = tree_of == i
            if m.any():
                mid[m] = _fat_tree_hops(tree, s_nic[m], t_nic[m], h1[m], h2[m])
    return np.concatenate([up[s_nic][:, None], mid, down[t_nic][:, None]], axis=1)


def route(fab: Fabric, src: np.ndarray, dst: np.ndarray, *, seed: int = 1,
          link_ok: np.ndarray | None = None, nics: np.ndarray | None = None):
    """ECMP link paths of flows ``src[i] -> dst[i]`` (GPU ids): (paths, reachable mask)."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if link_ok is None:
        link_ok = np.ones(fab.num_links, dtype=bool)
    if nics is None:
        nics = effective_nics(fab, link_ok)
    n = src.size
    dom = fab.domain_size if fab.scale_up != "none" else 1
    local = (src // dom == dst // dom) & (src != dst) & (dom > 1)
    body_width = 6 if fab.family != "torus" else max(1, sum(k // 2 for k in fab.tables["dims"]))
    width = 2 + body_width
    paths = np.full((n, width), -1, dtype=np.int32)  # link ids fit int32: half the bytes of int64 paths
    ok = np.ones(n, dtype=bool)
    if local.any():
        su = _scale_up_path(fab, src[local], dst[local])
        paths[local, : su.shape[1]] = su
    far = np.nonzero(~local & (src != dst))[0]
    if far.size:
        s_nic, t_nic = nics[src[far]], nics[dst[far]]
        dead = (s_nic < 0) | (t_nic < 0)
        ok[far[dead]] = False
        far, s_nic, t_nic = far[~dead], s_nic[~dead], t_nic[~dead]
        s_gpu = src[far]
        head = np.full((far.size, 2), -1, dtype=np.int32)
        if fab.family == "rail-only":
            tree = fab.tables["nic_tree"]
            other = tree[s_nic] != tree[t_nic]
            if other.any():
                # proxy: the GPU of the source node attached to the destination's rail
                node = s_gpu[other] // fab.gpus_per_node
                rail_nic = node * fab.nics_per_node + t_nic[other] % fab.nics_per_node
                proxy = node * fab.gpus_per_node + (rail_nic % fab.nics_per_node) * (
                    fab.gpus_per_node // fab.nics_per_node)
                su = _scale_up_path(fab, s_gpu[other], proxy)
                head[np.nonzero(other)[0], : su.shape[1]] = su
                s_nic = s_nic.copy()
                s_nic[other] = rail_nic
        todo = np.arange(far.size)
        body = np.full((far.size, body_width), -1, dtype=np.int32)
        for salt in range(16):
            hops = _fabric_hops(fab, s_nic[todo], t_nic[todo], s_gpu[todo], dst[far[todo]], seed, salt)
            body[todo, : hops.shape[1]] = hops
            bad = ((hops >= 0) & ~link_ok[np.maximum(hops, 0)]).any(axis=1)
            todo = todo[bad]
            if not todo.size:
                break
        ok[far[todo]] = False
        paths[far, :2] = head
        paths[far, 2:] = body
    return paths, ok


def dragonfly_ugal(fab: Fabric, src: np.ndarray, dst: np.ndarray, *, seed: int, link_ok: np.ndarray,
                   nics: np.ndarray, num_valiant: int = 24):
    """Adaptive dragonfly routing: UGAL with global load knowledge (UGAL-G), as a fixed multipath split.

    Kim et al. (ISCA 2008, section 4.2) route a packet minimally unless the minimal global channel's
    queue times its hop count exceeds the non-minimal one's; Valiant's non-minimal path goes through a
    random intermediate group (two global hops), so minimal wins while its queue is under twice the
    non-minimal one. In a fluid model we take the decision per group pair from the offered load:
    ``L_min = flows(Gs, Gt) / links(Gs, Gt)`` against the average global load ``L_avg``. A pair with
    ``L_min <= 2 L_avg`` stays minimal, on its one hashed path (uniform traffic is unchanged). A hotter
    pair keeps the share ``2 L_avg / L_min`` of each flow minimal (its global links then carry twice the
    average: UGAL's balance point), over ``_MIN_SPREAD`` hashed global links of the pair, and spreads the
    rest over ``num_valiant`` Valiant sub-paths through the intermediate groups at consecutive offsets
    from a hashed start (Valiant's random group, in expectation; offsets repeat when ``g - 2`` is
    smaller). A Valiant sub-path leaves the source router by a global link it owns to the intermediate
    group when it has one (no local hop, as an adaptive router picks a free port of its own), else by a
    hashed one, and takes a hashed link onward. Packet-by-packet adaptive routing spreads a flow over many
    links; the many sub-paths, each hashed on its own, stand in for it so that a few hashed local links do
    not set the completion time. Adversarial traffic (every NIC of a group to the next group) then runs at
    about half the NIC rate, the paper's UGAL-G figure (section 4.2, Valiant halves global bandwidth):
    measured 50% at 4,096 GPUs, 40% at 16,384 (tests/netsim/test_behaviour.py).

    At most ``_SUBPATH_BUDGET`` sub-paths in all: with more hot flows (a 1,024-rank all-to-all on a few
    groups) the Valiant sub-paths per flow shrink, to ``g - 2`` at least.

    Returns (row: the input flow of each path, fraction of that flow's bytes on it, paths, ok).
    """
    paths, ok = route(fab, src, dst, seed=seed, link_ok=link_ok, nics=nics)
    tb = fab.tables
    a, g = tb["a"], tb["groups"]
    s_nic, t_nic = nics[src], nics[dst]
    valid = (s_nic >= 0) & (t_nic >= 0)
    gs = np.where(valid, tb["nic_router"][np.maximum(s_nic, 0)] // a, -1)
    gt = np.where(valid, tb["nic_router"][np.maximum(t_nic, 0)] // a, -1)
    inter = valid & (gs != gt) & (gs >= 0)
    rows = np.arange(src.size)
    frac = np.ones(src.size)
    if g < 3 or not inter.any():
        return rows, frac, paths, ok
    pair = gs * g + gt
    flows = np.bincount(pair[inter], minlength=g * g).astype(float)
    links = np.maximum(tb["glob_count"].ravel(), 1)
    l_min = flows / links
    l_avg = flows.sum() / tb["glob_count"].sum()
    nonmin = inter & (l_min[np.maximum(pair, 0)] > 2 * l_avg)
    idx = np.nonzero(nonmin)[0]
    if not idx.size:
        return rows, frac, paths, ok
    keep_min = 2 * l_avg / l_min[pair[idx]]
    mpaths, mrow = _spread_minimal(fab, (src, dst, s_nic, t_nic), idx, seed, paths.shape[1])
    k = valiant_count(idx.size, g, num_valiant)
    rep, vpaths = _spread_valiant(fab, (src, dst, s_nic, t_nic), (idx, gs, gt), k, seed, paths.shape[1])
    vpaths = np.vstack([mpaths, vpaths])
    rep = np.r_[mrow, rep]
    vfrac = np.r_[np.repeat(keep_min / _MIN_SPREAD, _MIN_SPREAD), np.repeat((1.0 - keep_min) / k, k)]
    vok = ~((vpaths >= 0) & ~link_ok[np.maximum(vpaths, 0)]).any(axis=1)
    keep = np.setdiff1d(rows, idx)
    return (np.r_[keep, rep], np.r_[frac[keep], vfrac], np.vstack([paths[keep], vpaths]),
            np.r_[ok[keep], vok & ok[rep]])


def _spread_valiant(fab: Fabric, flows: tuple, hot: tuple, k: int, seed: int, width: int):
    """``k`` Valiant sub-paths per hot flow, through the intermediate groups at consecutive offsets from a
    hashed start, each with its own link hashes. Returns (row of the input flow of each, paths)."""
    src, dst, s_nic, t_nic = flows
    idx, gs, gt = hot
    g = fab.tables["groups"]
    rep = np.repeat(idx, k)
    j = np.tile(np.arange(k), idx.size)
    h = _hash(src[rep], dst[rep], seed, 97)
    o = ((h % np.uint64(g - 2)).astype(np.int64) + j) % (g - 2)
    lo, hi = np.minimum(gs[rep], gt[rep]), np.maximum(gs[rep], gt[rep])
    mid = o + (o >= lo)
    mid = mid + (mid >= hi)
    hj = splitmix(h ^ j.astype(np.uint64))  # each sub-path its own link choices
    return rep, _valiant_paths(fab, s_nic[rep], t_nic[rep], (gs[rep], mid, gt[rep]), hj, width)


_MIN_SPREAD = 4
"""Sub-paths a flow's minimal share of a hot group pair takes (hashed global links of the pair)."""
MIN_SPREAD = _MIN_SPREAD
_SUBPATH_BUDGET = 1 << 22
"""Most minimal + Valiant sub-paths of hot flows :func:`dragonfly_ugal` builds (4M rows of link ids)."""


def valiant_count(hot_flows: int, groups: int, num_valiant: int = 24) -> int:
    """Valiant sub-paths per hot flow in :func:`dragonfly_ugal`: ``num_valiant``, fewer when the hot flows'
    sub-paths would pass ``_SUBPATH_BUDGET``, never below ``min(groups - 2, num_valiant)`` (path classes
    use the same count, :mod:`tierwise.netsim.dragonfly_classes`, so both split a flow alike)."""
    return max(min(num_valiant, _SUBPATH_BUDGET // max(int(hot_flows), 1) - _MIN_SPREAD),
               min(groups - 2, num_valiant), 1)


def _spread_minimal(fab: Fabric, flows: tuple, idx: np.ndarray, seed: int, width: int):
    """``_MIN_SPREAD`` minimal paths per flow ``idx``: local, hashed global link, local (Kim et al. sec. 4.1).

    Returns (paths, row of the input flow of each)."""
    src, dst, s_nic, t_nic = flows
    tb = fab.tables
    a, base = tb["a"], tb["router_base"]
    rep = np.repeat(idx, _MIN_SPREAD)
    j = np.tile(np.arange(_MIN_SPREAD), idx.size).astype(np.uint64)
    h = splitmix(_hash(src[rep], dst[rep], seed, 89) ^ j)
    sn, tn = s_nic[rep], t_nic[rep]
    rs, rt = tb["nic_router"][sn], tb["nic_router"][tn]
    gs, gt = rs // a, rt // a
    gl = tb["glob"][gs, gt, (h % np.maximum(tb["glob_count"][gs, gt], 1).astype(np.uint64)).astype(np.int64)]
    r1, r2 = fab.link_src[gl] - base, fab.link_dst[gl] - base
    out = np.full((rep.size, max(width, 7)), -1, dtype=np.int32)
    cols = [tb["nic_up"][sn], np.where(rs != r1, tb["local"][gs, rs % a, r1 % a], -1), gl,
            np.where(r2 != rt, tb["local"][gt, r2 % a, rt % a], -1), tb["nic_down"][tn]]
    for i, c in enumerate(cols):
        out[:, i] = c
    return out[:, :width] if width >= 7 else out, rep


def _global_link(fab: Fabric, r_from: np.ndarray, g_from: np.ndarray, g_to: np.ndarray, h: np.ndarray):
    """A global link from group ``g_from`` to ``g_to``: one router ``r_from`` owns if any (hashed among its
    own), else a hashed one of the pair's links."""
    tb = fab.tables
    cand = tb["glob"][g_from, g_to]  # (n, M), -1 padded
    owner = np.where(cand >= 0, fab.link_src[np.maximum(cand, 0)] - tb["router_base"], -1)
    own = owner == r_from[:, None]
    n_own = own.sum(axis=1)
    cnt = np.maximum(tb["glob_count"][g_from, g_to], 1).astype(np.uint64)
    any_pick = (h % cnt).astype(np.int64)
    nth = (h % np.maximum(n_own, 1).astype(np.uint64)).astype(np.int64)
    own_pick = np.argmax(np.cumsum(own, axis=1) > nth[:, None], axis=1)
    m = np.where(n_own > 0, own_pick, any_pick)
    return cand[np.arange(cand.shape[0]), m]


def _valiant_paths(fab, s_nic, t_nic, groups, h, width):
    gs, gi, gt = groups
    tb = fab.tables
    a, base = tb["a"], tb["router_base"]
    up, down = tb["nic_up"], tb["nic_down"]
    rs, rt = tb["nic_router"][s_nic], tb["nic_router"][t_nic]
    g1 = _global_link(fab, rs, gs, gi, h)
    r1, r2 = fab.link_src[g1] - base, fab.link_dst[g1] - base
    h2 = splitmix(h)
    g2 = tb["glob"][gi, gt, (h2 % np.maximum(tb["glob_count"][gi, gt], 1).astype(np.uint64)).astype(np.int64)]
    r3, r4 = fab.link_src[g2] - base, fab.link_dst[g2] - base

    def local(x, y, grp):
        return np.where(x != y, tb["local"][grp, x % a, y % a], -1)

    out = np.full((s_nic.size, max(width, 7)), -1, dtype=np.int32)
    cols = [up[s_nic], local(rs, r1, gs), g1, local(r2, r3, gi), g2, local(r4, rt, gt), down[t_nic]]
    for i, c in enumerate(cols):
        out[:, i] = c
    return out[:, :width] if width >= 7 else out
