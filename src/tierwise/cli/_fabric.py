"""The fabric overrides, declared once for every command that builds a fabric (``estimate``, ``plan``, ``scale``,
``goodput``, ``design``; ``topo`` and ``simulate`` name the same flags): ``--topology --fabric --radix --tiers
--oversubscription``. What is not given is chosen by :func:`tierwise.topology.choose.choose_fabric` and listed
under ``assumed``."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["TopologyOpt", "FabricOpt", "RadixOpt", "TiersOpt", "OversubOpt", "SharpOpt", "fabric_overrides"]

TopologyOpt = Annotated[str | None, typer.Option("--topology", help="scale-out topology: fat-tree | rail-optimized | "
                                                 "rail-only | dragonfly | nvl72 (default: rail-optimized for "
                                                 "servers, nvl72 for racks)")]
FabricOpt = Annotated[str | None, typer.Option("--fabric", help="ib | roce (default: roce for a cluster named *roce*, "
                                               "else ib)")]
RadixOpt = Annotated[int | None, typer.Option("--radix", help="switch ports at the NIC speed (default: the "
                                              "cluster's switch, then a larger generation as the GPUs need)")]
TiersOpt = Annotated[int | None, typer.Option("--tiers", help="Clos tiers 1-3 (default: the fewest that hold the "
                                              "GPUs)")]
OversubOpt = Annotated[float | None, typer.Option("--oversubscription", help="leaf down:up ratio (default 1, "
                                                  "non-blocking)")]
SharpOpt = Annotated[bool, typer.Option("--sharp", help="the InfiniBand switches run SHARP for NCCL (CollNet): "
                                        "all-reduce may reduce in the network (default: the cluster file's "
                                        "fabric.sharp, else off, as NCCL_COLLNET_ENABLE defaults to 0)")]


def fabric_overrides(topology=None, fabric=None, radix=None, tiers=None, oversubscription=None):
    """The checked :class:`~tierwise.topology.choose.FabricOverrides` (one-line errors naming the flag)."""
    from tierwise.topology.choose import FabricOverrides

    return FabricOverrides(topology=topology, fabric=fabric, radix=radix, tiers=tiers,
                           oversubscription=oversubscription).checked()
