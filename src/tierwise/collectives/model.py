"""The analytic collective model: every algorithm x protocol on the tiers a group spans; ``auto`` = fastest.

``collective_cost(kind, size_bytes, span, cluster, algorithm="auto")`` is vectorized over sizes and groups
(numpy arrays broadcast together). For each candidate algorithm it builds effective bandwidths and step
latencies from the cluster and the global parameters (``catalog/parameters.yaml``) and hands them to the
alpha-beta forms of :mod:`tierwise.collectives.alpha_beta`. As NCCL does (``topoGetAlgoInfo`` in
``tuning.cc``, collectives-notes.md section 4.1), each algorithm is costed under each protocol and the
minimum is taken:

* **protocol** (LL, LL128, Simple): a step latency ``ll_step_latency[link] + extra[protocol][link]``; a
  bandwidth fraction (LL 8 of 16 bytes, LL128 120 of 128, Simple all); Simple also pays one chunk time per
  pipelined step, ``chunk_bytes / (tier rate / channels)`` (the pipeline cannot forward a chunk before it
  has arrived);
* **link efficiency**: the achievable fraction of a tier's one-way line rate (``link_efficiency``, or the
  cluster's ``efficiency`` from the simulator);
* **mesh** scale-up (MI300X): a point-to-point transfer uses one link; rings use edge-disjoint directed
  Hamiltonian cycles of the complete digraph on the group, g-1 of them (Tillson 1980: K*_g decomposes into
  g-1 Hamiltonian cycles for every g except 4 and 6, where g-2 are used here);
* **in-network reduction** (NVLS, NVLSTree) where the scale-up switches reduce, and InfiniBand SHARP (NCCL's
  CollNet, algorithm ``sharp``) where the cluster's scale-out switches do (``fabric.sharp``; off by default);
* **rail-only** fabrics (``fabric.topology: rail-only``): an all-to-all's cross-rail bytes cross the scale-up
  domain first (:func:`tierwise.collectives.alpha_beta.rail_only_all_to_all_time`);
* **fitted** figures from ``tierwise calibrate`` replace all of this for the tier they were fitted on.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tierwise.collectives import alpha_beta
from tierwise.collectives.fitted import predict_fitted
from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import SpecError
from tierwise.hierarchy import GroupSpan, TierCode
from tierwise.specs.cluster import Cluster
from tierwise.specs.parameters import Parameters, load_parameters

__all__ = ["CollectiveCost", "collective_cost", "ALGORITHMS", "PROTOCOLS", "algorithms_for"]

ALGORITHMS = ("ring", "tree", "hierarchical", "nvls", "direct", "fitted", "sharp")
PROTOCOLS = ("ll", "ll128", "simple", "-")
_FOR_KIND = {
    "all-reduce": ("ring", "tree", "hierarchical", "nvls", "sharp"),
    "reduce-scatter": ("ring", "hierarchical"),
    "all-gather": ("ring", "hierarchical"),
    "all-to-all": ("direct",),
    "broadcast": ("ring",),
    "send-recv": ("direct",),
}


def algorithms_for(kind: str) -> tuple[str, ...]:
    """Algorithms tierwise models for ``kind`` (``auto`` chooses among them)."""
    return _FOR_KIND[normalize_kind(kind)]


class CollectiveCost:
    """Result arrays (one shape): time, chosen algorithm and protocol, and bytes on each tier per rank.

    ``algorithm`` and ``protocol`` are names (``"ring"``, ``"LL128"``: a ``str`` for a single group, an array
    of ``str`` otherwise); ``algorithm_code`` and ``protocol_code`` are the same choices as int8 indices into
    :data:`ALGORITHMS` / :data:`PROTOCOLS`, for vectorized use. They, ``scale_up_bytes`` and
    ``scale_out_bytes`` are computed on first access (the estimator needs only times and ring-equivalent
    bytes).
    """

    __slots__ = ("time_s", "bytes_per_rank", "_codes", "_codes_cache", "_wire", "_cache")

    def __init__(self, time_s, codes, bytes_per_rank, wire):
        self.time_s = time_s
        """Seconds."""
        self.bytes_per_rank = bytes_per_rank
        """Ring-equivalent bytes each rank sends (busbw factor x size)."""
        self._codes = codes
        self._codes_cache = None
        self._wire = wire
        self._cache = None

    def _once(self, compute: str, cache: str):
        """The pair ``self.<compute>()`` returns, computed on first use and kept in ``self.<cache>``."""
        value = getattr(self, cache)
        if value is None:
            value = getattr(self, compute)()
            setattr(self, cache, value)
        return value

    @property
    def algorithm_code(self):
        """Index into :data:`ALGORITHMS` (int8 array)."""
        return self._once("_codes", "_codes_cache")[0]

    @property
    def protocol_code(self):
        """Index into :data:`PROTOCOLS` (int8 array)."""
        return self._once("_codes", "_codes_cache")[1]

    @property
    def algorithm(self):
        """Name of the chosen algorithm (one of :data:`ALGORITHMS`): a ``str``, or an array of them."""
        return _names(ALGORITHMS, self.algorithm_code)

    @property
    def protocol(self):
        """Name of the chosen protocol (one of :data:`PROTOCOLS`): a ``str``, or an array of them."""
        return _names(PROTOCOLS, self.protocol_code)

    @property
    def scale_up_bytes(self):
        """Bytes each rank sends over its scale-up (or host) links with the chosen algorithm."""
        return self._once("_wire", "_cache")[0]

    @property
    def scale_out_bytes(self):
        """Bytes each rank sends over its share of the NICs with the chosen algorithm."""
        return self._once("_wire", "_cache")[1]

    def __repr__(self) -> str:
        return f"CollectiveCost(time_s={self.time_s!r}, algorithm={self.algorithm!r}, protocol={self.protocol!r})"


def _names(table: tuple[str, ...], codes):
    """The names ``codes`` index in ``table``: a ``str`` for a scalar, an array of ``str`` otherwise."""
    codes = np.asarray(codes)
    if codes.ndim == 0:
        return table[int(codes)]
    return np.asarray(table)[codes]


def _mesh_ring_links(g):
    g = np.asarray(g, dtype=float)
    return np.where((g == 4) | (g == 6), g - 2, np.maximum(g - 1, 1))


def _tier_rates(cluster: Cluster, span: GroupSpan, p):
    """Achievable one-way rates per rank: (ring b_in, p2p b_in, b_out); and the inner link class."""
    eff = {**p["link_efficiency"], **cluster.efficiency}
    nl = span.ranks_per_domain
    if cluster.scale_up_topology == "mesh":
        per_link = cluster.scale_up_p2p_bytes_per_s * p["mesh_link_efficiency"]
        b_ring = _mesh_ring_links(nl) * per_link
        b_p2p = np.full(nl.shape, per_link)
    else:
        b_ring = np.full(nl.shape, cluster.scale_up_bytes_per_s * eff["scale_up"])
        b_p2p = b_ring
    host = cluster.host_bytes_per_s * eff["host"] if cluster.host_bytes_per_s else 0.0
    out = cluster.scale_out_bytes_per_s * eff["scale_out"] / span.oversubscription
    # groups that leave a scale-up domain inside one PCIe server cross the host link instead of NICs
    b_out = np.where(span.tier == TierCode.HOST, host, out)
    return b_ring, b_p2p, b_out


def _protocol_cap(cluster: Cluster, span: GroupSpan, p, protocol: str):
    """NCCL's per-generation bus-bandwidth cap for LL / LL128 (inf where none applies)."""
    gen = cluster.accelerator.generation
    if protocol == "ll" and gen in p["ll_max_busbw"]:
        multi = p["ll_max_busbw_multi_node"]
        return np.where(span.num_domains > 2, multi["more"],
                        np.where(span.num_domains == 2, multi["two"], p["ll_max_busbw"][gen]))
    if protocol == "ll128" and gen in p["ll128_per_channel_busbw"]:
        return np.full(span.size.shape, p["ll128_per_channel_busbw"][gen] * p["simple_channels"])
    return np.full(span.size.shape, np.inf)


def _latencies(cluster: Cluster, span: GroupSpan, p, protocol: str, b_in, b_out):
    """Per-step latency inside and between domains for one protocol (Simple adds its chunk time).

    ``b_out`` is the rate the ring's inter-domain step runs at (the domain's NIC share, ``nl x b_out``).
    """
    extra = p["protocol_extra_step_latency"][protocol]
    l_in = cluster.scale_up_latency_s + extra["nvlink"]
    outer_is_host = span.tier == TierCode.HOST
    l_out = np.where(outer_is_host, cluster.host_latency_s + extra["pci"],
                     cluster.scale_out_latency_at(span.num_domains) + extra["net"])
    if protocol == "simple":
        per_chunk = p["simple_chunk_bytes"] * p["simple_channels"]
        l_in = l_in + per_chunk / b_in
        l_out = l_out + per_chunk / np.maximum(b_out, 1e-30)
    return l_in, l_out


class _Group(NamedTuple):
    """What every candidate of one call shares: the group's shape as floats, tier rates, launch cost, bus factor."""

    n: np.ndarray
    """Ranks in the group."""
    nl: np.ndarray
    """Ranks per scale-up domain."""
    m: np.ndarray
    """Scale-up domains the group spans."""
    b_ring: np.ndarray
    """A ring's achievable one-way rate inside a domain (see :func:`_tier_rates`)."""
    b_p2p: np.ndarray
    """A point-to-point transfer's rate inside a domain."""
    b_out: np.ndarray
    """Each rank's share of the rate between domains (NICs, or the host link)."""
    launch: float
    """Kernel launch overhead (serialized over the GPUs one process drives)."""
    factor: np.ndarray
    """The bus factor (ring-equivalent bytes per byte of buffer, nccl-tests' busbw/algbw)."""


def _candidates(kind: str, size, span: GroupSpan, cluster: Cluster, p, algorithms, gpus_per_process: int):
    """Yield (algorithm, protocol, time array, scale-up bytes, scale-out bytes) for each candidate.

    As NCCL's ``topoGetAlgoInfo`` (tuning.cc, collectives-notes.md section 4.1): every algorithm under every
    protocol; the in-network reductions (NVLS, SHARP) run Simple only.
    """
    n = span.size.astype(float)
    g = _Group(n, span.ranks_per_domain.astype(float), span.num_domains.astype(float), *_tier_rates(cluster, span, p),
               launch=p["launch_overhead"] + (gpus_per_process - 1) * p["launch_overhead_per_extra_gpu"],
               factor=bus_factor(kind, n) if kind != "send-recv" else np.ones_like(n))
    for algo in algorithms:
        if algo == "sharp":
            if kind == "all-reduce" and cluster.scale_out_reduction:
                yield (algo, "simple", *_sharp_all_reduce(size, span, cluster, p, g.launch, g.b_ring))
        elif algo == "nvls":
            if kind == "all-reduce" and cluster.in_network_reduction:
                yield (algo, "simple", *_nvls_all_reduce(size, g, cluster, p))
        else:
            for proto in ("ll", "ll128", "simple"):
                yield (algo, proto, *_point_to_point(kind, algo, proto, size, g, span, cluster, p))


def _nvls_all_reduce(size, g: _Group, cluster: Cluster, p):
    """NVLS all-reduce (the scale-up switches reduce): (time, scale-up bytes, scale-out bytes) per rank.

    (nl+1)/nl x S through each GPU's NVLink ports (sjeaugey, nccl-tests PR #239); between domains a double
    binary tree (NVLSTree), pipelined with it (pipelined, Simple protocol: each of the 1 + 2 log2(m) pipeline
    stages adds one chunk time).
    """
    n, nl, m = g.n, g.nl, g.m
    nvls_eff = p["nvls_efficiency_by_generation"].get(cluster.accelerator.generation, p["nvls_efficiency"])
    b_nvls = cluster.scale_up_bytes_per_s * nvls_eff
    b_tree = nl * g.b_out * p["tree_efficiency"]
    egress = alpha_beta.tree_egress_factor(m)
    intra = (nl + 1) / nl * size / b_nvls
    inter = np.where(m > 1, egress * size / b_tree, 0.0)
    depth = np.ceil(np.log2(np.maximum(m, 1)))
    chunk = p["simple_chunk_bytes"] * p["simple_channels"]
    fill = chunk / b_nvls + 2 * depth * chunk / b_tree
    # NCCL's NVLS constant is an 8-GPU baseboard's; a domain across hosts adds its hardware path once
    # per phase (reduce-scatter through the switch, multicast all-gather back)
    lat = (g.launch + p["nvls_latency"] + 2 * cluster.scale_up_extra_latency_s + fill
           + 2 * depth * (cluster.scale_out_latency_at(m) + p["nvls_tree_net_latency"]))
    t = np.where((nl > 1) & (n > 1), lat + np.maximum(intra, inter), np.inf)
    return t, (nl + 1) / nl * size, np.where(m > 1, egress * size / nl, 0.0)


def _point_to_point(kind: str, algo: str, proto: str, size, g: _Group, span: GroupSpan, cluster: Cluster, p):
    """One algorithm built from point-to-point steps (ring, tree, hierarchical, direct) under one protocol:
    (time, scale-up bytes, scale-out bytes) per rank; time 0 for a group of one rank."""
    b_in, b_out = _protocol_rates(kind, algo, proto, g, span, cluster, p)
    l_in, l_out = _latencies(cluster, span, p, proto, b_in, g.nl * b_out)
    lat0 = g.launch + p["base_latency"][algo if algo in p["base_latency"] else "ring"][proto]
    if algo in ("ring", "tree", "hierarchical"):
        t, up, out = _ring_or_tree(kind, algo, size, g, b_in, b_out, l_in, l_out)
    else:
        t, up, out = _direct(kind, size, g, cluster, b_in, b_out, l_in, l_out)
    return np.where(g.n > 1, lat0 + t, 0.0), up, out


def _protocol_rates(kind: str, algo: str, proto: str, g: _Group, span: GroupSpan, cluster: Cluster, p):
    """Rates (inside a domain, each rank's share between domains) of ``algo`` under ``proto``: the protocol's
    bandwidth fraction, the all-to-all and tree efficiencies, and for ring and tree NCCL's bus-bandwidth cap."""
    frac = p["protocol_bandwidth_fraction"][proto]
    if algo == "direct":
        a2a = p["all_to_all_efficiency"] if kind == "all-to-all" else 1.0
        b_in, b_out = g.b_p2p * frac * a2a, g.b_out * frac * a2a
    else:
        b_in, b_out = g.b_ring * frac, g.b_out * frac
    if algo == "tree":
        b_in, b_out = b_in * p["tree_efficiency"], b_out * p["tree_efficiency"]
    if algo in ("ring", "tree"):
        # a ring's rate is min(b_in, nl x b_out); capping both at the protocol's bus bandwidth caps it
        cap = _protocol_cap(cluster, span, p, proto)
        b_in, b_out = np.minimum(b_in, cap), np.minimum(b_out, cap / g.nl)
    return b_in, b_out


def _ring_or_tree(kind: str, algo: str, size, g: _Group, b_in, b_out, l_in, l_out):
    """Ring, double binary tree or two-level hierarchy (:mod:`tierwise.collectives.alpha_beta`): (time without
    the launch and base latency, scale-up bytes, scale-out bytes) per rank."""
    n, nl, m = g.n, g.nl, g.m
    if algo == "ring":
        t = alpha_beta.ring_time(kind, size, n, nl, b_in, b_out, l_in, l_out)
        return t, np.where(nl > 1, g.factor * size, 0.0), np.where(m > 1, g.factor * size / nl, 0.0)
    if algo == "tree":
        t = alpha_beta.tree_time(kind, size, n, nl, b_in, b_out, l_in, l_out)
        up = np.where(nl > 1, 2.0 * (nl - 1) / nl * size, 0.0)
        return t, up, np.where(m > 1, alpha_beta.tree_egress_factor(m) * size / nl, 0.0)
    t = alpha_beta.hierarchical_time(kind, size, n, nl, b_in, b_out, l_in, l_out)
    if kind == "all-reduce":
        up = 2 * (nl - 1) / nl * size
        out = 2 * (m - 1) / m * size / nl
    else:
        up = (nl - 1) / nl * size
        out = (m - 1) / m * size / nl
    # a hierarchy with one level is just a ring; keep the ring as the name for that case
    return np.where((nl > 1) & (m > 1), t, np.inf), up, out


def _direct(kind: str, size, g: _Group, cluster: Cluster, b_in, b_out, l_in, l_out):
    """Send-recv and the direct all-to-all (rail-only fabrics forward cross-rail bytes over the scale-up domain
    first): (time without the launch and base latency, scale-up bytes, scale-out bytes) per rank."""
    n, nl = g.n, g.nl
    if kind == "send-recv":
        # one transfer of S over the tier between the two ranks
        inner = nl >= n
        t = np.where(inner, size / b_in + l_in, size / np.maximum(b_out, 1e-30) + l_out)
        up = np.where(inner & (n > 1), size, 0.0)  # one rank sends nothing
        return t, up, np.where(inner, 0.0, size)
    if cluster.fabric.get("topology") == "rail-only":  # cross-rail bytes cross the scale-up domain first (PXN)
        t = alpha_beta.rail_only_all_to_all_time(size, n, nl, b_in, b_out, l_in, l_out)
        up = ((nl - 1) / n + np.where(n > nl, (nl - 1) / nl * (n - nl) / n, 0.0)) * size
        return t, up, (n - nl) * size / n
    t = alpha_beta.direct_all_to_all_time(size, n, nl, b_in, b_out, l_in, l_out)
    return t, (nl - 1) * size / n, (n - nl) * size / n


def _sharp_all_reduce(size, span: GroupSpan, cluster: Cluster, p, launch, b_ring):
    """All-reduce reduced in the InfiniBand switches (SHARP, NCCL's CollNet): (time, scale-up bytes, scale-out
    bytes) per rank.

    Inside a domain the group reduce-scatters and, after the network step, all-gathers: with NVLink SHARP
    (NCCL's NVLS across nodes, which needs CollNet) (nl+1)/nl x S through each GPU's NVLink ports as in
    single-domain NVLS, else directly (CollNetDirect) 2 (nl-1)/nl x S at the ring rate. Across domains each
    rank sends its S/nl shard into the switch tree once and receives the reduced shard once, where a ring
    sends 2 (n-1)/n x S / nl: the in-network reduction halves the bytes on each NIC (Graham et al., "Scalable
    Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016, section 3: the reduction runs in the switches'
    aggregation tree). Each switch forwards one reduced stream upward, so a leaf's oversubscription does not
    slow the tree (the leaf's uplink carries 1/d of its downlinks' bytes). The shard leg runs at the NIC's
    achievable rate x NCCL's CollNet factor (``collnet_efficiency``, tuning.cc 0.85); the two legs pipeline
    (max of the two, plus one Simple chunk per stage). Latency, NCCL tuning.cc hwLat (collectives-notes
    4.3): NVLS + SHARP ``nvls_latency`` + ``sharp_nvls_net_latency``; CollNetDirect
    2 (min(1, nl-1) x 3.7 us + 0.4 us x (nl-1)) + 31 us. Limits (NCCL): at least 2 domains
    (``NCCL_COLLNET_NODE_THRESHOLD`` = 2) on the scale-out tier; only all-reduce (a SHARP reduce-scatter or
    all-gather sends S/nl per NIC where a ring sends (m-1)/m x S/nl: no bandwidth gain, not modelled).
    """
    nl, m = span.ranks_per_domain.astype(float), span.num_domains.astype(float)
    eff = {**p["link_efficiency"], **cluster.efficiency}
    b_net = cluster.scale_out_bytes_per_s * eff["scale_out"] * p["collnet_efficiency"]
    nvls = cluster.in_network_reduction & (nl > 1)
    nvls_eff = p["nvls_efficiency_by_generation"].get(cluster.accelerator.generation, p["nvls_efficiency"])
    b_up = np.where(nvls, cluster.scale_up_bytes_per_s * nvls_eff, b_ring)
    up = np.where(nvls, (nl + 1) / nl, 2 * (nl - 1) / nl) * size
    direct_lat = (2 * (np.minimum(1.0, nl - 1) * p["collnet_intra_latency"] + (nl - 1) * p["collnet_per_rank_latency"])
                  + p["collnet_net_latency"])
    lat = np.where(nvls, p["nvls_latency"] + 2 * cluster.scale_up_extra_latency_s + p["sharp_nvls_net_latency"],
                   direct_lat)
    chunk = p["simple_chunk_bytes"] * p["simple_channels"]
    fill = np.where(nl > 1, chunk / b_up, 0.0) + 2 * chunk / (nl * b_net)  # the domain's NICs carry a chunk
    ok = (m >= 2) & (span.tier == TierCode.SCALE_OUT)
    t = np.where(ok, launch + lat + fill + np.maximum(up / b_up, size / (nl * b_net)), np.inf)
    return t, np.where(ok, up, 0.0), np.where(ok, size / nl, 0.0)


def _fitted_time(kind: str, size, span: GroupSpan, cluster: Cluster):
    """Time from ``tierwise calibrate`` regimes for the tier the group bottlenecks on, else NaN.

    :func:`tierwise.collectives.fitted.predict_fitted` of the cluster's fitted tier (its regimes, its
    ``model``, fitted on ``num_ranks`` ranks), the rule ``tierwise calibrate`` reports with too.
    """
    n = span.size.astype(float)
    tier_of = np.where(span.tier == TierCode.SCALE_OUT, "scale_out",
                       np.where(span.tier == TierCode.HOST, "host", "scale_up"))
    result = np.full(np.broadcast(size, n).shape, np.nan)
    for tier_name, fit in cluster.fitted.items():
        mask = (tier_of == tier_name) & (n > 1)
        if not np.any(mask):
            continue
        nn = np.maximum(n, 2.0)  # n = 1 is masked out; keep the host-copy work counts defined there
        best = predict_fitted(fit.regimes, kind, size, nn, fit_ranks=fit.num_ranks, model=fit.model)
        result = np.where(mask, np.broadcast_to(best, result.shape), result)
    return result


def _geometry_key(span: GroupSpan, shape) -> np.ndarray:
    """One int64 per element identifying the group geometry (ranks, ranks per domain, tier, level)."""
    key = np.asarray(span.size, dtype=np.int64) | (np.asarray(span.ranks_per_domain, dtype=np.int64) << 22)
    key |= (np.asarray(span.tier, dtype=np.int64) << 44) | (np.asarray(span.level, dtype=np.int64) << 47)
    return np.broadcast_to(key, shape)


def _unique_span(span: GroupSpan, shape):
    """The distinct geometries of ``span`` (broadcast to ``shape``) and the index of each element's one.

    Cached on the span: an estimate costs several collectives on one group (TP: all-reduce, all-gather,
    reduce-scatter; DP: reduce-scatter and all-gather), and the sort behind the dedupe is the costly part.
    """
    cache = span.__dict__.setdefault("_unique_cache", {})
    if shape in cache:
        return cache[shape]
    key = _geometry_key(span, shape).ravel()
    if key.size == 0 or np.all(key == key[0]):
        pick = np.zeros(min(key.size, 1), dtype=np.intp)
        inverse = np.zeros(key.size, dtype=np.intp)
    else:
        _, pick, inverse = np.unique(key, return_index=True, return_inverse=True)

    def take(a):
        return np.broadcast_to(a, shape).ravel()[pick]

    small = GroupSpan(size=take(span.size), ranks_per_domain=take(span.ranks_per_domain),
                      num_domains=take(span.num_domains), ranks_per_node=take(span.ranks_per_node),
                      tier=take(span.tier), level=take(span.level), oversubscription=take(span.oversubscription))
    cache[shape] = (small, inverse.reshape(shape))
    return cache[shape]


def _lower_envelope(alpha: np.ndarray, beta: np.ndarray) -> tuple[list[int], list[float]]:
    """Indices of the lines ``alpha + beta x`` that are lowest somewhere on x >= 0, in order of x, and the
    sizes at which each next one takes over (one fewer than the lines)."""
    live = [c for c in range(alpha.size) if np.isfinite(alpha[c])]
    if not live:
        return [0], []
    current = min(live, key=lambda c: (alpha[c], beta[c]))
    hull, x, xs = [current], 0.0, []
    while True:
        best, best_x = None, np.inf
        for c in live:
            if beta[c] < beta[current]:
                cross = (alpha[c] - alpha[current]) / (beta[current] - beta[c])
                if x <= cross < best_x or (cross == best_x and best is not None and beta[c] < beta[best]):
                    best, best_x = c, cross
        if best is None:
            return hull, xs
        hull.append(best)
        xs.append(best_x)
        current, x = best, best_x


def _affine_min(kind, size_b, small: GroupSpan, inverse, cluster, p, algorithms, gpus_per_process):
    """Fastest candidate per element from each geometry's lower envelope of (latency + size x cost) lines."""
    zero = list(_candidates(kind, np.zeros(small.size.shape), small, cluster, p, algorithms, gpus_per_process))
    one = list(_candidates(kind, np.ones(small.size.shape), small, cluster, p, algorithms, gpus_per_process))
    if not zero:  # no candidate applies (e.g. nvls forced on a fabric without in-switch reduction)
        none = np.zeros(size_b.shape)
        return (np.full(size_b.shape, np.inf), lambda: (none.astype(np.int8), none.astype(np.int8)),
                lambda: (none, none))
    u = small.size.shape[0]
    alpha = np.array([np.broadcast_to(c[2], (u,)) for c in zero])
    with np.errstate(invalid="ignore"):
        beta = np.array([np.broadcast_to(c1[2], (u,)) for c1 in one]) - alpha
    beta = np.where(np.isfinite(alpha), beta, 0.0)
    up = np.array([np.broadcast_to(c1[3], (u,)) for c1 in one])
    out = np.array([np.broadcast_to(c1[4], (u,)) for c1 in one])
    codes_a = np.array([ALGORITHMS.index(c[0]) for c in zero], dtype=np.int8)
    codes_p = np.array([PROTOCOLS.index(c[1]) for c in zero], dtype=np.int8)
    hulls = [_lower_envelope(alpha[:, g], beta[:, g]) for g in range(u)]
    width = max(len(h) for h, _ in hulls)
    env = np.array([h + [h[-1]] * (width - len(h)) for h, _ in hulls]).T  # (width, u) candidate indices
    cols = np.arange(u)
    env_alpha, env_beta = alpha[env, cols], beta[env, cols]  # (width, u)
    # the envelope's segment of each element: how many take-over sizes it lies above (ties keep the earlier
    # line, as a strict "<" between the lines' times would)
    choice = np.zeros(size_b.shape, dtype=np.intp)
    if width > 1:
        takeover = np.array([xs + [np.inf] * (width - 1 - len(xs)) for _, xs in hulls]).T  # (width - 1, u)
        for e in range(width - 1):
            choice += size_b > takeover[e][inverse]
    at = choice * u + inverse
    best_t = env_alpha.ravel()[at] + env_beta.ravel()[at] * size_b

    def flat():
        return env.ravel()[at]

    def codes():
        f = flat()
        return codes_a[f], codes_p[f]

    def wire():
        f = flat()
        return up[f, inverse] * size_b, out[f, inverse] * size_b

    return best_t, codes, wire


def collective_cost(kind: str, size_bytes, span: GroupSpan, cluster: Cluster, algorithm: str = "auto",
                    gpus_per_process: int = 1, *, parameters: Parameters | None = None) -> CollectiveCost:
    """Time of ``kind`` over the groups in ``span``, choosing the fastest algorithm and protocol.

    ``size_bytes`` follows nccl-tests (the whole buffer); see :mod:`tierwise.collectives.volumes`.
    ``gpus_per_process`` > 1 models one process driving several GPUs (nccl-tests ``-g 8``): their kernel
    launches are serialized. Training frameworks run one process per GPU (the default). ``parameters``: the
    model's parameters (:mod:`tierwise.specs.parameters`; None: :func:`load_parameters`, this being a public
    entry point).

    Speed: every candidate except the all-to-all is affine in the size for a fixed group geometry, so
    each candidate's latency and per-byte cost are computed once per distinct geometry (a planner's
    million plans hold a few hundred) and the minimum is taken over the candidates' lines.
    """
    kind = normalize_kind(kind)
    p = (parameters if parameters is not None else load_parameters()).collectives
    size = np.asarray(size_bytes, dtype=float)
    algorithms = _algorithms(kind, algorithm)
    shape = np.broadcast(size, span.size).shape
    size_b = np.broadcast_to(size, shape)
    if kind == "all-to-all":  # max of two lines per geometry, not affine: cost it element-wise
        best_t, codes, wire = _elementwise_min(kind, size_b, span, cluster, p, algorithms, gpus_per_process)
    else:
        small, inverse = _unique_span(span, shape)
        best_t, codes, wire = _affine_min(kind, size_b, small, inverse, cluster, p, algorithms, gpus_per_process)
    if algorithm == "auto" and cluster.fitted:
        best_t, codes = _with_fitted(kind, size, span, cluster, best_t, codes)
    if algorithm != "auto" and np.any(np.isinf(best_t) & (span.size > 1)):
        raise SpecError(
            f"algorithm {algorithm!r} cannot run here (nvls needs in-switch reduction and a group of >= 2 ranks per "
            "scale-up domain; hierarchical needs >= 2 ranks per domain and >= 2 domains; sharp needs a cluster with "
            "fabric.sharp (or --sharp) and >= 2 scale-up domains on InfiniBand); use --algorithm auto"
        )
    n = np.broadcast_to(span.size, shape).astype(float)
    factor = bus_factor(kind, n) if kind != "send-recv" else np.ones_like(n)
    best_t = np.where(n > 1, best_t, 0.0)
    return CollectiveCost(best_t, codes, np.where(n > 1, factor * size_b, 0.0), wire)


def _algorithms(kind: str, algorithm: str) -> tuple[str, ...]:
    """The candidate algorithms: all those modelled for ``kind`` under ``auto``, else the one asked for."""
    allowed = _FOR_KIND[kind]
    if algorithm == "auto":
        return allowed
    if algorithm in allowed:
        return (algorithm,)
    raise SpecError(f"algorithm {algorithm!r} does not exist for {kind} in tierwise; use auto or one of "
                    f"{', '.join(allowed)}")


def _elementwise_min(kind, size_b, span: GroupSpan, cluster, p, algorithms, gpus_per_process):
    """Fastest candidate per element, each candidate costed on every element (for the non-affine all-to-all):
    (time, codes(), wire()) as :func:`_affine_min` returns them."""
    shape = size_b.shape
    best_t = np.full(shape, np.inf)
    best_a = np.zeros(shape, dtype=np.int8)
    best_p = np.zeros(shape, dtype=np.int8)
    best_up = np.zeros(shape)
    best_out = np.zeros(shape)
    for algo, proto, t, up, out in _candidates(kind, size_b, span, cluster, p, algorithms, gpus_per_process):
        t = np.broadcast_to(t, shape)
        better = t < best_t
        best_t = np.where(better, t, best_t)
        best_a = np.where(better, ALGORITHMS.index(algo), best_a)
        best_p = np.where(better, PROTOCOLS.index(proto), best_p)
        best_up = np.where(better, np.broadcast_to(up, shape), best_up)
        best_out = np.where(better, np.broadcast_to(out, shape), best_out)

    def wire(up=best_up, out=best_out):
        return up, out

    def codes(a=best_a, p=best_p):
        return a, p

    return best_t, codes, wire


def _with_fitted(kind: str, size, span: GroupSpan, cluster: Cluster, best_t, codes):
    """``best_t`` and ``codes`` with the fitted time (algorithm ``fitted``, protocol ``-``) wherever the cluster
    has a fit for the tier the group bottlenecks on (:func:`_fitted_time`)."""
    fitted = np.broadcast_to(_fitted_time(kind, size, span, cluster), best_t.shape)
    use = ~np.isnan(fitted)

    def fitted_codes(base=codes, use=use):
        a, p = base()
        return np.where(use, ALGORITHMS.index("fitted"), a), np.where(use, PROTOCOLS.index("-"), p)

    return np.where(use, fitted, best_t), fitted_codes
