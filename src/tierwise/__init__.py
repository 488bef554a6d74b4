"""tierwise: how to carve up a model over a cluster's interconnect tiers, and how fast it will run.

The package is layered (see docs/architecture.md): ``units`` and ``errors`` at the bottom, then ``specs``
(catalog and loading), ``hierarchy`` (tiers and placement), ``collectives`` (cost of each collective on each
tier), ``workload`` (FLOPs, memory, traffic), ``estimate`` (one training step, vectorized over plans),
``planner``, ``topology`` and ``netsim`` (explicit fabrics), ``measure`` (torch.distributed, nccl-tests),
and the thin ``cli``. Nothing imports upward.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
