"""Network fabrics as arrays: builders per topology family, and their metrics (bisection, hops,
inventory, cost, power).

>>> from tierwise.topology import TopologySpec, build_fabric
>>> fab = build_fabric(TopologySpec(family="fat-tree", gpus=64, radix=8, tiers=3))
>>> fab.num_gpus, fab.num_nics
(64, 64)
"""

from tierwise.topology.build import build_fabric
from tierwise.topology.graph import Fabric
from tierwise.topology.spec import FAMILIES, TopologySpec, load_topology_yaml, spec_from_mapping

__all__ = ["TopologySpec", "FAMILIES", "Fabric", "build_fabric", "load_topology_yaml", "spec_from_mapping"]
