"""Cluster design: cost and energy of a training job (:mod:`.cost`), designs compared on one job
(:mod:`.designs`) and the same job across accelerator generations (:mod:`.trend`)."""

from tierwise.design.cost import default_fabric, economics

__all__ = ["economics", "default_fabric"]
