"""A simulated fabric as cluster YAML (``tierwise simulate --emit-cluster``), for ``--cluster FILE``."""

from __future__ import annotations

from tierwise.atomic import write_atomic
from tierwise.specs.cluster import load_cluster
from tierwise.specs.parameters import Parameters, load_parameters

__all__ = ["write_cluster"]


def write_cluster(path: str, fab, result: dict, args: str, base: str = "dgx-h100", *,
                  parameters: Parameters | None = None) -> str:
    """Write the cluster YAML of ``simulate --emit-cluster`` to ``path``; return the path written.

    The mapping is one the core's loader accepts: ``base:`` (a catalog cluster: its accelerator and links)
    plus the fabric's shape (GPUs per node, scale-up domain, NICs per node and their rate), the scale-out
    efficiency and a ``source:`` line naming ``args`` and the simulation's seed. It is written atomically
    (:func:`tierwise.atomic.write_atomic`: a temporary file, then a replace) under the option name
    ``--emit-cluster``.

    The analytic model already charges the NIC's achievable fraction of its line rate
    (``link_efficiency.scale_out`` in catalog/parameters.yaml); what the fabric's shape adds on top is the
    simulated slowdown against the ideal (``analytic_time_s / time_s``), so the emitted efficiency is their
    product.
    """
    import yaml

    load_cluster(base)  # an unknown base is a clear error before anything is written
    ratio = result["analytic_time_s"] / result["time_s"] if result["time_s"] else 0.0
    ratio = min(max(ratio, 0.0), 1.0)
    parameters = parameters if parameters is not None else load_parameters()  # a command's entry point
    eff = parameters.collectives["link_efficiency"]["scale_out"] * ratio
    data = {
        "base": base,
        "name": f"{fab.family}-{fab.num_gpus}-simulated",
        "gpus_per_node": fab.gpus_per_node,
        "scale_up_domain": fab.domain_size,
        "nics_per_node": fab.nics_per_node,
        "nic_bandwidth": f"{fab.nic_bytes_per_s * 8 / 1e9:g} Gb/s",
        "efficiency": {"scale_out": round(float(eff), 4)},
        "source": f"tierwise {args} (seed {result['seed']})",
    }

    return write_atomic(path, yaml.safe_dump(data, sort_keys=False), "--emit-cluster")
