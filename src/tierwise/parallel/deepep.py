"""DeepEP's dispatch and combine kernels as kernel constants: the MoE all-to-all of a serving instance whose
experts are spread wider than its attention TP group (:func:`tierwise.serve.kv.instance_gpus`).

Source: DeepEP README (deepseek-ai/DeepEP, V1 "Performance", kept as docs/legacy.md), measured on H800 with one
CX7 400 Gb/s NIC per GPU ("~50 GB/s maximum bandwidth") and NVLink "~160 GB/s maximum bandwidth", hidden 7168,
top-8, FP8 dispatch and BF16 combine:

* normal kernels (training, inference prefill; NVLink and RDMA forwarding, 4096 tokens per batch, top-4
  groups): intranode EP 8 dispatch 153 GB/s, combine 158 GB/s (NVLink); internode EP 16 / 32 / 64 dispatch
  43 / 58 / 51 GB/s, combine 43 / 57 / 50 GB/s (RDMA bottleneck bandwidth);
* low-latency kernels (decode; pure RDMA, 128 tokens per batch): dispatch EP 8 / 16 / 32 / 64 / 128 / 256 at
  77 / 118 / 155 / 173 / 192 / 194 us (98 / 63 / 48 / 43 / 39 / 39 GB/s), combine at 114 / 195 / 273 / 314 /
  369 / 360 us (127 / 74 / 53 / 46 / 39 / 40 GB/s).

The published bandwidths are *logical* (bytes a rank's tokens carry over the time; "90 GB/s actually contains
local rank traffic", DeepEP README V2 notes), so they are used on the bytes the kernel moves for a rank, and
scaled to another cluster by its own tier bandwidth over the H800 test's (50 GB/s RDMA per GPU, 160 GB/s
NVLink): a kernel is taken to reach the same fraction of its links. The low-latency table's latencies are
its bytes over its bandwidth (128 x 8 x 7168 x 1 B / 194 us = 38 GB/s at EP 256), so the kernel time is
``bytes / bandwidth`` plus the tier's latency (the cluster's ``scale_up_latency`` / ``scale_out_latency``) for
the small batches below the table's. Inside one scale-up domain (an NVL72 rack) the low-latency kernels run
over NVLink (DeepEP README: "low-latency kernels ... NVLink within a node"), priced at the intranode normal
kernels' fraction of NVLink. Between the table's EP sizes the bandwidth is interpolated in ``log2(ep)`` and
held at its ends.

Bytes per rank (:func:`deepep_time`): a rank dispatches its ``T`` tokens' ``top_k`` copies (``h`` elements at
1 byte under FP8 weights, 2 otherwise) and combines them back in BF16. The normal kernels across domains send a
token once per node that holds one of its experts (:func:`tierwise.parallel.ep.deepep_node_dedup`'s fraction);
the low-latency kernels send every copy.
"""

from __future__ import annotations

import numpy as np

from tierwise.hierarchy import group_span
from tierwise.parallel.ep import node_copies_fraction

__all__ = ["NORMAL", "LOW_LATENCY", "H800_RDMA_BYTES_PER_S", "H800_NVLINK_BYTES_PER_S", "deepep_time"]

H800_RDMA_BYTES_PER_S = 50e9
"""DeepEP README: CX7 400 Gb/s, "~50 GB/s maximum bandwidth"."""
H800_NVLINK_BYTES_PER_S = 160e9
"""DeepEP README: H800 "~160 GB/s NVLink maximum bandwidth"."""

NORMAL = {
    "intranode": {"dispatch": ((8,), (153e9,)), "combine": ((8,), (158e9,))},
    "internode": {"dispatch": ((16, 32, 64), (43e9, 58e9, 51e9)), "combine": ((16, 32, 64), (43e9, 57e9, 50e9))},
}
"""Normal kernels' bottleneck bandwidth by EP size (module docstring)."""

LOW_LATENCY = {
    "dispatch": ((8, 16, 32, 64, 128, 256), (98e9, 63e9, 48e9, 43e9, 39e9, 39e9)),
    "combine": ((8, 16, 32, 64, 128, 256), (127e9, 74e9, 53e9, 46e9, 39e9, 40e9)),
}
"""Low-latency kernels' RDMA bandwidth by EP size (module docstring)."""


def _table_rate(table, ep) -> np.ndarray:
    sizes, rates = table
    return np.interp(np.log2(np.maximum(np.asarray(ep, dtype=float), 1.0)), np.log2(sizes), rates)


def deepep_time(model, cluster, ep, tokens, *, low_latency: bool, fp8_dispatch: bool) -> dict[str, np.ndarray]:
    """Seconds of one MoE layer's dispatch + combine on one rank dispatching ``tokens`` tokens over an EP group of
    ``ep`` consecutive GPUs (module docstring), and the tier the group spans (``tier``: ``scale_up`` inside a
    scale-up domain, ``scale_out`` across). ``low_latency``: the decode kernels; else the normal kernels."""
    ep = np.asarray(ep, dtype=np.int64)
    tokens = np.asarray(tokens, dtype=float)
    ep, tokens = np.broadcast_arrays(ep, tokens)
    span = group_span(cluster, ep, 1)
    inside = np.asarray(span.num_domains) <= 1
    h, k = model.hidden_size, model.moe.top_k
    d_bytes = tokens * k * h * (1.0 if fp8_dispatch else 2.0)
    c_bytes = tokens * k * h * 2.0
    nvl = cluster.scale_up_bytes_per_s / H800_NVLINK_BYTES_PER_S
    rdma = cluster.scale_out_bytes_per_s / H800_RDMA_BYTES_PER_S
    intra = {kind: _table_rate(NORMAL["intranode"][kind], 8) * nvl for kind in ("dispatch", "combine")}
    if low_latency:
        rate = {kind: np.where(inside, intra[kind], _table_rate(LOW_LATENCY[kind], ep) * rdma)
                for kind in ("dispatch", "combine")}
        share = np.ones(ep.shape)
    else:
        rate = {kind: np.where(inside, intra[kind], _table_rate(NORMAL["internode"][kind], ep) * rdma)
                for kind in ("dispatch", "combine")}
        # across domains a token crosses RDMA once per node holding one of its experts (node-limited)
        share = np.where(inside, 1.0, node_copies_fraction(model, np.asarray(span.num_domains, dtype=float)))
    alpha = np.where(inside, cluster.scale_up_latency_s, cluster.scale_out_latency_s)
    t = 2.0 * alpha + share * (d_bytes / rate["dispatch"] + c_bytes / rate["combine"])
    t = np.where(ep > 1, t, 0.0)
    return {"time_s": t, "tier": np.where(inside, "scale_up", "scale_out"), "bytes": share * (d_bytes + c_bytes)}
