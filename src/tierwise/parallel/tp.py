"""Tensor (and sequence) parallelism: a layer's all-gathers and reduce-scatters, or all-reduces, priced on the
tier the TP group spans, and their overlap rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.hierarchy import GroupSpan
from tierwise.pricing.comm import placed_span, price_records

__all__ = ["TpComm", "tp_layer_comm"]


@dataclass(frozen=True)
class TpComm:
    """One layer's TP traffic on one rank: seconds, bytes and exposed seconds, for a dense and a MoE layer."""

    span: GroupSpan
    t: np.ndarray
    bytes: np.ndarray
    exposed: np.ndarray
    moe_t: np.ndarray
    """A MoE layer's TP time: the attention block's pair over tp, the MoE block's over the expert-TP group
    (``layer_traffic`` ``tp_moe``: none with etp = 1); equal to ``t`` for a dense model."""
    moe_bytes: np.ndarray
    moe_exposed: np.ndarray


def tp_layer_comm(model, cluster, plans, P, C, traffic, strides, interference, *, parameters) -> TpComm:
    """TP (and SP) records of every layer's forward, backward and full-recompute forward
    (:func:`tierwise.workload.traffic.layer_traffic` ``tp``), priced over the TP group (consecutive ranks at
    stride ``strides["tp"]``). Exposed unless ``tp_comm_overlap``: then they hide behind the layer's GEMMs
    (3 x forward), and the hidden part still costs ``overlap_interference`` of its time (NCCL kernels take SMs
    and HBM bandwidth from the GEMMs they overlap; Jangda et al. ASPLOS 2022 section 2)."""
    n = P.n
    span = placed_span(cluster, plans.tp, strides["tp"])
    t, bytes_, _ = price_records(traffic["tp"], span, cluster, n, parameters=parameters)

    def exposed(time):
        hidden_ok = np.maximum(time - 3 * C.dense_lin_t, 0.0)
        return np.where(plans.tp_comm_overlap, hidden_ok + interference * (time - hidden_ok), time)

    dense_exposed = exposed(t)
    # a MoE layer (with SP): the MLP block's pair (half the SP records) runs over the expert-TP group instead
    if model.moe is not None and np.any(P.sp):
        etp_t, etp_bytes, _ = price_records(traffic["tp_moe"], placed_span(cluster, plans.etp, strides["tp"]),
                                            cluster, n, parameters=parameters)
        moe_t = np.where(P.sp, 0.5 * t + etp_t, t)
        moe_bytes = np.where(P.sp, 0.5 * bytes_ + etp_bytes, bytes_)
        moe_exposed = exposed(moe_t)
    else:
        moe_t, moe_bytes, moe_exposed = t, bytes_, dense_exposed
    return TpComm(span=span, t=t, bytes=bytes_, exposed=dense_exposed, moe_t=moe_t, moe_bytes=moe_bytes,
                  moe_exposed=moe_exposed)
