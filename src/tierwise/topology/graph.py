"""A network fabric as arrays: nodes, and directed links with one-way capacity (bytes/s) and latency (s).

Every physical cable is two directed links (one per direction) sharing a ``link_cable`` id; capacities are
**one-way** (ARCHITECTURE.md: bandwidth inside is one direction). Node ids are laid out in blocks:

* ``[0, num_gpus)`` GPUs (graph node id == rank id);
* then scale-up switches (one per NVSwitch domain: an 8-GPU node's NVSwitches or an NVL72 rack's switch
  trays, abstracted into one non-blocking crossbar);
* then NICs (the endpoints of the scale-out fabric; a GPU reaches the fabric through ``gpu_nic``);
* then fabric switches, with ``node_tier`` 1 (leaf), 2 (spine / aggregation), 3 (core); dragonfly
  routers are tier 1.

``link_group`` names a set of parallel, interchangeable links (all uplinks of one leaf, all agg-to-core
links leaving one pod, all global links between two dragonfly groups): ideal adaptive routing spreads a
flow over a group in proportion to capacity, so it sees the group as one resource of summed capacity.
``tables`` holds each family's routing tables (arrays of link ids), read by :mod:`tierwise.netsim.routing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Fabric", "GraphBuilder", "GPU", "SCALEUP_SWITCH", "NIC", "SWITCH", "LINK_TIER_NAMES"]

GPU, SCALEUP_SWITCH, NIC, SWITCH = 0, 1, 2, 3
# link tiers: 0 scale-up, 1 NIC<->leaf (access), 2 leaf<->spine/agg or dragonfly local or torus,
# 3 agg<->core or dragonfly global
LINK_TIER_NAMES = {0: "scale_up", 1: "access", 2: "tier2", 3: "tier3"}


@dataclass(eq=False)
class Fabric:
    """A built fabric; see the module docstring for the layout."""

    family: str
    params: dict
    num_gpus: int
    gpus_per_node: int
    nics_per_node: int
    domain_size: int
    """GPUs per scale-up domain (8-GPU node, 72 for NVL72, 1 when there is no scale-up tier)."""
    scale_up: str
    """"nvswitch", "mesh" (switchless all-to-all links) or "none"."""
    nic_bytes_per_s: float
    scale_up_bytes_per_s: float
    """One-way scale-up bandwidth per GPU."""
    node_kind: np.ndarray
    node_tier: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    link_cap: np.ndarray
    link_lat: np.ndarray
    link_tier: np.ndarray
    link_cable: np.ndarray
    link_group: np.ndarray
    gpu_nic: np.ndarray
    nic_node: np.ndarray
    """Graph node id of each NIC (NIC index -> node id)."""
    tables: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.node_kind.size)

    @property
    def num_links(self) -> int:
        """Directed links (two per cable)."""
        return int(self.link_src.size)

    @property
    def num_groups(self) -> int:
        return int(self.link_group.max()) + 1 if self.link_group.size else 0

    @property
    def num_nics(self) -> int:
        return int(self.nic_node.size)

    def group_capacity(self, link_cap: np.ndarray | None = None) -> np.ndarray:
        """Summed one-way capacity of each adaptive-routing group (failed links count 0)."""
        cap = self.link_cap if link_cap is None else link_cap
        return np.bincount(self.link_group, weights=cap, minlength=self.num_groups)



class GraphBuilder:
    """Accumulates nodes and cables in blocks of numpy arrays (no per-link Python objects)."""

    def __init__(self) -> None:
        self._kind: list[np.ndarray] = []
        self._tier: list[np.ndarray] = []
        self.num_nodes = 0
        self._links: list[tuple[np.ndarray, ...]] = []
        self.num_links = 0
        self.num_cables = 0
        self.num_groups = 0

    def add_nodes(self, kind: int, count: int, tier: int = 0) -> np.ndarray:
        ids = np.arange(self.num_nodes, self.num_nodes + count, dtype=np.int64)
        self._kind.append(np.full(count, kind, dtype=np.int8))
        self._tier.append(np.full(count, tier, dtype=np.int8))
        self.num_nodes += count
        return ids

    def new_groups(self, count: int) -> np.ndarray:
        ids = np.arange(self.num_groups, self.num_groups + count, dtype=np.int64)
        self.num_groups += count
        return ids

    def add_cables(self, a, b, cap, lat, tier: int, group_ab=None, group_ba=None):
        """Cables between nodes ``a[i]`` and ``b[i]``: returns (link ids a->b, link ids b->a).

        Groups default to one group per directed link.
        """
        a = np.asarray(a, dtype=np.int64).ravel()
        b = np.asarray(b, dtype=np.int64).ravel()
        n = a.size
        cap = np.broadcast_to(np.asarray(cap, dtype=float), (n,))
        lat = np.broadcast_to(np.asarray(lat, dtype=float), (n,))
        cable = np.arange(self.num_cables, self.num_cables + n, dtype=np.int64)
        self.num_cables += n
        g_ab = self.new_groups(n) if group_ab is None else np.broadcast_to(np.asarray(group_ab), (n,))
        g_ba = self.new_groups(n) if group_ba is None else np.broadcast_to(np.asarray(group_ba), (n,))
        fwd = np.arange(self.num_links, self.num_links + n, dtype=np.int64)
        back = fwd + n
        self.num_links += 2 * n
        tiers = np.full(n, tier, dtype=np.int8)
        self._links.append((a, b, cap, lat, tiers, cable, g_ab))
        self._links.append((b, a, cap, lat, tiers, cable, g_ba))
        return fwd, back

    def finish(self, **kwargs) -> Fabric:
        cols = list(zip(*self._links, strict=True)) if self._links else [[] for _ in range(7)]
        cat = [np.concatenate(c) if len(c) else np.zeros(0) for c in cols]
        return Fabric(
            node_kind=np.concatenate(self._kind),
            node_tier=np.concatenate(self._tier),
            link_src=cat[0].astype(np.int64),
            link_dst=cat[1].astype(np.int64),
            link_cap=cat[2].astype(float),
            link_lat=cat[3].astype(float),
            link_tier=cat[4].astype(np.int8),
            link_cable=cat[5].astype(np.int64),
            link_group=cat[6].astype(np.int64),
            **kwargs,
        )
