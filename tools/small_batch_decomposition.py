"""Where the predicted step of each small-batch serving row goes: GPU kernels, collectives, kernel gaps, host.

For the twelve batch-1 and small-batch rows of the serving set (``tierwise.serve.validate.SMALL_BATCH_ROWS``),
prints per row the weight-read roofline at the datasheet HBM rate, the priced weight GEMMs, attention,
elementwise kernels, LM head, collectives, the GPU idle between kernels and the engine's exposed host time (ms),
then the prediction's error with that engine and with no host time at all (the GPU side alone: no engine can
be faster than that). ``python tools/small_batch_decomposition.py [ENGINE|default]`` (no argument: the engine
each row's software column names). docs/serving.md, "The engine as a part", reads this table.
"""

from __future__ import annotations

import sys

import numpy as np

from tierwise.pricing.engine import DENSE_LAYER_KERNELS
from tierwise.pricing.kernels import attention_time, elementwise_time, gemm_peak, layer_gemms, lm_head_time
from tierwise.serve import phases as P
from tierwise.serve import validate as V
from tierwise.serve.api import ServeConfig, _resolve
from tierwise.serve.engine import evaluate
from tierwise.serve.kv import kv_fraction_per_gpu, shape_of, weight_bytes_read_per_step
from tierwise.workload.flops import decode_attention_flops_per_token
from tierwise.workload.kernels import elementwise_bytes

KEYS = ("model", "cluster", "precision", "num_gpus", "tp", "input_len", "output_len", "scenario", "batching",
        "kv_reservation", "batch", "ttft_slo", "tpot_slo", "kv_precision", "max_batch", "beams",
        "kv_cache_fraction", "kv_cache_of", "attention_kernel", "engine")
HEAD = (f"{'row':>4} {'metric':10} {'B':>3} {'meas':>7} | {'Wroof':>6} {'gemm':>6} {'attn':>5} {'elem':>4} "
        f"{'head':>4} {'comm':>5} {'gaps':>5} {'host':>5} | {'pred':>6} {'err%':>6} {'GPU-only%':>9}  engine")


def decode_parts(w, d, batch: float) -> dict[str, float]:
    """Milliseconds of each part of one decode step of ``batch`` sequences (phases.decode_step_time's terms)."""
    m, p = w.model, w.params
    tp, ep = int(d.decode_tp[0]), int(d.decode_ep[0])
    rates, shape = P.serving_rates(w.cluster, p), shape_of(m)
    work = P.layer_work(m, rates, w.precision, p, tp=tp, ep=ep, tokens=batch, seq=1.0)
    ctx, L = w.mean_context, m.num_layers
    kv_layer = batch * ctx * w.kv_bytes_per_token * kv_fraction_per_gpu(m, work.tp) / L
    dec_f = decode_attention_flops_per_token(m, shape, ctx) * batch / work.tp
    att, _ = attention_time(dec_f, shape, rates, seq_len=ctx, eff=work.attention_eff,
                            overlap=work.attention_overlap, kv_bytes=kv_layer)
    eb = elementwise_bytes(m, shape, rates.params, tokens=work.tokens, tp=work.tp, etp=work.etp,
                           seq_shard=work.seq_shard, expert_tokens=work.expert_tokens, fp8=work.cast_inputs,
                           fused=work.fused_elementwise)
    step = P.decode_step_time(w.setup, tp, ep, batch, ctx)
    gaps = L * (DENSE_LAYER_KERNELS + 2 * (tp > 1)) * p.kernel_gap_s
    parts = {"Wroof": weight_bytes_read_per_step(m, w.precision, work.tp, work.ep, batch, 0) / rates.hbm,
             "gemm": layer_gemms(m, shape, rates, work, False)[0] * L, "attn": att * L,
             "elem": elementwise_time(eb.dense, rates) * L,
             "head": lm_head_time(m, rates, tokens=batch, tp=work.tp, peak=gemm_peak(rates, work.fp8, work.fp4)[0]),
             "comm": step.comm_s, "gaps": gaps, "host": step.overhead_s - gaps, "total": step.total_s}
    return {k: float(np.asarray(v)) * 1e3 for k, v in parts.items()}


def row_line(row: dict, engine: str | None) -> str:
    kw, _ = V._case(row, engine)
    w, d, _ = _resolve(ServeConfig(**{k: kw[k] for k in KEYS if k in kw}))
    r = evaluate(w, d).at(0).columns()
    meas = float(row["value"])
    if row["metric"] == "prefill_time_ms":
        pf = P.prefill_time(w.setup, int(d.prefill_tp[0]), int(d.prefill_ep[0]), w.input_len)
        tot, host = float(pf.total_s) * 1e3, float(pf.host_s) * 1e3
        return (f"{row['row_id']:>4} {'prefill':10} {1:3d} {meas:7.1f} | {'':>6} {float(pf.layers_s) * 1e3:6.1f} "
                f"{'':>5} {'':>4} {float(pf.head_s) * 1e3:4.1f} {float(pf.comm_s) * 1e3:5.1f} {'(in host)':>11}"
                f" {host:5.2f}... | {tot:6.1f} {(tot - meas) / meas * 100:+6.1f} {(tot - host - meas) / meas * 100:+9.1f}"
                f"  {w.params.engine.label}")
    batch = float(r["batch"]) * w.beams
    q = decode_parts(w, d, batch)
    gpu = q["total"] - q["host"]
    if row["metric"].startswith("TPOT"):
        pred, err, gpu_err = float(r["tpot_s"]) * 1e3, None, (gpu - meas) / meas * 100
    else:  # batch-1 output tokens/s: a step's share of the request's time sets it
        pred = float(r["output_tokens_per_s"])
        gpu_err = (pred * q["total"] / gpu - meas) / meas * 100
    err = (pred - meas) / meas * 100
    cells = " ".join(f"{q[k]:{n}.{p}f}" for k, n, p in (("Wroof", 6, 1), ("gemm", 6, 1), ("attn", 5, 1),
                                                        ("elem", 4, 1), ("head", 4, 1), ("comm", 5, 1),
                                                        ("gaps", 5, 2), ("host", 5, 2)))
    return (f"{row['row_id']:>4} {row['metric'][:10]:10} {batch:3.0f} {meas:7.1f} | {cells} | {pred:6.1f} {err:+6.1f} "
            f"{gpu_err:+9.1f}  {w.params.engine.label}")


def main() -> None:
    engine = sys.argv[1] if len(sys.argv) > 1 else None
    rows = {r["row_id"]: r for r in V.load_serving_rows()}
    print(HEAD)
    for rid in V.SMALL_BATCH_ROWS:
        print(row_line(rows[rid], engine))


if __name__ == "__main__":
    main()
