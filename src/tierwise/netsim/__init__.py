"""Flow-level network simulator: collectives -> flows -> routing (ECMP / adaptive) -> max-min sharing.

>>> from tierwise.topology import TopologySpec, build_fabric
>>> from tierwise.netsim import simulate
>>> fab = build_fabric(TopologySpec(family="fat-tree", gpus=32, radix=8, tiers=2))
>>> r = simulate(fab, "all-reduce", 1e9, algorithm="ring")
>>> abs(r["time_s"] / r["analytic_time_s"] - 1) < 0.02
True
"""

from tierwise.netsim.faults import Failures
from tierwise.netsim.simulate import KINDS, simulate

__all__ = ["simulate", "Failures", "KINDS"]
