"""One calibration row -> one validation case: model, cluster, plan, and the measured tokens/s per GPU.

Nothing is guessed silently. Every field filled from a documented framework default is listed in the case's
``filled``; a row whose configuration cannot be completed (or whose metric is only given under an unpinned
FLOP rule) is skipped with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tierwise.errors import SpecError, TierwiseError
from tierwise.estimate.scenario import infer_settings
from tierwise.limits import MAX_BATCH, MAX_DIM, MAX_GPUS, MAX_LAYERS, MAX_SEQ, check_float, check_int
from tierwise.specs import catalog
from tierwise.specs.cluster import Cluster, load_cluster
from tierwise.specs.framework import framework_for_text
from tierwise.specs.model import ModelSpec, load_model, model_from_mapping
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import Plan, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.validate import rules

__all__ = ["Case", "case_from_row", "GRAND_TETON_H100_96GB", "cluster_for_row", "borrow_parallelism",
           "stack_for_row"]

GRAND_TETON_H100_96GB = {
    "name": "grand-teton-h100-96gb",
    "display_name": "Meta Grand Teton (8x H100 96GB HBM2e at 500 W, NVSwitch, 400 Gb/s RDMA per GPU)",
    "base": "hgx-h100-roce",
    "accelerator": {
        "base": "h100-sxm",
        "display_name": "NVIDIA H100 96GB HBM2e (500 W)",
        "hbm_capacity": "96 GiB",
        "hbm_type": "HBM2e",
        "hbm_bandwidth": "2.4 TB/s",
        "power_w": 500,
        "source": "torchtitan benchmarks/llama3_h100_202412_torchtitan.md: 'H100 GPUs with 96GB HBM2e at 500W'",
        "notes": (
            "HBM bandwidth is not published for this part: 6 HBM2e stacks (96 GB) at the H100 PCIe's 0.4 TB/s "
            "per stack (2.0 TB/s over 5 stacks) = 2.4 TB/s. Dense peak kept at the H100 SXM's 989 (same "
            "die); the 500 W cap lowers sustained clocks, which the model does not see."
        ),
    },
    "source": "torchtitan benchmark (Meta Grand Teton: 8 GPUs per host, NVLink 4 switch, 400 Gb/s RDMA per GPU)",
}
"""torchtitan's H100 variant: an honest cluster with its own figures (not the 80 GB HBM3 dgx-h100)."""


@dataclass
class Case:
    """One row of the dataset, mapped (or skipped with ``skip``)."""

    row_id: str
    source_id: str
    model_label: str
    hardware: str
    num_gpus: int
    confidence: str
    rule: rules.Rule
    metric: str = ""
    """Which published figure the measured tokens/s/GPU came from, and how."""
    measured_tokens_per_s_per_gpu: float = float("nan")
    model: ModelSpec | None = None
    model_source: str = ""
    cluster: Cluster | None = None
    plan: Plan | None = None
    filled: list[str] = field(default_factory=list)
    skip: str = ""
    stack: str = ""
    """Software stack: framework and era (:func:`stack_for_row`)."""
    generation: str = ""
    """Accelerator generation of the row's hardware (``ampere``, ``hopper``, ...; "" when unmapped)."""

    @property
    def group(self) -> str:
        """The leave-one-(hardware x stack)-out group: ``generation/stack``."""
        return f"{self.generation or 'unmapped'}/{self.stack}"

    @property
    def used(self) -> bool:
        return not self.skip


def _int(row: dict[str, str], key: str) -> int | None:
    text = row.get(key, "")
    m = re.fullmatch(r"\s*(\d+)\s*", text)
    return int(m.group(1)) if m else None


def _float(row: dict[str, str], key: str) -> float | None:
    try:
        return float(row.get(key, ""))
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------ clusters


_CLUSTERS: dict[tuple[str, str], Cluster] = {}
"""Loaded clusters by (key, the parameters' fingerprint): each loaded once per record."""


def _cluster(key: str, parameters: Parameters) -> Cluster:
    slot = (key, parameters.fingerprint)
    if slot not in _CLUSTERS:
        ref = GRAND_TETON_H100_96GB if key == GRAND_TETON_H100_96GB["name"] else key
        _CLUSTERS[slot] = load_cluster(ref, parameters=parameters)
    return _CLUSTERS[slot]


def cluster_for_row(row: dict[str, str]) -> tuple[str, str]:
    """(cluster key, note) for a row's ``hardware_id`` / ``system`` / ``inter_node_network``; "" if unknown.

    Selene = DGX A100 (8 x 200 Gb/s HDR per node); the H100 systems of Megatron/NeMo/llm-foundry are taken as
    DGX H100 (8 x 400 Gb/s NDR); torchtitan's 96 GB HBM2e, 500 W part is its own variant.
    """
    hw = row["hardware_id"].lower()
    if "h100" in hw and ("96gb" in hw or "hbm2e" in hw):
        return GRAND_TETON_H100_96GB["name"], "H100 96GB HBM2e 500 W variant (HBM 2.4 TB/s derived, see notes)"
    if hw.startswith("a100_sxm_80gb") or hw.startswith("a100-sxm-80gb"):
        return "dgx-a100", ""
    if hw.startswith("h100_sxm") or hw.startswith("h100-sxm"):
        note = "" if "dgx" in row["system"].lower() else "system not named: taken as DGX H100 (8 x 400 Gb/s)"
        return "dgx-h100", note
    for key in catalog.names("clusters"):  # a user's CSV may name a catalog cluster directly
        if hw == key:
            return key, ""
    return "", ""


# ------------------------------------------------------------------------------------------------ models

_ARCH_KEYS = ("num_layers", "hidden_size", "num_attention_heads")


def _moe_from_row(row: dict[str, str], filled: list[str]) -> dict | None:
    """The row's MoE block (:class:`tierwise.specs.model.MoESpec` keys), or None for a dense row.

    ``moe_shared_experts`` counts shared experts in units of the routed expert's width unless the row's
    ``arch_notes`` name one shared expert's width ("shared expert of width N"): Qwen1.5-MoE's config has one
    gated shared expert of ``shared_expert_intermediate_size`` 5632 = 4 x 1408, which the row writes as 4."""
    experts = _int(row, "moe_num_experts")
    if not experts:
        return None
    top_k, width = _int(row, "moe_top_k"), _int(row, "moe_ffn_hidden_size")
    if not top_k or not width:
        raise _Skip("MoE row without moe_top_k or moe_ffn_hidden_size")
    moe: dict[str, int] = {"num_experts": experts, "top_k": top_k, "ffn_hidden_size": width}
    shared = _int(row, "moe_shared_experts") or 0
    m = re.search(r"shared expert of width (\d+)", row["arch_notes"])
    if shared and m:
        moe.update(shared_experts=1, shared_ffn_hidden_size=int(m.group(1)))
        filled.append(f"one shared expert of width {m.group(1)} (arch_notes; the row's {shared} is in routed-expert "
                      "widths)")
    elif shared:
        moe.update(shared_experts=shared, shared_ffn_hidden_size=width)
    return moe


def _catalog_match(row: dict[str, str]) -> str:
    """A catalog model whose dimensions equal the row's (every dimension the row gives), or "".

    A MoE row matches a catalog MoE model by its experts (count, top-k, expert width, shared experts) and its
    attention and embedding dimensions; its ``ffn_hidden_size`` column may be the expert width (Qwen3 rows)
    while the catalog keeps the config's unused dense width, so it is not compared."""
    moe = _moe_from_row(row, []) if row["moe_num_experts"] else None
    want = {k: _int(row, k) for k in ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
                                       "num_kv_heads", "vocab_size")}
    if moe:
        want.pop("ffn_hidden_size")
    name = row["model_name"].lower().replace("-", "")
    for key, entry in catalog.entries("models").items():
        if bool(entry.get("moe")) != bool(moe):
            continue
        if moe:
            em = entry["moe"]
            have_moe = (em["num_experts"], em["top_k"], em["ffn_hidden_size"], em.get("shared_experts", 0))
            if have_moe != (moe["num_experts"], moe["top_k"], moe["ffn_hidden_size"], moe.get("shared_experts", 0)) \
                    or em.get("first_dense_layers", 0) or em.get("layer_freq", 1) != 1:
                continue
        have = {
            "num_layers": entry["num_layers"], "hidden_size": entry["hidden_size"],
            "num_attention_heads": entry["num_attention_heads"], "ffn_hidden_size": entry.get("ffn_hidden_size"),
            "num_kv_heads": entry.get("num_kv_heads") or entry["num_attention_heads"],
            "vocab_size": entry["vocab_size"],
        }
        family = key.split("-")[0].rstrip("0123456789.")
        if all(v is None or have[k] == v for k, v in want.items()) and family in name.replace(" ", ""):
            return key
    return ""


def model_for_row(row: dict[str, str], filled: list[str]) -> tuple[ModelSpec, str]:
    """(model, where it came from): a catalog model when the row's dimensions are one of ours, else inline.

    A row with ``moe_num_experts`` is a MoE model (every layer MoE, the routed experts of the row's
    ``moe_ffn_hidden_size`` and ``moe_top_k``, its shared experts: :func:`_moe_from_row`)."""
    key = _catalog_match(row)
    if key:
        if not row["vocab_size"]:
            filled.append(f"vocab from catalog {key}")
        return load_model(key), f"catalog {key}"
    missing = [k for k in _ARCH_KEYS if _int(row, k) is None]
    if missing:
        raise _Skip(f"architecture incomplete: {', '.join(missing)} not given")
    name = row["model_name"]
    low = (name + " " + row["arch_notes"]).lower()
    h = _int(row, "hidden_size")
    a = _int(row, "num_attention_heads")
    moe = _moe_from_row(row, filled)
    ffn = _int(row, "ffn_hidden_size")
    if ffn is None:
        ffn = 4 * h
        filled.append("ffn=4h (Megatron default ffn_hidden_size)")
    kv = _int(row, "num_kv_heads")
    if kv is None:
        kv = a
        filled.append("kv heads = heads (Megatron default num_query_groups)")
    vocab = _int(row, "vocab_size")
    if vocab is None:
        if "nemotron" in low:
            vocab = 256000
            filled.append("vocab 256000 (Nemotron-4 tokenizer, arXiv:2402.16819 section 2)")
        elif "gpt" in low:
            vocab = 50304
            filled.append("vocab 50304 (GPT-2 BPE 50257 padded to a multiple of 128, Megatron default)")
        else:
            raise _Skip("vocab_size not given and no documented default for this model")
    # SwiGLU: Llama, Mistral/Mixtral and Qwen MLPs (their configs' hidden_act "silu" with gate and up projections)
    gated = any(k in low for k in ("swiglu", "llama", "geglu", "qwen", "mixtral", "mistral"))
    spec = {
        "num_layers": _int(row, "num_layers"), "hidden_size": h, "ffn_hidden_size": ffn,
        "num_attention_heads": a, "num_kv_heads": kv, "vocab_size": vocab, "gated_mlp": gated,
        "tied_embeddings": not gated, "display_name": name, "source": f"training-runs.csv row {row['row_id']}",
        # Megatron's GPT (add_bias_linear and LayerNorm defaults) carries biases; the gated (Llama-style) rows do not
        "bias": "gpt" in low and not gated,
    }
    if moe:
        spec["moe"] = moe
    if _int(row, "head_dim"):
        spec["head_dim"] = _int(row, "head_dim")
    return model_from_mapping({"name": re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-"), **spec},
                              origin=f"row {row['row_id']}"), "inline from row"


class _Skip(Exception):
    """A row that cannot be mapped; the message is the reason shown."""


# ------------------------------------------------------------------------------------------------ plans


def _recompute(row: dict[str, str], filled: list[str]) -> str:
    text = row["activation_recompute"].lower()
    if text.startswith("full"):
        return "full"
    if "--recompute-modules" in text and "core_attn" not in text:
        # Megatron-Core --recompute-modules layernorm / moe_act / mlp...: norms and activation functions are
        # recomputed, not the attention core (selective here means core attention); the model has no
        # recompute of elementwise passes alone, so none (their recompute is a few memory-bound passes)
        filled.append("recompute=none (--recompute-modules recomputes norms and activations only, not core "
                      "attention; their small elementwise recompute is not modelled)")
        return "none"
    if text.startswith("selective"):
        return "selective"
    if text.startswith("none") or text in ("n", "no"):
        return "none"
    if "assumes recompute" in text:
        filled.append("recompute=full (Narayanan 2021 sec. 5: runs use activation recomputation; Eq. 3 counts it)")
        return "full"
    # a published run's configuration that does not list recompute ran the framework's default (Megatron-Core
    # recompute_granularity None, NeMo recipes likewise); the rows record what ran, so the memory model's
    # verdict is reported beside them (row_records: memory_fits), not used to change the plan
    filled.append("recompute=none (not listed by the source: Megatron-Core/NeMo default recompute_granularity "
                  "None)")
    return "none"


def _zero(row: dict[str, str], dp: int, filled: list[str]) -> tuple[int, int]:
    """(zero_stage, dp_shard)."""
    text = row["zero_fsdp"].lower()
    m = re.search(r"shard degree (\d+)", text)
    if m:
        return 3, int(m.group(1))
    if "zero-3" in text or "full_shard" in text or "fully sharded" in text:
        return 3, dp
    if "distributed optimizer" in text:
        return 1, dp
    if text == "none":
        return 0, dp
    if "deepspeed" in row["framework"].lower():
        filled.append("zero_stage=1 (not stated: DeepSpeed ZeRO-1, the optimizer-state partitioning Megatron-DeepSpeed's "
                      "examples configure)")
        return 1, dp
    filled.append("zero_stage=1 (NeMo/Megatron-Core default distributed optimizer)")
    return 1, dp


def _vpp(row: dict[str, str], layers: int, pp: int, filled: list[str]) -> tuple[int, str]:
    text = row["vpp"].lower()
    if text.isdigit():
        return int(text), ""
    if "interleaved" in text and pp > 1:
        per_stage = layers // pp
        k = 2 if layers % pp else next((k for k in range(2, per_stage + 1) if per_stage % k == 0), 1)
        filled.append(f"vpp={k} (interleaved, chunks not stated: the least interleaving that divides the stage)")
        return k, "interleaved"
    if pp > 1:
        filled.append("vpp=1 (1F1B; schedule not stated)" if not text else "vpp=1 (1F1B)")
    return 1, ""


def borrow_parallelism(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rows that do not state TP / PP take them from a row of the same source with the same model dimensions
    that does (a strong-scaling series of the model a weak-scaling table configures), when those degrees
    divide the row's GPU count; the borrowed values and their row are named in ``notes`` and, through
    :func:`plan_for_row`, in the case's ``filled``. Other rows are returned unchanged."""
    dims = ("source_id", "num_layers", "hidden_size", "num_attention_heads")
    out = []
    for row in rows:
        n = _int(row, "num_gpus")
        if _int(row, "tp") is not None and _int(row, "pp") is not None or n is None:
            out.append(row)
            continue
        donor = next((d for d in rows if all(d[k] == row[k] for k in dims) and _int(d, "tp") and _int(d, "pp")
                      and n % (_int(d, "tp") * _int(d, "pp")) == 0), None)
        if donor is None:
            out.append(row)
            continue
        new = dict(row)
        for key in ("tp", "pp", "cp", "vpp", "micro_batch_size", "sequence_parallel", "activation_recompute",
                    "zero_fsdp"):
            if not new.get(key):
                new[key] = donor[key]
        new["_borrowed"] = (f"tp={donor['tp']}, pp={donor['pp']} and the unstated settings from row "
                            f"{donor['row_id']} (same source and model dimensions; this row does not state them)")
        out.append(new)
    return out


def plan_for_row(row: dict[str, str], model: ModelSpec, filled: list[str], generation: str = "") -> Plan:
    """The row's parallel plan, with documented defaults filled (and listed in ``filled``)."""
    n = _int(row, "num_gpus")
    tp, pp = _int(row, "tp"), _int(row, "pp")
    if n is None:
        raise _Skip("num_gpus not given")
    if tp is None or pp is None:
        raise _Skip("TP/PP not stated")
    cp = _int(row, "cp") or 1
    seq = _int(row, "seq_length")
    gbs = _int(row, "global_batch_size")
    if seq is None or gbs is None:
        raise _Skip("seq_length or global_batch_size not given")
    dp = n // (tp * pp * cp)
    if row.get("_borrowed"):
        filled.append(row["_borrowed"])
    framework = row["framework"].lower()
    data: dict[str, object] = {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "global_batch_size": gbs, "seq_length": seq}
    data["micro_batch_size"] = _micro_batch(row, framework, gbs=gbs, dp=dp, pp=pp, filled=filled)
    recompute = _recompute(row, filled)
    if recompute:
        data["recompute"] = recompute
    notes = (row["notes"] + " " + framework).lower()
    _sequence_parallel(row, tp, notes, data, filled)
    zero, shard = _zero(row, dp, filled)
    data["zero_stage"], data["dp_shard"] = zero, shard
    _zero3_gather(row, zero, data, filled)
    data["precision"] = "fp8" if "fp8" in row["precision"].lower() else "bf16"
    if model.moe is not None:
        _moe_settings(row, notes, data, filled)
    vpp, _ = _vpp(row, model.num_layers, pp, filled)
    data["vpp"] = vpp
    _stated_switches(framework, notes, data, filled)
    _stated_kernels(row, generation, data, filled)
    plan = _framework_plan(row, model, data, filled, num_gpus=n, generation=generation)
    validate_plan_batch(model, [plan])
    return plan


def _micro_batch(row: dict[str, str], framework: str, *, gbs: int, dp: int, pp: int, filled: list[str]) -> int:
    """The row's micro-batch size; unstated: torchtitan's (no gradient accumulation), else Megatron's 1."""
    mbs = _int(row, "micro_batch_size")
    if mbs is None:
        if "torchtitan" in framework:
            m = re.search(r"local batch size (\d+)", row["other_metric"])
            local = int(m.group(1)) if m else gbs // dp
            mbs = max(local // pp, 1) if pp > 1 else local
            filled.append(f"micro_batch={mbs} (torchtitan: no gradient accumulation; pp micro-batches = pp)")
        else:
            mbs = 1
            filled.append("micro_batch=1 (Megatron default)")
    return mbs


def _sequence_parallel(row: dict[str, str], tp: int, notes: str, data: dict, filled: list[str]) -> None:
    """``sequence_parallel`` as the row states it; unstated with tp > 1, the framework's (listed in ``filled``)."""
    sp = row["sequence_parallel"].lower()
    if sp.startswith("y"):
        data["sequence_parallel"] = True
    elif sp.startswith("n") and sp != "not stated":
        data["sequence_parallel"] = False
    elif tp > 1 and "--tp-comm-overlap" in notes:
        filled.append("sequence_parallel=true (Megatron-Core's --tp-comm-overlap requires --sequence-parallel)")
    elif tp > 1:
        filled.append("sequence_parallel=true (NeMo/Megatron-Core performance recipes with tp > 1)")


def _zero3_gather(row: dict[str, str], zero: int, data: dict, filled: list[str]) -> None:
    """The ZeRO-3 gather implementation the row's ``zero_fsdp`` names (DeepSpeed 2021, Megatron-FSDP, FSDP2)."""
    if zero == 3 and "deepspeed" in row["zero_fsdp"].lower() and "2021" in row["source"]:
        # DeepSpeed's ZeRO-3 of early 2021 (v0.3) gathered each parameter with a list-form
        # torch.distributed.all_gather (partition_parameters.py _allgather_param); the coalesced flat gathers
        # came later
        data["zero3_gather"] = "tensor-list"
        filled.append("zero3_gather=tensor-list (DeepSpeed ZeRO-3 of 2021: one list-form all_gather per parameter)")
    elif zero == 3 and "megatron-fsdp" in row["zero_fsdp"].lower():
        # Megatron-FSDP: parameters and gradients are views of its communication buffers (zero-copy); the source
        # names it, so this is not a filled default
        data["zero3_gather"] = "zero-copy"
        if "grad" not in row["precision"].lower() and "grad" not in row["notes"].lower():
            # Megatron-FSDP's user guide recommends --grad-reduce-in-bf16 (docs/discussions/megatron-fsdp-user-guide:
            # "Enables gradient reduction in BF16 precision instead of FP32, reducing communication volume")
            data["grad_reduce_dtype"] = "bf16"
            filled.append("grad_reduce_dtype=bf16 (not stated: the Megatron-FSDP user guide's recommended "
                          "--grad-reduce-in-bf16)")
    elif zero == 3 and "fsdp2" in row["zero_fsdp"].lower():
        # FSDP2 (torch.distributed fully_shard): per-parameter shards, each all-gather copied out into the
        # parameters; the source names it, so this is not a filled default
        data["zero3_gather"] = "per-parameter"


def _moe_settings(row: dict[str, str], notes: str, data: dict, filled: list[str]) -> None:
    """A MoE row's stated expert parallelism, forced balance, EP overlap, expert TP and token dispatcher."""
    ep = _int(row, "ep")
    if ep is None:
        ep = 1
        filled.append("ep=1 (expert parallelism not stated)")
    data["ep"] = ep
    if "balanced gate" in notes or "force-load-balancing" in notes or "forced balance" in notes:
        # stated: routing forced uniform (NeMo Automodel's fake balanced gate, Megatron-Core
        # --moe-router-force-load-balancing): every EP rank gets the mean load
        data["moe_force_balance"] = True
        if "forced balanced, inferred" in notes:
            filled.append("moe_force_balance=true (not in the table: the source's own script for this layout "
                          "passes --moe-router-force-load-balancing; notes)")
    if "overlap of ep communication" in notes:
        data["ep_comm_overlap"] = True  # stated: Megatron-Core's combined 1F1B overlap of the EP all-to-all
    m = re.search(r"\betp (\d+)", notes)
    if m:
        data["etp"] = int(m.group(1))  # stated (Megatron MoE Model Zoo's "ETP 1"); else the framework's rule
    said = notes + " " + row["framework"].lower()
    for word, dispatcher in (("deepep", "deepep"), ("alltoall", "alltoall"), ("all-to-all", "alltoall"),
                             ("allgather", "allgather")):
        if word in said:
            data["moe_dispatcher"] = dispatcher
            break


def _stated_switches(framework: str, notes: str, data: dict, filled: list[str]) -> None:
    """Overlap switches, ordering, fusion and gradient-reduce dtype that the row's framework text or notes state."""
    if "megatron-lm (20" in framework:
        # Megatron-LM 2021/2022: gradient all-reduce after the backward ("we do not use any overlapping of
        # gradient all-reduces with back-propagation", Korthikanti 2022 section 6.3)
        data["overlap_grad_reduce"] = False
    if "overlap flags on" in notes and "--tp-comm-overlap" in notes:
        data["tp_comm_overlap"] = True
    if "asynctp" in notes:
        data["tp_comm_overlap"] = True
    if "torchtitan" in framework:
        data["order"] = "tp-cp-dp-pp"
    if "mp mode default" in framework:
        # FSDP MixedPrecision DEFAULT (Composer): bf16 parameters, fp32 gradient reduction and buffers
        data["grad_reduce_dtype"] = "fp32"
    elif "mp mode pure" in framework:
        data["grad_reduce_dtype"] = "bf16"
    elif framework.startswith("nemo 24."):
        # NeMo 24.x trained through the NeMo 1 launcher (NeMo-Framework-Launcher conf/training/*.yaml):
        # distributed_fused_adam without grad_sync_dtype reduces the fp32 main gradients, FP8 or not; the
        # framework default (NeMo 2 performance scripts: bf16 for FP8) does not apply
        data["grad_reduce_dtype"] = "fp32"
        filled.append("grad_reduce_dtype=fp32 (NeMo 24.x launcher: distributed_fused_adam reduces fp32 main "
                      "gradients; grad_sync_dtype not set)")
    if "compile" in framework:
        data["fused_elementwise"] = True  # torch.compile fuses the elementwise ops the eager default would not


def _stated_kernels(row: dict[str, str], generation: str, data: dict, filled: list[str]) -> None:
    """The attention kernel and the Megatron-LM 2021-22 / NeMo Automodel switches the row's framework implies."""
    fw_text = row["framework"].lower()
    if "flashattention-2" in fw_text or "flash-attention 2" in fw_text:
        data["attention_kernel"] = "flash2"  # the row names the kernel (FlagPerf, FlagScale, Pai-Megatron-Patch)
    if stack_for_row(row) == "deepspeed-2021":
        # DeepSpeed ZeRO-3 of Narayanan et al. 2021 (Table 2) trained the same GPT models a year before
        # FlashAttention (Dao et al., May 2022): the attention core materialized the s x s scores
        data["attention_kernel"] = "unfused"
        filled.append("attention_kernel=unfused (DeepSpeed ZeRO-3 of 2021 predates FlashAttention, May 2022: the "
                      "GPT attention core materializes the s x s scores)")
    if stack_for_row(row) in ("megatron-lm-2021", "megatron-lm-2022"):
        # Megatron-LM of 2021-22 predates FlashAttention (Dao et al., May 2022; Megatron-LM's --use-flash-attn
        # came in 2023): its attention core materializes the score matrix (Korthikanti et al. 2022, section 4.1)
        data["attention_kernel"] = "unfused"
        filled.append("attention_kernel=unfused (Megatron-LM 2021-22: baddbmm, fused masked softmax, dropout and "
                      "bmm over the materialized s x s scores; no FlashAttention yet)")
        # and sends pipeline activations scattered over the TP ranks (--scatter-gather-tensors-in-pipeline, on by
        # default; Narayanan et al. 2021 section 4.1, the paper of these rows' first source)
        data["pp_scatter_gather"] = True
        filled.append("pp_scatter_gather=true (Megatron-LM 2021-22 --scatter-gather-tensors-in-pipeline default; "
                      "Narayanan et al. 2021 section 4.1)")
    if "automodel" in fw_text and "transformer engine" in fw_text:
        # NeMo Automodel's TE backend: TE DotProductAttention (cuDNN fused attention on Hopper and later,
        # FlashAttention-2 before) and TE's fused norm / linear / RoPE kernels, under FSDP2 (torchtitan's semantics)
        data["attention_kernel"] = "cudnn" if generation in ("hopper", "blackwell") else "flash2"
        data["fused_elementwise"] = True
        filled.append(f"attention_kernel={data['attention_kernel']}, fused_elementwise=true (NeMo Automodel's "
                      "Transformer Engine backend: TE DotProductAttention and fused kernels; FSDP2 as torchtitan)")


def _framework_plan(row: dict[str, str], model: ModelSpec, data: dict, filled: list[str], *, num_gpus: int,
                    generation: str) -> Plan:
    """The plan of ``data`` with the framework's defaults; an unstated expert TP that cannot be laid out falls
    back to 1. The framework's assumptions are listed in ``filled``."""
    # the framework's own defaults (fusions, cross-entropy, gradient-reduce dtype, ZeRO-2 semantics, attention
    # kernel, expert TP) come from one place, tierwise.specs.framework, and are listed in `filled`; the
    # pipeline stage layout from tierwise.specs.plan.stage_layout (never refused)
    name = framework_for_text(row["framework"])
    plan = plan_from_mapping(data, num_gpus=num_gpus, origin=f"row {row['row_id']} plan",
                             num_layers=model.num_layers, framework=name or None, generation=generation,
                             moe=model.moe is not None)
    if model.moe is not None and "etp" not in data and _expert_tp_impossible(plan):
        data["etp"] = 1
        filled.append(f"etp=1 (not stated; the framework's etp = {plan.etp} with ep {plan.ep} does not divide "
                      f"tp x cp x dp = {plan.tp * plan.cp * plan.dp}: the published layout ran expert TP 1)")
        plan = plan_from_mapping(data, num_gpus=num_gpus, origin=f"row {row['row_id']} plan",
                                 num_layers=model.num_layers, framework=name or None, generation=generation, moe=True)
    filled.extend(a for a in plan.assumed if "(" in a and any(a.startswith(k + "=") for k in _FRAMEWORK_KEYS)
                  and (model.moe is not None or not a.startswith("etp=")))
    filled.extend(a for a in plan.assumed if a.startswith("pipeline stages") and "even split:" not in a
                  and not a.endswith("the even split; the slowest stage is priced"))
    return plan


def _expert_tp_impossible(plan) -> bool:
    """Whether ``plan``'s expert TP cannot be laid out: MoE layers place ``etp x ep x edp`` over the ``tp x cp x dp``
    ranks (Megatron-Core ``parallel_state.initialize_model_parallel``: the expert grid must divide the dense one).
    A published run that trained had a layout that works, so an unstated expert TP (the framework's default,
    Megatron-Core's ``etp = tp``) that fails this falls back to 1, which always divides."""
    return plan.etp > 1 and (plan.tp * plan.cp * plan.dp) % (plan.etp * plan.ep) != 0


_FRAMEWORK_KEYS = ("fused_elementwise", "fused_cross_entropy", "tp_comm_overlap", "grad_reduce_dtype", "zero2_sync",
                   "attention_kernel", "etp", "zero3_gather", "moe_dispatcher", "moe_grouped_gemm", "moe_force_balance")


# ------------------------------------------------------------------------------------------------ metric


def measured_tokens(row: dict[str, str], rule: rules.Rule, model: ModelSpec | None) -> tuple[float, str]:
    """(tokens/s per GPU, how it was obtained) from the row's own metric by its own rule."""
    n = _int(row, "num_gpus")
    per_gpu = _float(row, "tokens_per_s_per_gpu")
    derived = row["derived_fields"].lower()
    step = _float(row, "step_time_s")
    gbs, seq = _int(row, "global_batch_size"), _int(row, "seq_length")
    if step and gbs and seq and n:
        return gbs * seq / step / n, f"step_time {step:g} s: GBS x seq / step / GPUs"
    if per_gpu and "tokens_per_s" not in derived.replace("tokens_per_s=n*", ""):
        return per_gpu, "tokens/s/GPU as published"
    if per_gpu:
        return per_gpu, "tokens/s/GPU (published per GPU)"
    tput = _float(row, "tokens_per_s")
    if tput and n:
        return tput / n, "tokens/s / GPUs"
    if not rule.pinned:
        raise _Skip(f"only TFLOP/s or MFU given and the FLOP rule is not pinned ({rule.label})")
    L, h, s = _int(row, "num_layers"), _int(row, "hidden_size"), seq
    V = model.vocab_size if model is not None else (_int(row, "vocab_size") or 0)
    tflops = _float(row, "tflops_per_gpu")
    if rule.key == "narayanan-eq3" and tflops:
        f = rules.narayanan_eq3_flops_per_token(L, h, s, V)
        return rules.tokens_per_gpu_from_tflops(tflops, f), f"{tflops:g} TFLOP/s / Eq. 3 FLOPs per token"
    if rule.key == "mcore-r0.8" and tflops and model is not None:
        f = rules.megatron_core_r08_flops_per_token(L, h, s, V, model.num_attention_heads, model.num_kv_heads,
                                                     model.ffn_hidden_size, gated=model.gated_mlp,
                                                     head_dim=model.head_dim)
        return rules.tokens_per_gpu_from_tflops(tflops, f), f"{tflops:g} TFLOP/s / Megatron-Core r0.8 FLOPs"
    mfu = _float(row, "mfu_pct")
    peak = _float(row, "peak_tflops_assumed")
    if rule.key == "mcore-r0.8" and mfu and peak and model is not None:
        f = rules.megatron_core_r08_flops_per_token(L, h, s, V, model.num_attention_heads, model.num_kv_heads,
                                                     model.ffn_hidden_size, gated=model.gated_mlp,
                                                     head_dim=model.head_dim)
        return rules.tokens_per_gpu_from_tflops(mfu / 100 * peak, f), f"MFU {mfu:g}% x {peak:g} / Megatron-Core r0.8"
    if rule.key == "palm-mfu" and mfu and peak:
        f = rules.palm_model_flops_per_token(L, h, s, V)
        return rules.tokens_per_gpu_from_tflops(mfu / 100 * peak, f), f"MFU {mfu:g}% x {peak:g} / model FLOPs"
    if rule.key == "llmfoundry" and mfu and peak and _float(row, "params_b"):
        f = rules.llmfoundry_flops_per_token(_float(row, "params_b") * 1e9, L, h, s)
        return rules.tokens_per_gpu_from_tflops(mfu / 100 * peak, f), f"MFU {mfu:g}% x {peak:g} / (6N + 12lhs)"
    raise _Skip("no usable throughput figure (tokens/s, step time, or TFLOP/s/MFU under a pinned rule)")


_INT_BOUNDS = {"num_gpus": MAX_GPUS, "tp": MAX_GPUS, "pp": MAX_LAYERS, "cp": MAX_GPUS,
               "global_batch_size": MAX_BATCH, "micro_batch_size": MAX_BATCH, "seq_length": MAX_SEQ,
               "num_layers": MAX_LAYERS, "hidden_size": MAX_DIM, "ffn_hidden_size": MAX_DIM,
               "num_attention_heads": MAX_DIM, "num_kv_heads": MAX_DIM, "head_dim": MAX_DIM, "vocab_size": MAX_DIM}
_FLOAT_BOUNDS = {"step_time_s": 1e9, "tokens_per_s": 1e15, "tokens_per_s_per_gpu": 1e12, "tflops_per_gpu": 1e6,
                 "peak_tflops_assumed": 1e6, "mfu_pct": 100.0, "params_b": 1e6}


def check_row_numbers(row: dict[str, str]) -> None:
    """A number the row states must be in range: a zero tp, a NaN step time or an infinite throughput is an
    error naming the row, the column and the range (an empty or worded cell stays "not stated")."""
    where = f"in dataset row {row.get('row_id', '?')}"
    for key, top in (*_INT_BOUNDS.items(), *_FLOAT_BOUNDS.items()):
        text = row.get(key, "").strip()
        value = _int(row, key)
        if value is None:
            try:
                value = float(text)  # "-3", "nan", "1e400", "8.5": stated, and wrong
            except ValueError:
                continue
        if key in _INT_BOUNDS:
            check_int(value, key, maximum=top, error=SpecError, sep="=", where=where)
        else:
            check_float(value, key, minimum=0.0, min_open=True, maximum=top, error=SpecError, sep="=", where=where)


def stack_for_row(row: dict[str, str]) -> str:
    """The row's software stack: the framework (:func:`tierwise.specs.framework.framework_for_text`) and its
    era, from the ``framework`` column's version or year, else the first year in ``source``:
    ``megatron-lm-2021``, ``megatron-lm-2022``, ``megatron-core-r0.8``, ``nemo-24.07``, ``torchtitan-2024``,
    ``llm-foundry``; the 2024-25 rows: ``nemo-2025`` (NeMo 25.02-25.07), ``automodel-2025`` (NeMo Automodel),
    ``megatron-core-2024`` (FlagPerf's Megatron-Core 0.6, Pai-Megatron-Patch and Megatron-DeepSpeed cases),
    ``flagscale-2024`` and ``megatron-core-moe-2025`` (the Megatron MoE Model Zoo). Megatron-LM 2021 rows whose ZeRO column names DeepSpeed ran DeepSpeed's ZeRO-3
    (``deepspeed-2021``): a different data-parallel implementation on the same cluster."""
    text = row.get("framework", "")
    low = text.lower()
    # the stacks of the 2024-25 rows, named as their users know them (docs/validation.md, "Groups")
    if "automodel" in low:
        return "automodel-2025"  # NeMo Automodel: PyTorch FSDP2 + Transformer Engine
    if "flagscale" in low:
        return "flagscale-2024"  # FlagScale (Megatron-LM fork), FlagPerf's H800 case
    if "flagperf" in low:
        return "megatron-core-2024"  # FlagPerf's Megatron-Core 0.6 / Pai-Megatron-Patch / Megatron-DeepSpeed cases
    if "megatron-core" in low and ("moe_dev" in low or "dispatcher" in low):
        return "megatron-core-moe-2025"  # the Megatron MoE Model Zoo (DeepEP / all-to-all dispatchers)
    m = re.search(r"\bnemo (2\d)\.\d\d", low)
    if m and int(m.group(1)) >= 25:
        return f"nemo-20{m.group(1)}"  # NeMo 25.02 / 25.04 / 25.07: one release line (Megatron-Core 0.11-0.13)
    name = framework_for_text(text) or "unknown"
    if "deepspeed" in row.get("zero_fsdp", "").lower():
        name = "deepspeed"
    elif name == "megatron":
        name = "megatron-core" if "core" in low and "nemo" not in low else "megatron-lm"
    version = re.search(r"\br?(\d+\.\d+)(?:\.\d+)?\b", text)
    year = re.search(r"\b(20\d\d)\b", text) or re.search(r"\b(20\d\d)\b", row.get("source", ""))
    if version and name in ("megatron-core", "nemo"):
        return f"{name}-{'r' if name == 'megatron-core' else ''}{version.group(1)}"
    if not year:
        m = re.search(r"_(\d\d)\d\d$", row.get("source_id", ""))  # torchtitan_2412: Dec 2024
        return f"{name}-20{m.group(1)}" if m else name
    return f"{name}-{year.group(1)}"


def case_from_row(row: dict[str, str], *, parameters: Parameters | None = None) -> Case:
    """Map one dataset row; a row that cannot be mapped comes back with ``skip`` set to the reason.

    A stated number out of range (:func:`check_row_numbers`) is an error, not a skip. ``parameters``: the
    cluster is loaded and the inferred settings chosen under them (None, this being part of the validation
    API: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    check_row_numbers(row)
    rule = rules.rule_for(row["flops_counting"])
    n = _int(row, "num_gpus") or 0
    case = Case(row_id=row["row_id"], source_id=row["source_id"], model_label=row["model_name"],
                hardware=row["hardware_id"], num_gpus=n, confidence=row["confidence"].lower() or "unknown",
                rule=rule, stack=stack_for_row(row))
    try:
        key, note = cluster_for_row(row)
        if not key:
            raise _Skip(f"hardware {row['hardware_id']!r} not mapped to a cluster")
        case.cluster = _cluster(key, parameters)
        case.generation = case.cluster.accelerator.generation
        if note:
            case.filled.append(note)
        case.model, case.model_source = model_for_row(row, case.filled)
        case.plan = plan_for_row(row, case.model, case.filled, case.cluster.accelerator.generation)
        if case.plan.inferred:
            case.plan, note = infer_settings(case.model, case.cluster, case.plan, parameters=parameters)
            case.filled.append(note)
        case.measured_tokens_per_s_per_gpu, case.metric = measured_tokens(row, rule, case.model)
    except _Skip as exc:
        case.skip = str(exc)
    except TierwiseError as exc:
        case.skip = f"configuration does not hold: {exc}"
    return case
