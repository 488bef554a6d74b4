"""What each training framework does by default: the one place that knows it.

A scenario (or a calibration row) names its ``framework``; :func:`framework_defaults` gives the plan switches
that framework sets when the user does not state them (the table ``catalog/frameworks.yaml``, checked on
load by :func:`check_framework_table`), each with the reason, so that
:func:`tierwise.specs.plan_mapping.plan_from_mapping` fills them and lists them under ``assumed``. The switches are
the plan's (docs/architecture.md, "Software choices are plan switches"); this module only chooses values.

Sources, per framework:

* ``megatron`` (Megatron-LM / Megatron-Core): fused kernels through Transformer Engine
  (``bias_activation_fusion``, ``persist_layer_norm``); ``cross_entropy_loss_fusion`` defaults to False
  (``transformer_config.py``); ``--tp-comm-overlap`` off unless asked (``arguments.py``); bf16 training
  reduces gradients in fp32 (``arguments.py``: bf16 sets ``accumulate_allreduce_grads_in_fp32``); the
  distributed optimizer reduce-scatters the gradients once per step, at the end of the accumulation
  (``distributed/param_and_grad_buffer.py``, ``finish_grad_sync``); expert TP = TP when unset
  (``expert_tensor_parallel_size`` defaults to ``tensor_model_parallel_size``, ``parallel_state.py``);
  attention through Transformer Engine's ``DotProductAttention``, the cuDNN fused-attention backend on
  Hopper and later, FlashAttention-2 on Ampere; ``--moe-grouped-gemm`` through Transformer Engine's
  ``GroupedLinear``, one cuBLASLt GEMM per local expert (``moe_grouped_gemm: per-expert``).
* ``nemo`` (NeMo 2 / Megatron-Bridge recipes): as Megatron-Core, except that the MoE recipes set
  ``expert_tensor_parallel_size: 1`` and the performance recipes turn ``tp_comm_overlap`` on
  (``CommOverlapConfig``); ``grad_reduce_in_fp32: True`` (``bf16_mixed``), except FP8 runs: NeMo's
  performance scripts set ``recipe.trainer.plugins.grad_reduce_in_fp32 = False`` whenever the compute dtype
  is FP8 (``scripts/performance/helpers.py`` ``set_precision_configs``, NeMo 25.02-25.07; the GPT-3 175B
  script of 25.02 does the same inline), so FP8 runs reduce gradients in bf16.
* ``torchtitan``: eager elementwise kernels unless ``--compile`` (``fused_elementwise`` false), FSDP2
  ``fully_shard`` (ZeRO-3, per-parameter shards) with ``reduce_dtype=float32``
  (``mixed_precision_reduce``), ``F.scaled_dot_product_attention`` (PyTorch SDPA, FlashAttention-2 backend),
  ``F.cross_entropy``; gradient accumulation without ``set_requires_gradient_sync(False)``, so a ZeRO-2
  (``reshard_after_forward=False``) run reduce-scatters and re-gathers every micro-batch; grouped experts
  through ``torch._grouped_mm``, one kernel per GEMM (``moe_grouped_gemm: single``).
* ``llm-foundry`` (Composer + PyTorch FSDP1): FSDP ``FULL_SHARD`` with ``FlatParameter`` (ZeRO-3, ``flat``),
  ``mixed_precision: PURE`` (bf16 reduce), FlashAttention-2 (``attn_impl: flash``), eager elementwise
  kernels; ``SHARD_GRAD_OP`` (ZeRO-2) reduce-scatters and re-gathers every micro-batch and pays FSDP1's
  flat-buffer passes.
* ``deepspeed``: ZeRO-2 reduce-scatters the gradients of every micro-batch's backward
  (``stage_1_and_2.py``, ``reduce_ipg_grads`` per backward) and gathers the weights once per step;
  ``communication_data_type`` defaults to the model's dtype (bf16); FlashAttention-2; fused kernels
  are not assumed (eager PyTorch model code).
"""

from __future__ import annotations

import functools
from importlib import resources

from tierwise.errors import SpecError
from tierwise.files import load_yaml, short_repr

__all__ = ["FRAMEWORKS", "ATTENTION_KERNELS", "GRAD_REDUCE_DTYPES", "ZERO2_SYNC", "MOE_DISPATCHERS", "MOE_GROUPED_GEMMS",
           "TP_OVERLAP_FRAMEWORKS", "EP_OVERLAP_FRAMEWORKS", "OFFLOAD_FRAMEWORKS", "framework_defaults", "framework_table",
           "check_framework_table",
           "check_framework", "framework_for_text"]

FRAMEWORKS = ("megatron", "nemo", "torchtitan", "llm-foundry", "deepspeed")
ATTENTION_KERNELS = ("flash2", "sdpa", "cudnn", "flash3", "triton", "auto", "unfused")
"""Attention kernel families: FlashAttention-2 (and Triton ports), PyTorch SDPA (its FlashAttention-2
backend), cuDNN fused attention / FlashAttention-3 (FA3 runs on Hopper only: compute.yaml
``attention_kernel_generations`` refuses it elsewhere), and ``unfused``: the pre-FlashAttention
core of Megatron-LM 2021-22 (batched GEMMs and a fused masked softmax over the materialized score matrix,
priced by ``estimate/step.py:_unfused_core_times``). Priced by the compute model
(``flash3`` as the cuDNN / FA3 class, ``triton`` as FlashAttention-2). ``auto``: the accelerator
generation's default (:func:`tierwise.specs.compute.default_attention_kernel`), resolved by the estimator
and listed under ``assumed`` in its document; a plan built without a framework or a generation has it."""
GRAD_REDUCE_DTYPES = ("fp32", "bf16")
MOE_DISPATCHERS = ("alltoall", "allgather", "deepep")
"""MoE token dispatchers (Megatron-Core ``moe_token_dispatcher_type``: ``alltoall``, ``allgather``, and
``flex`` with DeepEP): they differ in the kernels one MoE layer launches (compute.yaml moe_dispatchers),
which sets the host-launch floor of the layer."""
MOE_GROUPED_GEMMS = ("per-expert", "single")
"""How the routed experts' GEMMs are launched, which sets the host launches of a MoE layer (compute.yaml
``moe_expert_launches``):

* ``per-expert``: one GEMM launch per local expert and GEMM, plus per expert weight the backward's gradient
  bookkeeping: Megatron-Core's ``--moe-grouped-gemm`` through Transformer Engine's ``GroupedLinear``
  (multi-stream cuBLASLt, one call per expert), the ``grouped_gemm`` package's default cuBLAS build (a loop
  of cuBLAS GEMMs), DeepSpeed-MoE's expert modules.
* ``single``: one kernel per GEMM over all local experts (``torch._grouped_mm`` in torchtitan's grouped
  experts, MegaBlocks' default block-sparse ``mlp_impl``, a CUTLASS grouped kernel): the launches do not
  grow with the experts."""
ZERO2_SYNC = ("per-step", "reduce-per-microbatch", "fsdp-per-microbatch")
"""What ZeRO-2 does under gradient accumulation:

* ``per-step``: Megatron-Core's distributed optimizer (and FSDP under ``no_sync()`` /
  ``set_requires_gradient_sync(False)``): one reduce-scatter of the accumulated gradients and one
  all-gather of the updated weights per step.
* ``reduce-per-microbatch``: DeepSpeed ZeRO-2: the gradients are reduce-scattered during every
  micro-batch's backward; the weights are gathered once, after the optimizer step.
* ``fsdp-per-microbatch``: FSDP ``SHARD_GRAD_OP`` (FSDP2 ``reshard_after_forward=False``) without
  ``no_sync``: every micro-batch reduce-scatters its gradients and re-gathers the weights (they are
  resharded after each backward), and pays the implementation's buffer passes (``zero3_gather``)."""

TP_OVERLAP_FRAMEWORKS = ("megatron", "nemo", "torchtitan")
"""Frameworks that can overlap TP communication with the layer's GEMMs (plan ``tp_comm_overlap``): Megatron-Core
and NeMo through Transformer Engine's userbuffers (``--tp-comm-overlap``), torchtitan through async TP
(``--parallelism.enable_async_tensor_parallel``, opt-in). llm-foundry and DeepSpeed have none, so the planner
does not offer it there."""
EP_OVERLAP_FRAMEWORKS = ("megatron", "nemo")
"""Frameworks that run Megatron-Core's combined 1F1B expert all-to-all overlap (plan ``ep_comm_overlap``:
``--overlap-moe-expert-parallel-comm`` / ``--combined-1f1b``); the planner offers it only there."""
OFFLOAD_FRAMEWORKS = ("megatron", "nemo")
"""Frameworks that run Megatron-Core's activation CPU offloading (``cpu_offloading`` /
``cpu_offloading_num_layers``, ``megatron/core/cpu_offload.py``; plan ``activation_offload_layers``); the planner
searches it only there (or with no framework named). DeepSpeed's ``cpu_checkpointing`` offloads the activation
checkpoints of a recomputing run, a different scheme, and torchtitan and llm-foundry have no counterpart that
tierwise prices."""

_HOPPER_OR_LATER = ("hopper", "blackwell", "rubin")


def check_framework(value, origin: str) -> str:
    """The framework name, lower case; anything else is a one-line error naming it and the choices."""
    text = value.lower() if isinstance(value, str) else None
    if text not in FRAMEWORKS:
        raise SpecError(f"framework={short_repr(value)} in {origin}; choose one of {', '.join(FRAMEWORKS)}")
    return text


def framework_for_text(text: str) -> str:
    """A calibration row's free-text framework column (``Megatron-LM (2021)``, ``NeMo 24.07``,
    ``torchtitan``, ``llm-foundry``, ``DeepSpeed``) as a :data:`FRAMEWORKS` name; "" when none fits.

    ``Megatron-DeepSpeed`` is ``deepspeed`` (DeepSpeed's engine runs the data parallelism); ``NeMo Automodel``
    (PyTorch FSDP2 + Transformer Engine) is ``torchtitan``, the FSDP2 framework whose data-parallel semantics
    it shares (docs/validation.md); ``Megatron-Bridge`` is ``nemo``; the Pai-Megatron-Patch, FlagScale and FlagPerf Megatron-Core rows are
    ``megatron``."""
    low = text.lower()
    if "megatron-deepspeed" in low:
        return "deepspeed"  # Megatron's model code (TP) under DeepSpeed's engine: DeepSpeed's ZeRO and gradient sync
    if "megatron-bridge" in low or "megatron bridge" in low:
        # Megatron-Bridge is NeMo 2's successor for Megatron-Core training (its performance recipes are NeMo's):
        # nemo's defaults, though "megatron" is found at the same position as "megatron-bridge"
        return "nemo"
    if "automodel" in low:
        # NeMo Automodel: PyTorch FSDP2 fully_shard data parallelism, torchtitan's semantics (per-parameter shards,
        # fp32 reduce, re-gather per micro-batch); its Transformer Engine attention and fused kernels are set by
        # the row (validate/mapping.py), not by this name
        return "torchtitan"
    found = [(low.find(key), name) for key, name in (
        ("nemo", "nemo"), ("megatron-bridge", "nemo"), ("torchtitan", "torchtitan"), ("llm-foundry", "llm-foundry"),
        ("composer", "llm-foundry"), ("mosaic", "llm-foundry"), ("deepspeed", "deepspeed"), ("megatron", "megatron"))
        if key in low]
    # the name written first is the framework ("Megatron-LM (+DeepSpeed ZeRO-3 for ZeRO rows)" is Megatron's code);
    # NeMo is named before the Megatron-Core it runs on
    return min(found)[1] if found else ""


def framework_defaults(framework: str, *, generation: str = "", moe: bool = False,
                       tp: int = 1, precision: str = "bf16") -> dict[str, tuple[object, str]]:
    """``{plan key: (value, why)}`` that ``framework`` sets when a plan does not state the key.

    The values and their sources are the table ``catalog/frameworks.yaml`` (:func:`framework_table`).
    ``generation`` is the accelerator's (``ampere``, ``hopper``, ``blackwell``; "" when unknown): the
    attention kernel family depends on it. ``moe`` and ``tp`` give the expert-TP default; ``precision``
    (``bf16`` / ``fp8``) NeMo's gradient-reduce dtype.
    """
    table = framework_table()
    if not isinstance(framework, str) or framework not in table:
        raise SpecError(f"framework={framework!r}; choose one of {', '.join(FRAMEWORKS)}")
    hopper = generation.lower() in _HOPPER_OR_LATER
    facts = {"generation": "unknown" if not generation else "hopper-or-later" if hopper else "earlier",
             "precision": str(precision).lower(), "tp_above_1": tp > 1}
    entries = dict(table[framework]["defaults"])
    if moe:
        entries.update(table[framework].get("moe", {}))
    out: dict[str, tuple[object, str]] = {}
    for key, cases in entries.items():
        case = next(c for c in cases if all(facts.get(k) == v for k, v in c.get("when", {}).items()))
        out[key] = (tp if case.get("value_from") == "tp" else case["value"], case["source"])
    return out


_WHEN = {"generation": ("unknown", "hopper-or-later", "earlier"), "precision": ("fp8", "bf16"),
         "tp_above_1": (True, False)}
_CHOICES: dict[str, tuple] = {"attention_kernel": ATTENTION_KERNELS, "grad_reduce_dtype": GRAD_REDUCE_DTYPES,
                              "zero2_sync": ZERO2_SYNC, "moe_dispatcher": MOE_DISPATCHERS,
                              "moe_grouped_gemm": MOE_GROUPED_GEMMS}
_BOOLEANS = ("fused_elementwise", "fused_cross_entropy", "tp_comm_overlap", "moe_force_balance")
_INTEGERS = ("zero_stage", "etp")
_STRINGS = ("zero3_gather",)


@functools.cache
def framework_table() -> dict[str, dict[str, dict[str, list[dict]]]]:
    """``catalog/frameworks.yaml``, checked: ``{framework: {"defaults"|"moe": {plan key: [case, ...]}}}``, every
    entry a list of cases (a single ``{value, source}`` becomes a one-case list). Cached; treat as read-only."""
    text = resources.files("tierwise.specs").joinpath("catalog", "frameworks.yaml").read_text()
    return check_framework_table(load_yaml(text, "catalog/frameworks.yaml"), "catalog/frameworks.yaml")


def check_framework_table(data, origin: str) -> dict[str, dict[str, dict[str, list[dict]]]]:
    """The framework table ``data`` normalized (see :func:`framework_table`); anything malformed is a
    :class:`SpecError` naming the entry: a framework missing or unknown, an unknown plan key or condition, a
    value outside its choices, a case without ``source``, a case list whose last case has a ``when``."""
    if not isinstance(data, dict) or not isinstance(data.get("frameworks"), dict) or not data.get("source"):
        raise SpecError(f"{origin}: expected a mapping with source and frameworks")
    names = data["frameworks"]
    if sorted(names) != sorted(FRAMEWORKS):
        raise SpecError(f"{origin}: frameworks are {', '.join(names)}; expected {', '.join(FRAMEWORKS)}")
    table: dict[str, dict[str, dict[str, list[dict]]]] = {}
    for name, sections in names.items():
        if not isinstance(sections, dict) or "defaults" not in sections or set(sections) - {"defaults", "moe"}:
            raise SpecError(f"{origin}: frameworks.{name} must have defaults (and optionally moe) only")
        table[name] = {}
        for section, keys in sections.items():
            if not isinstance(keys, dict):
                raise SpecError(f"{origin}: frameworks.{name}.{section} must be a mapping of plan keys")
            table[name][section] = {key: _check_cases(entry, key, f"{origin}: frameworks.{name}.{section}.{key}")
                                    for key, entry in keys.items()}
    return table


def _check_cases(entry, key: str, where: str) -> list[dict]:
    """One table entry as a list of cases (see :func:`check_framework_table`)."""
    cases = entry if isinstance(entry, list) else [entry]
    if not cases or any(not isinstance(c, dict) for c in cases):
        raise SpecError(f"{where}: expected {{value, source}} or a list of such cases")
    if "when" in cases[-1]:
        raise SpecError(f"{where}: the last case must have no when (the default)")
    for case in cases:
        extra = set(case) - {"when", "value", "value_from", "source"}
        if extra or not isinstance(case.get("source"), str) or not case["source"].strip():
            raise SpecError(f"{where}: each case has a value (or value_from: tp) and a source; got {sorted(case)}")
        when = case.get("when", {})
        if not isinstance(when, dict) or any(k not in _WHEN or v not in _WHEN[k] for k, v in when.items()):
            raise SpecError(f"{where}: when={when!r}; conditions are {_WHEN}")
        if "value_from" in case:
            if case["value_from"] != "tp" or key != "etp" or "value" in case:
                raise SpecError(f"{where}: value_from: tp is for etp only, without a value")
            continue
        _check_value(case.get("value"), key, where)
    return cases


def _check_value(value, key: str, where: str) -> None:
    """``value`` fits plan key ``key`` (its choices, or its type)."""
    if key in _CHOICES:
        ok = value in _CHOICES[key]
    elif key in _BOOLEANS:
        ok = isinstance(value, bool)
    elif key in _INTEGERS:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    elif key in _STRINGS:
        ok = isinstance(value, str) and bool(value)
    else:
        raise SpecError(f"{where}: {key} is not a plan switch a framework sets")
    if not ok:
        hint = f"choose one of {', '.join(_CHOICES[key])}" if key in _CHOICES else "wrong type"
        raise SpecError(f"{where}: value={value!r}; {hint}")
