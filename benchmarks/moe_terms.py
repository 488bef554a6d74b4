"""What each issue-14 MoE term (wt-14m) buys, one at a time, in-sample at fixed parameters (docs/validation.md).

Each row switches one term off (everything else as shipped, parameters as loaded: the shipped file or
``TIERWISE_PARAMETERS``; no refit) and prints the calibration figures (median of per-source medians, overall
median, p90, max) and the errors of the MoE rows. Switching off means (patches for the run only):

* ``expert tokens``: the routed experts run all ``T`` tokens of a rank whatever ``etp`` (the old pricing);
* ``DeepEP rank dedup``: DeepEP deduplicates per scale-up domain only (a plain all-to-all inside one);
* ``imbalance on a2a``: the load imbalance scales the expert GEMMs only, not the dispatch / combine;
* ``imbalance 2.1``: ``moe_load_imbalance`` 1.25 (the former placeholder);
* ``forced / padded balance``: every dropless-or-not row gets the imbalance (no ``moe_force_balance``);
* ``Megatron-FSDP zero-copy``: Megatron-FSDP priced with FSDP1's flat-buffer passes;
* ``Megatron-FSDP bf16 grads``: gradients reduced in fp32 on the Megatron-FSDP row;
* ``Zoo forced (inferred)``: the five Model Zoo rows (437-441) routed dropless, as the table alone would be
  read (their forced routing is inferred from the Zoo's example script for the table's layouts);
* ``439-441 forced (inferred)``: only the three intra-node rows routed dropless (the reading before the
  example script was found: 437/438 forced from their later best-practice script, 439-441 dropless);
* ``per-expert launches``: the host floor counts the grouped MLP as one kernel per GEMM whatever the local
  experts (the count before compute.yaml ``moe_expert_launches``: 2 forward, 4 backward per MoE layer);
* ``MoE-layer TP over etp``: a MoE layer pays a dense layer's TP traffic (the MLP block's all-gather and
  reduce-scatter over TP, as before workload/traffic.py ``tp_moe``), whatever the expert TP.

Run: ``PYTHONPATH=src python benchmarks/moe_terms.py`` (about a minute).
"""

from __future__ import annotations

import contextlib
import dataclasses
from unittest import mock

import numpy as np

MOE_ROWS = ("412", "413", "420", "421", "425", "434", "437", "438", "439", "440", "441")
ZOO_ROWS = ("437", "438", "439", "440", "441")


def _figures(cases, params=None):
    from tierwise.validate.run import predict, summarize

    pred, _ = predict(cases, params)
    meas = np.array([c.measured_tokens_per_s_per_gpu for c in cases])
    err = (pred - meas) / meas * 100
    s = summarize(cases, err)
    rows = {c.row_id: e for c, e in zip(cases, err, strict=True) if c.row_id in MOE_ROWS}
    return s, rows


def _replace_plans(cases, which, **changes):
    out = []
    for c in cases:
        if which(c):
            c = dataclasses.replace(c, plan=c.plan.replace(**changes))
        out.append(c)
    return out


def main() -> None:
    import tierwise.estimate.step as st
    from tierwise.specs.plan import ZERO3_GATHER
    from tierwise.validate.run import load_cases

    cases = load_cases()
    real_dedup, real_copy = st._deepep_node_dedup, st._shard_copy_bytes

    def domain_only(model, plans, span):
        doms = np.asarray(span.num_domains, dtype=float)
        return np.where(doms > 1, real_dedup(model, plans, span), 1.0)

    def no_force(plans, cparams):
        return np.where(plans.ep <= 1, 1.0, float(cparams.get("moe_load_imbalance", 1.0)))

    def flat_for_zero_copy(mode, wb, gb, regather):
        mode = np.where(np.asarray(mode) == ZERO3_GATHER.index("zero-copy"), ZERO3_GATHER.index("flat"), mode)
        return real_copy(mode, wb, gb, regather)

    real_comm = st._layer_comm
    real_kernels = st._dispatcher_kernels

    def gemm_kernels_fixed(plans):
        kf, kb = real_kernels(plans)
        return kf + 2.0, kb + 4.0

    @contextlib.contextmanager
    def one_launch_per_gemm():
        with (mock.patch.object(st, "moe_expert_launches", lambda: (0, 0)),
              mock.patch.object(st, "_dispatcher_kernels", gemm_kernels_fixed)):
            yield

    def comm_dense_tp(*args, **kwargs):
        x = real_comm(*args, **kwargs)
        return dataclasses.replace(x, tp_moe_layer_t=x.tp_layer_t, tp_moe_layer_bytes=x.tp_layer_bytes,
                                   tp_moe_layer_exposed=x.tp_layer_exposed)

    def comm_without_imbalance(*args, **kwargs):
        # the all-to-all priced at the mean load; the GEMMs (priced before, in _layer_compute) keep it
        with mock.patch.object(st, "moe_imbalance", lambda plans, cparams: np.ones(len(plans))):
            return real_comm(*args, **kwargs)

    variants = [
        ("none (all terms on)", contextlib.nullcontext(), cases, None),
        ("expert tokens", mock.patch.object(st, "expert_tokens_per_rank", lambda plans, tokens: tokens), cases, None),
        ("DeepEP rank dedup", mock.patch.object(st, "_deepep_node_dedup", domain_only), cases, None),
        ("imbalance on a2a", mock.patch.object(st, "_layer_comm", comm_without_imbalance), cases, None),
        ("imbalance 2.1 (-> 1.25)", contextlib.nullcontext(), cases, {"moe_load_imbalance": 1.25}),
        ("forced / padded balance", mock.patch.object(st, "moe_imbalance", no_force), cases, None),
        ("Megatron-FSDP zero-copy", mock.patch.object(st, "_shard_copy_bytes", flat_for_zero_copy), cases, None),
        ("Megatron-FSDP bf16 grads", contextlib.nullcontext(),
         _replace_plans(cases, lambda c: c.row_id == "439", grad_reduce_dtype="fp32"), None),
        ("Zoo forced (inferred)", contextlib.nullcontext(),
         _replace_plans(cases, lambda c: c.row_id in ZOO_ROWS, moe_force_balance=False), None),
        ("439-441 forced (inferred)", contextlib.nullcontext(),
         _replace_plans(cases, lambda c: c.row_id in ZOO_ROWS[2:], moe_force_balance=False), None),
        ("per-expert launches", one_launch_per_gemm(), cases, None),
        ("MoE-layer TP over etp", mock.patch.object(st, "_layer_comm", comm_dense_tp), cases, None),
    ]
    print("| term switched off | median of source medians | median | p90 | max | " + " | ".join(MOE_ROWS) + " |")
    print("|---" * (5 + len(MOE_ROWS)) + "|")
    for name, patch, cs, params in variants:
        with patch:
            s, rows = _figures(cs, params)
        o = s["overall"]
        print(f"| {name} | {s['median_of_source_medians']:.1f} | {o['median']:.1f} | {o['p90']:.1f} | {o['max']:.1f} | "
              + " | ".join(f"{rows[r]:+.1f}" for r in MOE_ROWS) + " |")


if __name__ == "__main__":
    main()
