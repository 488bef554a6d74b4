"""tierwise: how to carve up a model over a cluster's interconnect tiers, and how fast it will run.

The package is layered (see docs/architecture.md): ``units`` and ``errors`` at the bottom, then ``specs``
(catalog and loading), ``hierarchy`` (tiers and placement), ``collectives`` (cost of each collective on each
tier), ``workload`` (FLOPs, memory, traffic), ``estimate`` (one training step, vectorized over plans),
``planner``, ``topology`` and ``netsim`` (explicit fabrics), ``measure`` (torch.distributed, nccl-tests),
and the thin ``cli``. Nothing imports upward.

The Python API a notebook needs is exported here (imported on first use, so ``import tierwise`` and the
CLI's start-up stay light)::

    >>> import tierwise
    >>> model, cluster = tierwise.load_model("llama3.1-70b"), tierwise.load_cluster("dgx-h100")
    >>> plan = tierwise.plan_from_mapping({"tp": 2, "pp": 8, "global_batch_size": 64, "seq_length": 4096,
    ...                                    "order": "tp-pp-cp-dp", "recompute": "full"}, num_gpus=64)
    >>> est = tierwise.estimate_step(model, cluster, tierwise.PlanBatch.from_plans([plan]))
    >>> tierwise.TIER_ORDER[int(est.axis_tier["pp"][0])]  # stages 0-3 in node 0, 4-7 in node 1
    'scale_out'
    >>> span = tierwise.group_span(cluster, 8, 1)  # eight ranks on one node's NVLink
    >>> cost = tierwise.collective_cost("all-reduce", 2**30, span, cluster)
    >>> 1 < float(cost.time_s) * 1e3 < 10  # ms for 1 GiB
    True
    >>> best = tierwise.search(tierwise.load_model("llama3.1-8b"), cluster, 8, 16, 4096, top=1)
    >>> int(best.plans["tp"][0] * best.plans["pp"][0] * best.plans["cp"][0] * best.plans["dp"][0])
    8
"""

import importlib as _importlib

from tierwise._version import __version__

_API = {
    "load_model": "tierwise.specs.model",
    "load_cluster": "tierwise.specs.cluster",
    "plan_from_mapping": "tierwise.specs.plan_mapping",
    "PlanBatch": "tierwise.specs.plan",
    "TIER_ORDER": "tierwise.hierarchy",
    "tiers": "tierwise.hierarchy",
    "group_span": "tierwise.hierarchy",
    "group_hops": "tierwise.hierarchy",
    "collective_cost": "tierwise.collectives.model",
    "layer_traffic": "tierwise.workload.traffic",
    "estimate_step": ("tierwise.estimate.step", "estimate"),
    "StepEstimates": "tierwise.estimate.step",
    "search": "tierwise.planner",
    "Constraints": "tierwise.planner",
    "economics": "tierwise.design.cost",
    "compare_designs": "tierwise.design.designs",
    "generation_trend": "tierwise.design.trend",
    "inverse_bandwidth": "tierwise.design.bandwidth",
    "domain_sweep": "tierwise.design.domain",
    "power_capped": "tierwise.design.power",
    "scale_up_domain": "tierwise.hierarchy",
    "Levers": "tierwise.estimate.levers",
    "with_levers": "tierwise.estimate.levers",
    "estimate_goodput": ("tierwise.goodput.model", "goodput"),
    "GoodputOptions": "tierwise.goodput.model",
}
"""Public name -> the module that defines it (or the module and the name there: ``tierwise.estimate`` is the
subpackage, so its function is exported as ``estimate_step``). An exported function is wrapped by
:func:`tierwise._arguments.checked` (its arguments are checked by name first; ``__wrapped__`` is the
function itself); a class or constant is exported as it is."""

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'tierwise' has no attribute {name!r}")
    module, attr = _API[name] if isinstance(_API[name], tuple) else (_API[name], name)
    value = getattr(_importlib.import_module(module), attr)
    # functions check their arguments first: a wrong type is a TierwiseError naming it, not a deep TypeError
    value = _importlib.import_module("tierwise._arguments").checked(name, value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's own dunders; never a helper module it imports."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})
