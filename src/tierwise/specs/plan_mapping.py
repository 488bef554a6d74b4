"""One validated :class:`~tierwise.specs.plan.Plan` from a mapping: the plan keys, their Megatron/NeMo long
names, the framework's defaults and the pipeline stage layout.

Keys and defaults: :mod:`tierwise.specs.plan` (issue 2 "Contracts"). :func:`plan_from_mapping` reads a mapping
in named steps: the framework whose defaults apply, the parallel degrees, the batch, the kernel and memory
choices, the sharding, the pipeline schedule, the on/off switches and the stage layout; every default applied
is listed in ``assumed``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierwise.errors import PlanError, SpecError
from tierwise.files import short_repr
from tierwise.limits import MAX_BATCH, MAX_GPUS, MAX_LAYERS, MAX_SEQ
from tierwise.specs._mapping import check_keys, get_bool, get_int, require_mapping
from tierwise.specs.compute import default_attention_kernel, sdpa_backend
from tierwise.specs.framework import (
    ATTENTION_KERNELS,
    GRAD_REDUCE_DTYPES,
    MOE_DISPATCHERS,
    MOE_GROUPED_GEMMS,
    ZERO2_SYNC,
    check_framework,
    framework_defaults,
)
from tierwise.specs.plan import (
    _KEYS,
    ORDERS,
    PRECISION,
    RECOMPUTE,
    SCHEDULES,
    ZERO3_GATHER,
    Plan,
    layout_note,
)

__all__ = ["plan_from_mapping", "MEGATRON_ALIASES", "LAYERS_PER_CHUNK", "layout_counts"]


def _choice(data: Mapping[str, Any], key: str, choices: Sequence[str], default: str, origin: str) -> str:
    raw = data.get(key, default)
    if raw is None and "none" in choices:  # `recompute: null` (Megatron's recompute_granularity: null) is none
        raw = "none"
    value = raw.lower() if isinstance(raw, str) else None
    if value not in choices:
        raise SpecError(f"{key}={short_repr(raw)} in {origin}; choose one of {', '.join(choices)}")
    return value


MEGATRON_ALIASES = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "recompute_granularity": "recompute",
    "expert_tensor_parallel_size": "etp",
    "virtual_pipeline_model_parallel_size": "vpp",
    "decoder_first_pipeline_num_layers": "first_stage_layers",
    "decoder_last_pipeline_num_layers": "last_stage_layers",
    "num_layers_in_first_pipeline_stage": "first_stage_layers",
    "num_layers_in_last_pipeline_stage": "last_stage_layers",
    "pipeline_model_parallel_layout": "pipeline_layout",
    "cpu_offloading_num_layers": "activation_offload_layers",
}
"""Megatron-LM / NeMo long names accepted in a plan mapping for the short keys (same meaning, same values)."""
LAYERS_PER_CHUNK = "num_layers_per_virtual_pipeline_stage"
"""Megatron's layers per virtual pipeline chunk: ``vpp = num_layers / (pp x layers per chunk)``."""


def _resolve_aliases(data: Mapping[str, Any], origin: str, num_layers: int | None) -> dict[str, Any]:
    """The mapping with Megatron/NeMo long names turned into the short keys; a long name given with its short
    name and a different value is an error, as is a layers-per-chunk that does not split the model evenly."""
    out = dict(data)
    for long, short in MEGATRON_ALIASES.items():
        if long not in out:
            continue
        value = out.pop(long)
        if short in out:
            same = (str(out[short]).lower() == str(value).lower() if short == "recompute"
                    else out[short] == value and type(out[short]) is type(value))
            if not same:
                raise SpecError(f"{short}={short_repr(out[short])} and its Megatron name {long}="
                                f"{short_repr(value)} disagree in {origin}; give only one of them")
        else:
            out[short] = value
    if LAYERS_PER_CHUNK in out:
        per_chunk = get_int(out, LAYERS_PER_CHUNK, origin)
        out.pop(LAYERS_PER_CHUNK)
        if num_layers is None:
            raise SpecError(f"{LAYERS_PER_CHUNK}={per_chunk} in {origin} needs the model's num_layers to give vpp; "
                            "use vpp instead")
        pp = get_int(out, "pp", origin, default=1)
        if num_layers % (pp * per_chunk):
            raise PlanError(f"{LAYERS_PER_CHUNK}={per_chunk} with pp={pp} in {origin}: num_layers={num_layers} is "
                            f"not divisible by pp x {per_chunk} = {pp * per_chunk}; choose layers per chunk "
                            f"dividing num_layers / pp (or give vpp)")
        vpp = num_layers // (pp * per_chunk)
        if "vpp" in out and out["vpp"] != vpp:
            raise SpecError(f"vpp={short_repr(out['vpp'])} and {LAYERS_PER_CHUNK}={per_chunk} (vpp = num_layers / "
                            f"(pp x layers per chunk) = {num_layers} / ({pp} x {per_chunk}) = {vpp}) disagree in "
                            f"{origin}; give only one of them")
        out["vpp"] = vpp
    return out


def _kernel_fallback(generation: str) -> str:
    """The attention kernel without a framework: the generation's default (``compute.yaml``
    ``default_attention_kernel``: A100 FlashAttention-2, Hopper and Blackwell cuDNN) or, with no generation
    known, ``auto`` (the estimator resolves it for the cluster it prices)."""
    if not generation:
        return "auto"

    return default_attention_kernel(generation.lower())


def _sdpa_under(torch_version: Any, kernel: str, generation: str, assumed: list[str], origin: str) -> str:
    """The kernel family ``sdpa`` runs under the plan's ``torch_version`` on ``generation``
    (:func:`tierwise.specs.compute.sdpa_backend`), noted in ``assumed``; another kernel is kept as it is."""

    if not isinstance(torch_version, str):  # YAML reads 2.10 as the number 2.1
        raise SpecError(f"torch_version={short_repr(torch_version)} in {origin} must be a quoted release such as "
                        "'2.5.1' or '2.10'")
    if kernel != "sdpa" or not generation:
        return kernel
    family, why = sdpa_backend(generation.lower(), torch_version, where=origin)
    assumed.append(f"attention_kernel=sdpa runs {family} ({why})")
    return family

@dataclass
class _Reading:
    """A plan mapping being read: the framework whose defaults fill unstated keys, and the defaults applied so
    far (``assumed``, in the order they were applied)."""

    data: dict[str, Any]
    origin: str
    framework: str | None
    fw_defaults: dict[str, tuple[object, str]]
    assumed: list[str] = field(default_factory=list)

    def default_of(self, key: str, fallback):
        """The framework's default for ``key`` (noted with its reason) or tierwise's ``fallback``."""
        if key in self.fw_defaults:
            value, reason = self.fw_defaults[key]
            fw = self.framework
            return value, f" ({reason if reason.lower().startswith(fw) else fw + ': ' + reason})"
        return fallback, ""

    def opt_int(self, key: str, default: int, minimum: int = 1, maximum: int = MAX_GPUS) -> int:
        """The integer ``key``, or its default (noted in ``assumed``)."""
        default, why = self.default_of(key, default)
        if key == "etp" and not why:
            why = " (Megatron-Core: expert_tensor_parallel_size = tp when unset)"
        if key not in self.data:
            self.assumed.append(f"{key}={default}{why}")
        return get_int(self.data, key, self.origin, default=default, minimum=minimum, maximum=maximum)

    def drop_assumed(self, key: str) -> None:
        """Forget the default noted for ``key`` (a later rule replaces it)."""
        self.assumed[:] = [a for a in self.assumed if not a.startswith(f"{key}=")]


def _start_reading(data: Mapping[str, Any], framework: str | None, generation: str, moe: bool,
                   origin: str) -> _Reading:
    """The mapping's framework (its own ``framework`` key or the scenario's; they must agree) and that
    framework's defaults (:func:`tierwise.specs.framework.framework_defaults`)."""
    if "framework" in data:
        own = check_framework(data["framework"], origin)
        if framework is not None and own != framework:
            raise SpecError(f"framework={own!r} in {origin} and the scenario's framework={framework!r} disagree; "
                            "give only one of them")
        framework = own
    fw_defaults: dict[str, tuple[object, str]] = {}
    if framework:
        tp_given = data.get("tp", 1)
        precision_given = data.get("precision", "bf16")
        fw_defaults = framework_defaults(framework, generation=generation, moe=moe,
                                         tp=tp_given if isinstance(tp_given, int) else 1,
                                         precision=precision_given if isinstance(precision_given, str) else "bf16")
    return _Reading(data=dict(data), origin=origin, framework=framework, fw_defaults=fw_defaults)


def _degrees(r: _Reading, num_gpus: int) -> dict[str, int]:
    """``tp pp cp dp ep etp vpp``: ``dp`` is derived from ``num_gpus`` when unstated, else must complete it."""
    tp, pp, cp = r.opt_int("tp", 1), r.opt_int("pp", 1), r.opt_int("cp", 1)
    model_parallel = tp * pp * cp
    if "dp" in r.data:
        dp = get_int(r.data, "dp", r.origin)
        if dp * model_parallel != num_gpus:
            raise PlanError(
                f"tp x pp x cp x dp = {tp} x {pp} x {cp} x {dp} = {dp * model_parallel} but num_gpus={num_gpus}; "
                f"the degrees must multiply to num_gpus (or drop dp and it is derived)"
            )
    else:
        if num_gpus % model_parallel:
            raise PlanError(
                f"num_gpus={num_gpus} is not divisible by tp x pp x cp = {tp} x {pp} x {cp} = {model_parallel}; "
                "choose degrees whose product divides the GPU count"
            )
        dp = num_gpus // model_parallel
        r.assumed.append(f"dp={dp} (num_gpus / (tp x pp x cp))")
    ep = r.opt_int("ep", 1)
    etp = r.opt_int("etp", tp)
    vpp = r.opt_int("vpp", 1, maximum=MAX_LAYERS)
    return {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "ep": ep, "etp": etp, "vpp": vpp}


def _batch(r: _Reading, tp: int) -> dict[str, Any]:
    """Micro and global batch, sequence length, and sequence parallelism (on when ``tp > 1``)."""
    mbs = r.opt_int("micro_batch_size", 1, maximum=MAX_BATCH)
    gbs = get_int(r.data, "global_batch_size", r.origin, maximum=MAX_BATCH)
    seq = get_int(r.data, "seq_length", r.origin, maximum=MAX_SEQ)
    if "sequence_parallel" not in r.data:
        r.assumed.append(f"sequence_parallel={tp > 1}")
    sp = get_bool(r.data, "sequence_parallel", r.origin, default=tp > 1)
    return {"micro_batch_size": mbs, "global_batch_size": gbs, "seq_length": seq, "sequence_parallel": sp}


_CHOICES = (("recompute", RECOMPUTE, "none"), ("precision", PRECISION, "bf16"),
            ("order", ORDERS, "tp-cp-dp-pp"), ("zero3_gather", ZERO3_GATHER, "flat"),
            ("grad_reduce_dtype", GRAD_REDUCE_DTYPES, "fp32"),
            ("zero2_sync", ZERO2_SYNC, "per-step"),
            ("attention_kernel", ATTENTION_KERNELS, None),  # None: the generation's (_kernel_fallback)
            ("moe_dispatcher", MOE_DISPATCHERS, "alltoall"),
            ("moe_grouped_gemm", MOE_GROUPED_GEMMS, "per-expert"))
"""The plan's named choices: key, the values it may take, tierwise's default."""


def _choices(r: _Reading, generation: str, moe: bool) -> dict[str, str]:
    """The named choices (:data:`_CHOICES`), each stated or defaulted (an unstated ``recompute`` is left to the
    estimate, which infers the cheapest that fits memory); ``sdpa`` resolved under ``torch_version``."""
    kernel_default = _kernel_fallback(generation)
    choices: dict[str, str] = {}
    for key, options, fallback in _CHOICES:
        default, why = r.default_of(key, kernel_default if fallback is None else fallback)
        if key not in r.data:
            if key == "recompute":
                pass  # the cheapest that fits memory, chosen by the estimate (``inferred``)
            elif key in ("moe_dispatcher", "moe_grouped_gemm") and not moe:
                pass  # no experts: nothing dispatched
            elif key == "moe_dispatcher":
                r.assumed.append(f"{key}={default}{why or ' (the all-to-all dispatcher of NeMo / Megatron-Core MoE recipes)'}")
            elif key == "moe_grouped_gemm":
                r.assumed.append(f"{key}={default}{why or ' (one GEMM launch per local expert: Transformer Engine GroupedLinear, as Megatron-Core runs it)'}")
            else:
                r.assumed.append(f"{key}={default}{why}")
        choices[key] = _choice(r.data, key, options, default, r.origin)
    if "torch_version" in r.data:
        choices["attention_kernel"] = _sdpa_under(r.data["torch_version"], choices["attention_kernel"], generation,
                                                  r.assumed, r.origin)
    return choices


def _sharding(r: _Reading, dp: int, choices: dict[str, str]) -> dict[str, int]:
    """``zero_stage`` and ``dp_shard``; below ZeRO-2 an unstated ``zero3_gather`` is ``flat`` (the framework's
    sharded-data-parallel implementation only matters when parameters are sharded)."""
    zero = r.opt_int("zero_stage", 1, minimum=0, maximum=3)
    if zero < 2 and "zero3_gather" not in r.data and choices["zero3_gather"] != "flat":
        r.drop_assumed("zero3_gather")
        choices["zero3_gather"] = "flat"
    dp_shard = r.opt_int("dp_shard", dp)
    return {"zero_stage": zero, "dp_shard": dp_shard}


def _schedule(r: _Reading, vpp: int, moe: bool, choices: dict[str, str]) -> str:
    """The pipeline schedule (``interleaved`` when ``vpp > 1``, else ``1f1b``). DualPipe comes with DeepSeek's
    own stack, whose dispatcher is DeepEP (DeepSeek-V3 report sec. 3.2.2): an unstated dispatcher follows."""
    default_schedule = "interleaved" if vpp > 1 else "1f1b"
    if "schedule" not in r.data:
        r.assumed.append(f"schedule={default_schedule}")
    schedule = _choice(r.data, "schedule", SCHEDULES, default_schedule, r.origin)
    if schedule.startswith("dualpipe") and moe and "moe_dispatcher" not in r.data:
        r.drop_assumed("moe_dispatcher")
        r.assumed.append("moe_dispatcher=deepep (schedule dualpipe: DeepSeek-V3's stack, sec. 3.2.2 all-to-all kernels)")
        choices["moe_dispatcher"] = "deepep"
    return schedule


_SWITCHES = (("reshard_after_forward", True), ("tp_comm_overlap", False), ("ep_comm_overlap", False),
             ("fused_elementwise", True), ("fused_cross_entropy", False),
             ("overlap_grad_reduce", True), ("overlap_param_gather", True))
"""The plan's on/off switches with tierwise's defaults (a framework may change them)."""


def _switches(r: _Reading, degrees: dict[str, int], sp: bool, moe: bool) -> dict[str, bool]:
    """The on/off switches (:data:`_SWITCHES`), ``moe_force_balance`` and ``pp_scatter_gather``."""
    bools = {}
    for key, fallback in _SWITCHES:
        default, why = r.default_of(key, fallback)
        if key not in r.data:
            r.assumed.append(f"{key}={str(default).lower()}{why}")
        bools[key] = get_bool(r.data, key, r.origin, default=default)
    balance_default, balance_why = r.default_of("moe_force_balance", False)
    if moe and "moe_force_balance" not in r.data:
        r.assumed.append(f"moe_force_balance={str(balance_default).lower()}" + (
            balance_why or " (the router's own, dropless load; Megatron-Core forces balance only with "
                           "--moe-router-force-load-balancing)"))
    bools["moe_force_balance"] = get_bool(r.data, "moe_force_balance", r.origin, default=balance_default)
    if "pp_scatter_gather" not in r.data and degrees["tp"] > 1 and degrees["pp"] > 1 and not sp:
        r.assumed.append("pp_scatter_gather=false (Megatron-Core sends the whole activation between pipeline stages)")
    bools["pp_scatter_gather"] = get_bool(r.data, "pp_scatter_gather", r.origin, default=False)
    return bools


def plan_from_mapping(data: Mapping[str, Any], *, num_gpus: int, origin: str = "plan",
                      num_layers: int | None = None, framework: str | None = None, generation: str = "",
                      moe: bool = False) -> Plan:
    """Validate the plan's own keys and fill defaults (model-dependent checks:
    :func:`tierwise.specs.plan.validate_plan_batch`).

    Megatron/NeMo long names (:data:`MEGATRON_ALIASES`, :data:`LAYERS_PER_CHUNK`) are accepted for the short
    keys; ``num_layers`` (the model's) is needed to turn layers per virtual stage into ``vpp`` and to check
    an explicit ``pipeline_layout``. ``framework`` (a scenario's, or the plan's own ``framework`` key) sets
    that framework's defaults (:func:`tierwise.specs.framework.framework_defaults`; ``generation``: the
    accelerator's, ``moe``: the model has experts); each default applied is listed in ``assumed``.
    """
    data = require_mapping(data, origin)
    check_keys(data, (*_KEYS, *MEGATRON_ALIASES, LAYERS_PER_CHUNK, "framework"), origin)
    data = _resolve_aliases(data, origin, num_layers)
    check_keys(data, (*_KEYS, "framework"), origin, required=("global_batch_size", "seq_length"))
    r = _start_reading(data, framework, generation, moe, origin)
    degrees = _degrees(r, num_gpus)
    batch = _batch(r, degrees["tp"])
    choices = _choices(r, generation, moe)
    sharding = _sharding(r, degrees["dp"], choices)
    schedule = _schedule(r, degrees["vpp"], moe, choices)
    bools = _switches(r, degrees, batch["sequence_parallel"], moe)
    node_limit = get_int(r.data, "moe_node_limit", origin, default=0, minimum=0, maximum=MAX_GPUS)
    offload = get_int(r.data, "activation_offload_layers", origin, default=0, minimum=0, maximum=MAX_LAYERS)
    layout = _layout_fields(r.data, degrees["pp"], degrees["vpp"], num_layers, origin)
    plan = Plan.of(**degrees, **batch, **sharding, schedule=schedule, moe_node_limit=node_limit,
                   activation_offload_layers=offload, framework=r.framework or "", **choices, **layout, **bools)
    if num_layers is not None and degrees["pp"] > 1:
        r.assumed.append(layout_note(num_layers, plan))
    inferred = () if "recompute" in r.data else ("recompute",)
    return plan.replace(assumed=tuple(r.assumed), inferred=inferred)


_LAYOUT_SYMBOLS = {"E": "embedding", "t": "decoder", "L": "loss"}
"""Megatron-Core layout symbols tierwise prices (``E`` embedding, ``t`` decoder layer, ``L`` loss) and the
names its list form uses for them. ``m`` (a multi-token-prediction layer) is refused: tierwise places a model's
MTP modules (``mtp_layers``) itself, on the stage with the output head (:func:`tierwise.parallel.pp.stage_layers`,
DeepSeek-V3 report sec. 3.2.3)."""
_LAYOUT_NAMES = {name: sym for sym, name in _LAYOUT_SYMBOLS.items()} | {"mtp": "m"}
_MAX_LAYOUT_STAGES = 4096
"""Most virtual stages a layout string may expand to (pp x vpp; MAX_LAYERS bounds the layers)."""


def _expand_layout(text: str, origin: str) -> str:
    """Megatron-Core's ``pipeline_model_parallel_layout`` string with its repetitions written out.

    Grammar (Megatron-Core user guide, "Custom Pipeline Model Parallel Layout";
    ``megatron/core/transformer/pipeline_parallel_layer_layout.py``): stages are split by ``|``; ``x*N``
    repeats one symbol, ``(pattern)*N`` a group (groups may nest); commas are cosmetic; empty stages are
    legal (``E||t|L``). E.g. ``"Et*3|(tt|)*29,m|L"`` is DeepSeek-V3's PP16 x VPP2 layout.
    """

    def bad(why: str) -> SpecError:
        return SpecError(f"pipeline_layout={short_repr(text)} in {origin}: {why}; write stages split by '|' "
                         f"with symbols E, t, L and repeats x*N or (pattern)*N, e.g. \"Et*3|(tt|)*6|t*3L\"")

    limit = (MAX_LAYERS + 2) * 4 + _MAX_LAYOUT_STAGES
    s = text.replace(",", "").replace(" ", "")
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while "(" in s or ")" in s:
        m = group.search(s)
        if m is None:
            raise bad("its parentheses do not pair up, or a group has no *N after it")
        body, n = m.group(1), int(m.group(2))
        if len(body) * n + len(s) > limit:
            raise bad(f"it expands past {limit} characters")
        s = s[:m.start()] + body * n + s[m.end():]
    single = re.compile(r"([A-Za-z])\*(\d+)")
    while "*" in s:
        m = single.search(s)
        if m is None:
            raise bad("a * follows no symbol or is not followed by a count")
        n = int(m.group(2))
        if n + len(s) > limit:
            raise bad(f"it expands past {limit} characters")
        s = s[:m.start()] + m.group(1) * n + s[m.end():]
    return s


def layout_counts(raw: Any, origin: str) -> list[int]:
    """Decoder layers per (virtual) stage, in model order, from a ``pipeline_layout`` in any of the forms
    Megatron-Core accepts or tierwise adds: a list of layer counts (``[7, 8, 8, 7]``); Megatron's list of
    per-stage lists of layer names (``[["embedding", "decoder"], ["decoder", "loss"]]``); or its layout
    string (``"Et|tt|tL"``, see :func:`_expand_layout`). Embedding and loss entries are placement only:
    tierwise already prices the embedding on the first stage and the loss on the last."""
    if isinstance(raw, str):
        stages_text = _expand_layout(raw, origin).split("|")
        if len(stages_text) > _MAX_LAYOUT_STAGES:
            raise SpecError(f"pipeline_layout={short_repr(raw)} in {origin} has {len(stages_text)} stages; at most "
                            f"{_MAX_LAYOUT_STAGES} (pp x vpp)")
        stages = [list(st) for st in stages_text]
    elif isinstance(raw, list) and raw:
        stages = raw
    else:
        raise SpecError(f"pipeline_layout={short_repr(raw)} in {origin}; give a list of layer counts, one per "
                        f"(virtual) pipeline stage, e.g. [7, 8, 8, 7], or Megatron-Core's layout string, "
                        f"e.g. \"Et*7|t*8|t*8|t*7L\"")
    counts, symbols = [], []  # symbols: each list-form stage's layers as E / t / L
    for i, v in enumerate(stages):
        if isinstance(v, list):
            syms = [_LAYOUT_NAMES.get(x, x) if isinstance(x, str) else None for x in v]
            for item, sym in zip(v, syms, strict=True):
                if sym == "m":
                    raise SpecError(f"pipeline_layout stage {i} in {origin} holds an MTP layer (m); tierwise "
                                    "places the model's MTP modules (mtp_layers) on the stage with the output head: "
                                    "drop m from the layout")
                if sym not in _LAYOUT_SYMBOLS:
                    raise SpecError(f"pipeline_layout stage {i} holds {short_repr(item)} in {origin}; each layer "
                                    f"is one of E, t, L (or embedding, decoder, loss)")
            counts.append(syms.count("t"))
            symbols.append(syms)
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > MAX_LAYERS:
            raise SpecError(f"pipeline_layout[{i}]={short_repr(v)} in {origin}; each entry is a count of layers "
                            f"(an integer 0..{MAX_LAYERS})")
        counts.append(v)
    if len(symbols) == len(stages):
        for sym, where, name in (("E", 0, "first"), ("L", -1, "last")):
            holders = [j for j, syms in enumerate(symbols) for x in syms if x == sym]
            if holders and holders != [range(len(stages))[where]]:
                raise SpecError(f"pipeline_layout={short_repr(raw)} in {origin} puts {_LAYOUT_SYMBOLS[sym]} ({sym}) "
                                f"in stage(s) {holders}; Megatron-Core places it once, in the {name} stage")
    return counts


def _layout_fields(data: Mapping[str, Any], pp: int, vpp: int, num_layers: int | None, origin: str) -> dict:
    """The plan's stage-layout fields from ``pipeline_layout``, ``first_stage_layers`` / ``last_stage_layers``
    and the Megatron-Core embedding / loss accounting switches (checked, one line naming the bad value)."""
    first = get_int(data, "first_stage_layers", origin, default=0, minimum=0, maximum=MAX_LAYERS)
    last = get_int(data, "last_stage_layers", origin, default=0, minimum=0, maximum=MAX_LAYERS)
    emb = get_bool(data, "account_for_embedding_in_pipeline_split", origin, default=False)
    loss = get_bool(data, "account_for_loss_in_pipeline_split", origin, default=False)
    out = {"first_stage_layers": first, "last_stage_layers": last, "embedding_in_split": emb,
           "loss_in_split": loss}
    if "pipeline_layout" not in data:
        if num_layers is not None and (first or last):
            rest = num_layers - first - last
            left = pp - (1 if first else 0) - (1 if last else 0)
            if rest < 0 or (left <= 0 and rest != 0):
                raise PlanError(f"first_stage_layers={first}, last_stage_layers={last} with pp={pp} leave {rest} "
                                f"layers of num_layers={num_layers} for {max(left, 0)} other stages; the stages "
                                f"must hold exactly {num_layers} layers")
        return out
    raw = data["pipeline_layout"]
    counts = layout_counts(raw, origin)
    if first or last or emb or loss:
        raise SpecError(f"pipeline_layout in {origin} is given with first_stage_layers / last_stage_layers / "
                        "account_for_*_in_pipeline_split; give only the layout")
    if len(counts) not in (pp, pp * vpp):
        raise SpecError(f"pipeline_layout has {len(counts)} entries in {origin}; give pp = {pp} (one per stage) "
                        f"or pp x vpp = {pp * vpp} (one per virtual stage)")
    if num_layers is not None and sum(counts) != num_layers:
        raise SpecError(f"pipeline_layout={short_repr(raw)} sums to {sum(counts)} layers in {origin}, but the model "
                        f"has num_layers={num_layers}; the stages must hold every layer once")
    # Megatron-Core PipelineParallelLayerLayout: virtual stages in model order, virtual stage i on rank i mod pp
    physical = [sum(counts[r::pp]) for r in range(pp)]
    out.update(first_stage_layers=physical[0], last_stage_layers=physical[-1],
               middle_stage_layers=max(physical[1:-1], default=0), layout_explicit=True)
    return out


