"""Checkpoint size and times, and the restart they set (arrays over plans).

* ``bytes_per_gpu`` = weights + optimizer state the GPU holds (the estimator's memory model,
  ``estimate/step.py _memory``: sharded by the plan's TP/PP/EP and ZeRO stage);
* the job's distinct state ``S = P (w + o)`` (``P`` parameters; ``w``, ``o`` bytes per parameter of weights
  and optimizer state from the parameter catalog: 2 + 12 = 14 for bf16 weights with fp32 Adam master and
  moments, reliability-notes §11) is written at the aggregate storage bandwidth ``B``: ``write = S / B``;
* asynchronous (two-stage; MegaScale, reliability-notes §4.1): only the GPU-to-host copy blocks,
  ``delta = bytes_per_gpu / host_bandwidth``; the write drains in the background (``drain = S / B``), and a
  failure before the drain ends loses the previous interval as well, so each failure costs ``drain`` more;
* restore = read ``S / B`` (one reader per data-parallel group, MegaScale) + broadcast of each GPU's shard
  to its replicas over scale-out (``bytes_per_gpu / nic_bandwidth``: a pipelined broadcast moves each byte
  once per link);
* restart = detection and diagnosis (catalog, MegaScale's "under 10 minutes") + restore + one step.
"""

from __future__ import annotations

import numpy as np

from tierwise.goodput.rates import RateCatalog
from tierwise.goodput.results import CheckpointCosts
from tierwise.specs.parameters import Parameters
from tierwise.workload.flops import model_shape

__all__ = ["checkpoint_costs"]


def _storage(num_gpus: int, opts, rates: RateCatalog) -> tuple[float, list[str]]:
    if opts.storage_bytes_per_s is not None:
        return float(opts.storage_bytes_per_s), []
    entry = rates.storage_bytes_per_s_per_gpu
    per_gpu = float(entry.value)
    storage = per_gpu * num_gpus
    return storage, [f"checkpoint storage {storage / 1e9:,.1f} GB/s aggregate = {per_gpu / 1e6:.0f} MB/s per GPU "
                     f"({entry.source})"]


def checkpoint_costs(model, cluster, num_gpus: int, est, opts, rates: RateCatalog, *,
                     parameters: Parameters) -> tuple[CheckpointCosts, list[str]]:
    """Per-plan arrays ``bytes_per_gpu, write_s, blocking_s, drain_s, restore_s, restart_s`` and the
    scalars ``state_bytes, storage_bytes_per_s``; with what was assumed (the state's bytes per parameter from
    ``parameters``' ``compute:`` section, the cluster's own over it)."""

    storage, assumed = _storage(num_gpus, opts, rates)
    cparams = {**parameters.compute, **cluster.compute}
    state = float(model_shape(model).total_params) * (float(cparams["weight_bytes"])
                                                      + float(cparams["optimizer_state_bytes"]))
    per_gpu = est.memory["weights_bytes"] + est.memory["optimizer_bytes"]
    n = len(est)
    write = np.full(n, state / storage)
    mode = opts.checkpoint_write
    if mode in ("auto", "async"):
        delta, drain = per_gpu / cluster.host_bytes_per_s, write
        if mode == "auto":
            assumed.append("checkpoint writes asynchronous (two-stage: GPU-to-host copy blocks, then a background "
                           "write to storage; MegaScale, reliability-notes §4.1)")
    elif mode == "sync":
        delta, drain = write, np.zeros(n)
    else:
        delta, drain = np.full(n, float(mode)), np.zeros(n)
    restore = state / storage + per_gpu / cluster.nic_bytes_per_s
    if opts.restart_s is None:
        detect = rates.detect_s
        restart = float(detect.value) + restore + est.step_time_s
        assumed.append(f"restart = {float(detect.value):.0f} s detection and diagnosis ({detect.source}) "
                       "+ checkpoint restore (read + broadcast) + one step to re-warm")
    else:
        restart = np.full(n, float(opts.restart_s))
    return (CheckpointCosts(bytes_per_gpu=per_gpu, state_bytes=state, storage_bytes_per_s=storage, write_s=write,
                            blocking_s=delta, drain_s=drain, restore_s=restore, restart_s=restart), assumed)
