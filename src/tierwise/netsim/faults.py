"""Failures: scale-out cables, fabric switches, or whole scale-up domains (a node or an NVL72 rack).

A failed cable takes both directions down; a failed switch takes all its links; a failed domain removes
its GPUs (their ranks are reported unreachable) and its NICs' cables. Choices are seeded.

Slow cables (issue 34, stragglers on the fabric): ``slow_links`` scale-out cables run at ``1 / (1 + s)`` of
their rate, both directions (a link degraded to a lower speed or with errors and retransmits; Falcon, Wu
et al. arXiv 2410.12588 sec. 3, finds cross-node network fail-slows among the stragglers of a 10,000-GPU
cluster). Max-min sharing then slows every flow crossing them, and a synchronous collective waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.errors import TopologyError
from tierwise.topology.graph import SWITCH, Fabric

__all__ = ["Failures", "parse_fail_count", "apply_failures", "slow_link_scale"]


@dataclass(frozen=True)
class Failures:
    links: str | int = 0
    """Scale-out cables to fail: a count ("12") or a percentage ("0.1%")."""
    switches: str | int = 0
    domains: str | int = 0
    slow_links: str | int = 0
    """Scale-out cables running slow: a count or a percentage (module docstring)."""
    slow_by: float = 0.25
    """How much slower a slow cable is: 0.25 runs at 1/1.25 of its rate."""

    @property
    def any(self) -> bool:
        return any(str(x).strip() not in ("0", "0%", "")
                   for x in (self.links, self.switches, self.domains, self.slow_links))


def slow_link_scale(fab: Fabric, failures: Failures, seed: int = 1) -> tuple[np.ndarray, int]:
    """(capacity factor of every link, slow cables): ``slow_links`` seeded scale-out cables at
    ``1 / (1 + slow_by)``, the rest 1."""
    scale = np.ones(fab.num_links)
    out_cables = np.unique(fab.link_cable[fab.link_tier >= 1])
    n = parse_fail_count(failures.slow_links, out_cables.size, "scale-out cables", "--slow-links")
    s = failures.slow_by
    if not (isinstance(s, (int, float)) and np.isfinite(s) and 0.0 <= s <= 10.0):
        raise TopologyError(f"--slow-by {s!r} must be between 0 and 10 (0.25: a slow cable runs at 1/1.25 of its rate)")
    if n:
        chosen = np.random.default_rng(seed + 104729).choice(out_cables, size=n, replace=False)
        scale[np.isin(fab.link_cable, chosen)] = 1.0 / (1.0 + s)
    return scale, int(n)


def parse_fail_count(value: str | int, total: int, what: str, flag: str) -> int:
    """A count or a percentage of ``total``; more than ``total`` is an error naming both."""
    text = str(value).strip()
    try:
        percent = float(text[:-1]) if text.endswith("%") else None
        count = int(text) if percent is None else 0
    except ValueError:
        raise TopologyError(f"{flag} {value!r} is neither a count nor a percentage; write e.g. 12 or 0.1%") from None
    if percent is not None:
        if not 0.0 <= percent <= 100.0:  # also NaN and infinities
            raise TopologyError(f"{flag} {value!r} is out of range; use a percentage 0% <= {flag} < 100% "
                                f"or a count 0 <= {flag} < {total} (failing every one leaves no rank connected)")
        count = int(round(percent / 100.0 * total))
    if count < 0:
        raise TopologyError(f"{flag} {value!r} is negative; use 0 or more")
    if count > total:
        raise TopologyError(f"{flag} {value} asks to fail {count} {what} but the fabric has only {total}; "
                            f"use {flag} < {total} (failing every one leaves no rank connected)")
    return count


def apply_failures(fab: Fabric, failures: Failures, seed: int = 1):
    """(link_ok mask, failed GPU mask, counts) for ``failures``."""
    rng = np.random.default_rng(seed + 7919)
    link_ok = np.ones(fab.num_links, dtype=bool)
    gpu_dead = np.zeros(fab.num_gpus, dtype=bool)
    out_cables = np.unique(fab.link_cable[fab.link_tier >= 1])
    n_links = parse_fail_count(failures.links, out_cables.size, "scale-out cables", "--fail-links")
    chosen = dead_switches = doms = np.zeros(0, dtype=np.int64)
    if n_links:
        chosen = rng.choice(out_cables, size=n_links, replace=False)
        link_ok &= ~np.isin(fab.link_cable, chosen)
    switches = np.nonzero(fab.node_kind == SWITCH)[0]
    n_sw = parse_fail_count(failures.switches, switches.size, "fabric switches", "--fail-switches")
    if n_sw:
        dead = np.zeros(fab.num_nodes, dtype=bool)
        dead_switches = rng.choice(switches, size=n_sw, replace=False)
        dead[dead_switches] = True
        link_ok &= ~(dead[fab.link_src] | dead[fab.link_dst])
    num_domains = fab.num_gpus // max(fab.domain_size, 1)
    n_dom = parse_fail_count(failures.domains, num_domains, "scale-up domains", "--fail-domains")
    if n_dom:
        doms = rng.choice(num_domains, size=n_dom, replace=False)
        gpu_dead = np.isin(np.arange(fab.num_gpus) // max(fab.domain_size, 1), doms)
        dead = np.zeros(fab.num_nodes, dtype=bool)
        dead[: fab.num_gpus] = gpu_dead
        nic_gpu_dead = np.zeros(fab.num_nics, dtype=bool)
        nic_gpu_dead[fab.gpu_nic[gpu_dead]] = True
        if fab.family != "torus":
            dead[fab.nic_node[nic_gpu_dead]] = True
            link_ok &= ~(dead[fab.link_src] | dead[fab.link_dst])
    counts = {"failed_cables": int(n_links), "failed_switches": int(n_sw), "failed_domains": int(n_dom),
              "failed_links_total": int((~link_ok).sum() // 2),
              # which parts (ids: cable, switch node, domain index); simulate names them
              "failed_ids": {"cables": sorted(int(x) for x in chosen), "switches": sorted(int(x) for x in dead_switches),
                             "domains": sorted(int(x) for x in doms)}}
    return link_ok, gpu_dead, counts
