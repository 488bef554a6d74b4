"""``tierwise validate --serving``: the serving model against the shipped serving set (inference-runs.csv).

Each row is mapped to a deployment and a scenario by its own columns (model, hardware, TP, precision,
lengths, scenario, metric) and the conventions of inference-notes.md: MLPerf counts output tokens only, its
Server runs must meet p99 TTFT / TPOT bounds, TensorRT-LLM's perf overview is offline and reports the TP
group's total output throughput. Anything a row does not say and the mapping fills (a dataset's mean prompt,
a TP degree) is listed in that row's ``filled``. No row or source has a correction factor of its own.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from importlib import resources
from pathlib import Path

import numpy as np

from tierwise.errors import SpecError
from tierwise.files import read_user_text
from tierwise.serve.api import ServeConfig, estimate_serving
from tierwise.serve.params import ServingParameters, serving_parameters
from tierwise.serve.transfer import kv_transfer_time
from tierwise.specs.cluster import load_cluster
from tierwise.specs.engine import engine_for_software, engine_spec

SMALL_BATCH_ROWS = ("118", "125", "126", "127", "128", "129", "130", "131", "132", "133", "134", "143")
"""The serving set's batch-1 and small-batch rows (batch <= 64: decode TPOT, prefill time = TTFT, batch-1 output
tokens/s), the engine model's target (issue 31: median within 15%, with the engine each row ran and with the
default)."""

__all__ = ["SMALL_BATCH_ROWS", "default_serving_dataset", "load_serving_rows", "serving_validation_document", "THROUGHPUT_METRICS"]

THROUGHPUT_METRICS = ("output_tokens_per_s_total", "samples_per_s")
_REQUIRED = ("row_id", "source_id", "model", "hardware", "num_gpus", "tp", "precision", "scenario",
             "batch_or_concurrency", "input_len", "output_len", "metric", "value", "confidence", "software")

_MODELS = (("llama-2-70b", "llama2-70b"), ("llama-3.3-70b", "llama3.1-70b"), ("llama-3.1-70b", "llama3.1-70b"),
           ("llama-3-70b", "llama3.1-70b"), ("deepseek-r1-distill-llama-70b", "llama3.1-70b"),
           ("llama-3.1-405b", "llama3.1-405b"), ("llama-3.1-8b", "llama3.1-8b"), ("llama-3-8b", "llama3.1-8b"),
           ("mixtral-8x7b", "mixtral-8x7b"), ("gpt-j-6b", "gpt-j-6b"), ("bloom-176b", "bloom-176b"))
_HARDWARE = (("gb200", "gb200-nvl72"), ("b200", "dgx-b200"), ("h200", "hgx-h200"), ("h100", "dgx-h100"),
             ("mi300x", "mi300x-8"), ("a100", "dgx-a100"))
DATASET_PROMPT_TOKENS = {
    "cnn/dailymail": (781, "CNN/DailyMail articles average 781 tokens (See et al. 2017, 'Get To The Point', ACL, "
                           "sec. 4); word-level tokens, so a lower bound of GPT-J's BPE count (MLPerf wraps the "
                           "article in an Alpaca instruction template and truncates at 1,919 tokens: "
                           "mlcommons/inference language/gpt-j/dataset.py)"),
}
"""Mean prompt of a dataset a row names without lengths, with its source (inference-notes.md)."""
DATASET_PROMPT_DEFAULT = 512
"""Mean prompt assumed where a row gives only a dataset and a maximum and no source gives the dataset's mean
(MLPerf's OpenOrca "<= 1024"): half the maximum; listed in the row's ``filled``."""


def default_serving_dataset() -> Path:
    """The shipped copy of inference-runs.csv."""
    return Path(str(resources.files("tierwise").joinpath("data", "inference-runs.csv")))


def load_serving_rows(path: str | Path | None = None) -> list[dict[str, str]]:
    """Rows of a serving CSV (the columns of inference-runs.csv) as dicts of stripped strings."""
    p = Path(path) if path is not None else default_serving_dataset()
    text = read_user_text(p, what="serving dataset", error=SpecError)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        rows = [{k: (v or "").strip() for k, v in r.items() if k is not None} for r in reader]
    except csv.Error as exc:
        raise SpecError(f"serving dataset {str(p)!r} is not a readable CSV ({exc}); fix the quoting") from None
    missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise SpecError(f"serving dataset {str(p)!r} lacks column(s) {', '.join(missing)}; use the columns of "
                        "inference-runs.csv")
    if not rows:
        raise SpecError(f"serving dataset {str(p)!r} has a header but no rows")
    return rows


def _lookup(text: str, table) -> str | None:
    low = text.lower()
    for key, name in table:
        if key in low:
            return name
    return None


def _int(text: str) -> int | None:
    m = re.match(r"\s*~?\s*(\d[\d,]*)", text)
    return int(m.group(1).replace(",", "")) if m else None


def _precision(text: str) -> str | None:
    t = text.lower()
    for key, p in (("fp4", "fp4"), ("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "bf16")):
        if key in t:
            return p
    return None


def _case(row: dict[str, str], engine: str | None = None):
    """(keyword arguments for one evaluation, what the mapping filled) or (None, reason): the deployment
    (:func:`_deployment_kw`), the lengths (:func:`_lengths`), the scenario and the engine's settings
    (:func:`_engine_kw`)."""
    filled: list[str] = []
    kw, why = _deployment_kw(row, filled)
    if kw is None:
        return None, why
    in_len, out_len = _lengths(row, filled)
    if out_len is None:
        return None, "no output length"
    kw.update(input_len=in_len, output_len=out_len, scenario="offline", batching="inflight", kv_reservation="paged",
              batch=0, beams=4 if row["model"].lower().startswith("gpt-j") else 1)
    scen = row["scenario"].lower()
    if "server" in scen and "mlperf" in scen:
        kw["scenario"] = "server"
        if "end-to-end" in row["latency_constraint"]:
            kw["tpot_slo"] = 20.0 / out_len
            filled.append("p99 end-to-end 20 s read as TPOT <= 20 s / output tokens")
        else:
            kw["ttft_slo"], kw["tpot_slo"] = 2.0, 0.2
    _engine_kw(row, kw, filled, engine)
    if "static batch" in scen or "isolated phase" in scen or "light load" in scen:
        kw["batching"] = "static"
        kw["batch"] = _int(row["batch_or_concurrency"]) or 1
        if not _int(row["batch_or_concurrency"]):
            filled.append(f"batch 1 ({row['batch_or_concurrency'] or 'no batch given'!r})")
    return kw, filled


def _deployment_kw(row: dict[str, str], filled: list[str]):
    """(model, cluster, precision, GPUs and TP of a row as keyword arguments, None) or (None, why not)."""
    model = _lookup(row["model"], _MODELS)
    if model is None:
        return None, f"model {row['model'][:40]!r} is not in the catalog"
    cluster = _lookup(row["hardware"], _HARDWARE)
    if cluster is None:
        return None, f"hardware {row['hardware'][:40]!r} is not in the catalog"
    precision = _precision(row["precision"])
    if precision is None:
        return None, f"precision {row['precision']!r} is not modelled"
    tp = _int(row["tp"])
    if tp is None:
        tp = 1
        filled.append("tp=1 (one replica per GPU; the source gives no TP)")
    return dict(model=model, cluster=cluster, precision=precision, num_gpus=_int(row["num_gpus"]) or 1, tp=tp), None


def _lengths(row: dict[str, str], filled: list[str]) -> tuple[int, int | None]:
    """(prompt tokens, output tokens or None) of a row, what the sources say where the row gives none."""
    out_len = _int(row["output_len"])
    if row["model"].lower().startswith("gpt-j"):
        out_len = 69
        filled.append("output 69 tokens (MLPerf v4.1 GPT-J log: 69 tokens per sample)")
        filled.append("beam search, 4 beams (MLPerf GPT-J rule: mlcommons/inference language/gpt-j, 'only beam_size 4 "
                      "is allowed for official submission')")
    raw_in = row["input_len"]
    in_len = _int(raw_in) if re.fullmatch(r"~?\s*[\d,]+(\s*avg)?", raw_in) else None
    if in_len is None:
        known = [v for k, v in DATASET_PROMPT_TOKENS.items() if k in raw_in.lower()]
        if known:
            in_len = known[0][0]
            filled.append(f"input {in_len} tokens ({known[0][1]})")
        else:
            in_len = DATASET_PROMPT_DEFAULT
            filled.append(f"input {in_len} tokens (dataset {raw_in[:30]!r}: no source gives its mean; half the "
                          "maximum)")
    if out_len is None and row["metric"].startswith("TPOT"):
        out_len = 128
        filled.append("output 128 tokens (a decode-step figure; the source gives no lengths)")
    return in_len, out_len


def _engine_kw(row: dict[str, str], kw: dict, filled: list[str], engine: str | None) -> None:
    """The engine a row ran (or ``engine``) and its defaults a row relies on (KV cache sizing and reservation,
    vLLM's attention kernel, KV precision and sequence cap), into ``kw``."""
    soft, scen = row["software"].lower(), row["scenario"].lower()
    if engine is None:
        engine = engine_for_software(row["software"])
        if engine is not None:
            filled.append(f"engine {engine} (software {row['software'][:40]!r}; specs/engine.py)")
    if engine not in (None, "default"):
        kw["engine"] = engine
    if "tensorrt-llm" in soft or "trtllm" in scen:
        # TensorRT-LLM sizes the cache as a fraction of the memory the engine leaves free
        kw["kv_cache_of"] = "free"
        frac = re.search(r"kv_cache_free_gpu_mem_fraction (?:up to )?([0-9.]+)", row.get("notes", ""))
        if frac:
            kw["kv_cache_fraction"] = float(frac.group(1))
        else:
            filled.append("KV cache 0.9 of the memory left after weights and activations (TensorRT-LLM "
                          "kv_cache_free_gpu_mem_fraction default)")
    if "trtllm-bench" in scen or "tensorrt-llm (aug 2024)" in soft:
        kw["kv_reservation"] = "full"
        filled.append("KV reserved for input + output on admission (TensorRT-LLM GUARANTEED_NO_EVICT default)")
    if "vllm" in soft:
        kw["attention_kernel"] = "flash2"
        filled.append("FlashAttention-2 attention (vLLM's FLASH_ATTN backend, vllm-flash-attn, through v0.6)")
    if "vllm" in soft and "mlperf" not in scen and "vllm-based" not in soft:
        # vLLM's engine defaults: kv_cache_dtype "auto" (the model's dtype, 16-bit) and max_num_seqs 256
        kw["kv_precision"], kw["max_batch"] = "bf16", 256
        filled.append("vLLM defaults: 16-bit KV cache (kv_cache_dtype auto), max_num_seqs 256")


def _predict(kw: dict, metric: str, params: ServingParameters):

    keys = ("model", "cluster", "precision", "num_gpus", "tp", "input_len", "output_len", "scenario", "batching",
            "kv_reservation", "batch", "ttft_slo", "tpot_slo", "kv_precision", "max_batch", "beams",
            "kv_cache_fraction", "kv_cache_of", "attention_kernel", "engine")
    est = estimate_serving(ServeConfig(**{k: kw[k] for k in keys if k in kw}), params=params)
    if metric == "output_tokens_per_s_total":
        return float(est.results.output_tokens_per_s)
    if metric == "samples_per_s":
        return float(est.results.output_tokens_per_s) / kw["output_len"]
    if metric in ("TPOT_mean_ms", "TPOT_ms", "TPOT_p50_ms"):
        return float(est.results.tpot_s) * 1e3
    if metric == "prefill_time_ms":
        return float(est.prefill.total_s) * 1e3
    return None


def _transfer_row(row: dict[str, str], params):
    """Mooncake's transfer-engine rows: 40 GB between two nodes of ``n x rate`` RoCE NICs (8 GPUs each)."""

    m = re.search(r"(\d+)x(\d+)\s*gbps", row["hardware"].lower())
    if not m:
        return None, "no NIC count and rate in the hardware column"
    nics, gbps = int(m.group(1)), int(m.group(2))
    cluster = load_cluster({"base": "dgx-h100", "nics_per_node": nics, "nic_bandwidth": f"{gbps} Gb/s"},
                           params.parameters)
    total = 131072 * 327680.0
    per_gpu = total / cluster.gpus_per_node
    rdma = total / float(kv_transfer_time(cluster, "scale_out", per_gpu, params)) / 1e9
    if row["metric"] == "kv_transfer_bandwidth":
        return rdma, None
    tcp = total / float(kv_transfer_time(cluster, "tcp", per_gpu, params)) / 1e9
    return rdma / tcp, None


def _row_record(row: dict[str, str], params, engine: str | None = None) -> dict:
    rec = {"row_id": row["row_id"], "source_id": row["source_id"], "model": row["model"].split(" (")[0],
           "hardware": row["hardware"].split(" (")[0], "num_gpus": row["num_gpus"], "tp": row["tp"],
           "scenario": row["scenario"], "metric": row["metric"], "confidence": row["confidence"],
           "measured": float(row["value"]), "predicted": None, "error_pct": None, "filled": [], "skipped": None,
           "scored": row["confidence"] in ("high", "med", "medium"),
           "throughput_row": row["metric"] in THROUGHPUT_METRICS}
    metric = row["metric"]
    if metric in ("kv_transfer_bandwidth", "rdma_vs_tcp_bandwidth_ratio"):
        pred, why = _transfer_row(row, params)
        if metric == "rdma_vs_tcp_bandwidth_ratio":
            rec["filled"].append("not scored: the TCP rate parameter is taken from this row")
            rec["scored"] = False
    elif metric in THROUGHPUT_METRICS + ("TPOT_mean_ms", "TPOT_ms", "TPOT_p50_ms", "prefill_time_ms"):
        kw, filled = _case(row, engine)
        if kw is None:
            rec["skipped"] = filled
            return rec
        rec["filled"] = filled
        rec["plan"] = (f"tp {kw['tp']} x {kw['num_gpus'] // kw['tp']}, {kw['precision']}, {kw['input_len']}/"
                       f"{kw['output_len']}, {kw['scenario']}, {kw['batching']}"
                       + (f" batch {kw['batch']}" if kw["batch"] else "")
                       + (f", KV cache {kw.get('kv_cache_fraction', 0.9)} of free HBM"
                          if kw.get("kv_cache_of") == "free" else ""))
        pred, why = _predict(kw, metric, params), None
    else:
        rec["skipped"] = f"metric {metric!r} (a ratio between two deployments or a routing policy) is not modelled"
        return rec
    if pred is None:
        rec["skipped"] = why or f"metric {metric!r} not modelled"
        return rec
    rec["predicted"] = float(pred)
    rec["error_pct"] = (float(pred) - rec["measured"]) / rec["measured"] * 100.0
    return rec


def _stats(errors: list[float]) -> dict:
    a = np.abs(np.asarray(errors, dtype=float))
    if a.size == 0:
        return {"rows": 0, "median": None, "mean": None, "p90": None, "max": None, "signed_median": None}
    return {"rows": int(a.size), "median": float(np.median(a)), "mean": float(a.mean()),
            "p90": float(np.percentile(a, 90)), "max": float(a.max()),
            "signed_median": float(statistics.median(errors))}


def serving_validation_document(path: str | Path | None = None, *, source: str | None = None,
                                engine: str | None = None, params: ServingParameters | None = None) -> dict:
    """The ``tierwise validate --serving --json`` document: every row, then the summaries (throughput rows,
    latency rows, per source) over scored rows (high and medium confidence). ``engine``: every row on that engine
    (``default``: the tool's default engine, as for a deployment that states none) instead of the engine its
    software column names (:func:`tierwise.specs.engine.engine_for_software`). ``params``: the serving values to
    price under (``tools/fit_serving.py`` passes each grid point's); None: :func:`serving_parameters`."""

    rows = load_serving_rows(path)
    if source is not None:
        known = sorted({r["source_id"] for r in rows})
        if source not in known:
            raise SpecError(f"--source {source!r} is not in the serving set; use one of {', '.join(known)}")
        rows = [r for r in rows if r["source_id"] == source]
    if engine not in (None, "default"):
        engine_spec(engine)  # one line listing the known engines when unknown
    p = params if params is not None else serving_parameters()  # the command's entry point: loaded once
    records = [_row_record(r, p, engine) for r in rows]
    used = [r for r in records if r["error_pct"] is not None and r["scored"]]
    per_source = {}
    for sid in sorted({r["source_id"] for r in records}):
        sel = [r["error_pct"] for r in used if r["source_id"] == sid]
        per_source[sid] = {**_stats(sel), "skipped": sum(1 for r in records if r["source_id"] == sid
                                                          and r["skipped"])}
    return {
        "dataset": str(path or default_serving_dataset()),
        "parameters": {k: (getattr(p, k).label if k == "engine" else getattr(p, k)) for k in p.__dataclass_fields__
                       if k != "parameters"},
        "engine": engine or "per row (software column)",
        "summary": {
            "small_batch_latency": _stats([r["error_pct"] for r in used if r["row_id"] in SMALL_BATCH_ROWS]),
            "throughput": _stats([r["error_pct"] for r in used if r["throughput_row"]]),
            "latency": _stats([r["error_pct"] for r in used if not r["throughput_row"]]),
            "per_source": per_source,
            "rows": len(records), "used": len(used),
            "skipped": [{"row_id": r["row_id"], "source_id": r["source_id"], "reason": r["skipped"]}
                        for r in records if r["skipped"]],
        },
        "rows": records,
    }
