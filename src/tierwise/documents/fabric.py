"""The fabric documents: tiers, collective, topo and simulate.

Shapes are written in the notation of :mod:`tierwise.documents._spec`. Keys other tools read keep their
names (issue 32): ``tiers``' ``name`` and ``latency_s`` in each tier; ``simulate``'s ``time_s`` and
``analytic_time_s``; ``topo``'s ``servers.units`` and ``servers.price_key``.
"""

from __future__ import annotations

__all__ = ["DOCUMENTS"]

TIERS = {
    "cluster": "str",
    "tiers": [{
        "name": "str", "technology": "str", "domain_size": "int", "datasheet_bytes_per_s": "num",
        "datasheet_direction": "str", "bytes_per_s": "num", "latency_s": "num", "ratio_to_hbm": "num",
        "datasheet_ratio_to_hbm": "num", "note": "str", "?domain_aggregate_bytes_per_s": "num",
        "?domain_aggregate_bidirectional_bytes_per_s": "num", "?domain_bisection_bytes_per_s": "num",
        "?domain_bisection_basis": "str",
    }],
}

COLLECTIVE = {
    "op": "str", "size_bytes": "num", "num_ranks": "int", "ranks_per_node": "int", "cluster": "str",
    "tier": "str", "bytes_per_rank": "num", "time_s": "num", "datasheet_time_s": "num?",
    "algbw_bytes_per_s": "num?", "busbw_bytes_per_s": "num?", "algorithm": "str", "protocol": "str",
    "wire_bytes_per_tier": "obj", "notes": "list[str]",
}

TOPO = {
    "topology": "str", "params": "obj", "num_gpus": "int", "num_switches": "int", "num_links": "int",
    "bisection_bytes_per_s": "num", "diameter_hops": "int", "avg_hops": "num", "switches_per_tier": "obj",
    "switch_radix": "int", "num_nics": "int", "num_cables": "int", "cables_by_speed": "obj",
    "network_capex_usd": "num", "network_power_w": "num", "capex_by_part_usd": "obj", "power_by_part_w": "obj",
    "servers_capex_usd": "num", "network_share_of_capex": "num", "fabric": "str", "cost_assumptions": "obj",
    "servers": {"capex_usd": "num", "units": "int", "gpus_per_unit": "int", "price_key": "str",
                "usd_per_unit": "num", "power_w": "num"},
    "cluster": "str", "?scale_up_domain": "obj", "?scale_up_domain_line": "str", "assumed": "list[str]",
}

SIMULATE = {
    "topology": "str", "pattern": "str", "algorithm": "str", "routing": "str", "method": "str",
    "seed": "int", "size_bytes": "num", "num_ranks": "int", "num_ranks_simulated": "int",
    "unreachable_ranks": "list", "time_s": "num", "algbw_bytes_per_s": "num", "busbw_bytes_per_s": "num",
    "analytic_time_s": "num?", "phases": [{"name": "str", "time_s": "num"}], "bottleneck_links": "list[obj]",
    "failures": {"failed_cables": "int", "failed_switches": "int", "failed_links_total": "int"},
    "link_utilization": "obj", "notes": "list[str]",
}

SIMULATE_INCAST = {
    "topology": "str", "pattern": "str", "routing": "str", "seed": "int", "fan_in": "int", "size_bytes": "num",
    "receiver": "int", "senders": "list[int]", "victim_destinations": "list[int]", "incast_time_s": "num",
    "incast_analytic_time_s": "num", "incast_flow_rate_bytes_per_s": "num",
    "victims": {mode: {"rate_bytes_per_s": "num", "time_s": "num"} for mode in ("max-min", "dcqcn", "pfc")},
    "victim_slowdown_pfc": "num", "notes": "list[str]",
}

SIMULATE_JOBS = {
    "topology": "str", "placement": "str", "routing": "str", "seed": "int", "size_bytes": "num",
    "jobs": [{"job": "str", "pattern": "str", "gpus": "int", "first_gpus": "list[int]", "alone_time_s": "num",
              "together_time_s": "num", "slowdown": "num"}],
    "slowdown": "num", "notes": "list[str]",
}

DOCUMENTS = {
    "tiers": ("tiers", "A cluster's interconnect tiers, fastest first: bandwidth, latency and domain size.",
              TIERS),
    "collective": ("collective", "The time of one collective on a cluster, with the algorithm and protocol "
                                 "chosen and the bytes on each tier.", COLLECTIVE),
    "topo": ("topo", "An explicit fabric: switches, links, cables, optics, bisection, hops, capex and power.",
             TOPO),
    "simulate": ("simulate", "A collective or traffic pattern run on an explicit fabric by the flow-level "
                             "simulator, beside the analytic time.", SIMULATE),
    "simulate-incast": ("simulate", "N senders to one GPU at a leaf, with a victim flow beside each: "
                                           "the incast's time and the victims' rates under max-min, DCQCN and "
                                           "PFC.", SIMULATE_INCAST),
    "simulate-jobs": ("simulate", "Two jobs' collectives on one fabric: each alone and together, "
                                               "and the slowdown.", SIMULATE_JOBS),
}
