"""Options and their checks shared by ``plan``, ``scale`` and ``goodput`` (one declaration each; the commands'
modules import this, not each other)."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.errors import PlanError
from tierwise.limits import MAX_BATCH, MAX_GPUS, MAX_LAYERS, MAX_SEQ, check_int

MAX_TOP = 1000
"""Plans ``plan --top`` lists at most."""
MAX_VPP = 128
"""Interleaved chunks ``plan --max-vpp`` searches at most (every value up to it is tried)."""
MAX_MBS = 1024
"""Micro-batch sizes ``plan --max-mbs`` (and ``--mbs``) take at most (every value up to it is tried)."""

ModelOpt = Annotated[str, typer.Option("--model", help="catalog name, YAML file or Hugging Face config.json")]
ClusterOpt = Annotated[str, typer.Option("--cluster", help="catalog name or YAML file")]
BatchOpt = Annotated[int, typer.Option("--global-batch", "--global-batch-size", help="global batch in sequences")]
SeqOpt = Annotated[int, typer.Option("--seq", "--seq-length", help="sequence length in tokens")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the JSON document")]
Fixed = Annotated[int | None, typer.Option(help="fix this degree")]
Bound = Annotated[int | None, typer.Option(help="upper bound on this degree")]
ListOpt = Annotated[str | None, typer.Option(help="comma-separated values allowed")]
ObjOpt = Annotated[str, typer.Option("--objective", help="step_time, tokens_per_s or mfu")]
ZeroOpt = Annotated[str | None, typer.Option("--zero", help="ZeRO stages allowed, e.g. 1,3")]
EpOverlapOpt = Annotated[bool, typer.Option(
    "--ep-overlap/--no-ep-overlap",
    help="search Megatron-Core's expert all-to-all overlap (combined 1F1B) where it applies")]
OffloadOpt = Annotated[bool, typer.Option(
    "--offload/--no-offload",
    help="search activation offload to the host (Megatron-Core cpu_offloading_num_layers): a pp 1 plan without "
         "recompute that does not fit takes the fewest offloaded layers that fit")]
FrameworkOpt = Annotated[str | None, typer.Option(
    "--framework", help="megatron, nemo, torchtitan, llm-foundry or deepspeed: every plan takes its defaults "
                        "(attention kernel, gradient-reduce dtype, ZeRO-2 semantics, MoE dispatcher and expert "
                        "GEMMs; --eager, --zero3-gather and --balanced-moe when not given) and only the overlaps "
                        "it runs are searched; listed under 'assumed'")]
Zero3Opt = Annotated[str | None, typer.Option("--zero3-gather", help="how ZeRO-3 plans are implemented: flat (FSDP1), "
                                        "per-parameter (FSDP2), tensor-list (DeepSpeed 2021) or zero-copy (Megatron-FSDP)")]
FusedCeOpt = Annotated[bool, typer.Option("--fused-ce", help="score plans with a fused cross-entropy kernel "
                                           "(Megatron-Core cross_entropy_loss_fusion, Liger)")]
BalancedMoeOpt = Annotated[bool | None, typer.Option(
    "--balanced-moe/--dropless-moe", help="score MoE plans with every expert at its mean load (forced-balanced "
                                          "routing or capacity factor 1 with padding), or with a trained router's "
                                          "dropless load (the default unless --framework nemo)")]
HtmlOpt = Annotated[str | None, typer.Option("--html", help="write a self-contained HTML report here")]
EagerOpt = Annotated[bool | None, typer.Option(
    "--eager/--fused", help="score plans as eager PyTorch (no fused kernels, no torch.compile), or with fused "
                            "kernels (the default unless --framework names an eager one)")]


def names_option(text: str | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    values = tuple(v.strip().lower() for v in text.split(",") if v.strip())
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise PlanError(f"--{what} {text!r}; choose from {', '.join(allowed)} (comma-separated)")
    return values


def zero_option(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(v not in (0, 1, 2, 3) for v in values):
        raise PlanError(f"--zero {text!r}; give ZeRO stages from 0, 1, 2, 3 (comma-separated)")
    return values


_COUNT_BOUNDS = {"gpus": MAX_GPUS, "global_batch": MAX_BATCH, "seq": MAX_SEQ, "top": MAX_TOP, "tp": MAX_GPUS,
                 "pp": MAX_LAYERS, "cp": MAX_GPUS, "ep": MAX_GPUS, "dp": MAX_GPUS, "vpp": MAX_LAYERS, "mbs": MAX_MBS,
                 "max_tp": MAX_GPUS, "max_pp": MAX_LAYERS, "max_cp": MAX_GPUS, "max_ep": MAX_GPUS,
                 "max_vpp": MAX_VPP, "max_mbs": MAX_MBS}
"""Each count option's upper bound (lower bound 1). The planner lists every vpp and micro-batch size up to
its bound, so those stay small; a plan with more than 1,024 sequences per micro-batch never fits memory."""


def check_counts(**counts: int | None) -> None:
    """Every count option given is a whole number in 1..its bound: a one-line error naming the option."""
    for key, value in counts.items():
        if value is not None:
            check_int(value, "--" + key.replace("_", "-"), maximum=_COUNT_BOUNDS[key], error=PlanError)


def constraints(**kw):
    from tierwise.planner.space import Constraints
    from tierwise.specs.plan import PRECISION, RECOMPUTE

    fields = {k: v for k, v in kw.items() if k not in ("recompute", "precision", "zero") and v is not None}
    recompute = names_option(kw["recompute"], RECOMPUTE, "recompute")
    precision = names_option(kw["precision"], PRECISION, "precision")
    zero = zero_option(kw["zero"])
    if recompute:
        fields["recompute"] = recompute
    if precision:
        fields["precision"] = precision
    if zero:
        fields["zero_stages"] = zero
    return Constraints(**fields)


def load_model_and_cluster(model: str, cluster: str):
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model

    return load_model(model), load_cluster(cluster)
