"""A tier testbed on one machine: network namespaces as nodes, ``tc tbf``-shaped veths as their links.

``spec`` (what to build, validated before anything is created), ``net`` (iproute2: up / down / probes),
``schedule`` (the transfers each algorithm makes, priced analytically and by the flow simulator),
``run`` (ranks launched inside the namespaces, the collective sweep, ddp), ``check`` (measured vs analytic
vs simulated rows). docs/testbed.md has the design and the figures.
"""

from tierwise.testbed.spec import PREFIX, TestbedError, TestbedSpec

__all__ = ["PREFIX", "TestbedError", "TestbedSpec"]
