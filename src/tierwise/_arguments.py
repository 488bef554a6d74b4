"""Argument checks for the Python API exported from ``tierwise`` (issue 32, misuse of the API).

A notebook user who passes a model's name where a model is expected, a string where a count is, or a plan
where a batch of plans is, gets a :class:`~tierwise.errors.TierwiseError` naming the argument, what it got
and how to make the right thing (as the CLI names a flag), never an ``AttributeError`` or ``TypeError`` from
deep inside the model.

:func:`checked` wraps an exported function; the checks are chosen by *parameter name* (``model``,
``cluster``, ``plans``, ``num_gpus``, ...), so every exported function taking a ``model`` checks it the
same way. Types are recognised by class name and module without importing them: a value can only be an
instance of a class whose module is already loaded, so this module imports nothing above ``limits``.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tierwise.errors import TierwiseError
from tierwise.files import describe_type, short_repr
from tierwise.limits import MAX_BATCH, MAX_BYTES, MAX_GPUS, MAX_SEQ, check_int

__all__ = ["checked", "check_arguments"]

_TYPES: dict[str, tuple[str, str, str]] = {
    # parameter: (module, class, how to make one)
    "model": ("tierwise.specs.model", "ModelSpec", "tierwise.load_model('llama3.1-8b')"),
    "cluster": ("tierwise.specs.cluster", "Cluster", "tierwise.load_cluster('dgx-h100')"),
    "plans": ("tierwise.specs.plan", "PlanBatch", "tierwise.PlanBatch.from_plans([plan])"),
    "plan": ("tierwise.specs.plan", "Plan", "tierwise.plan_from_mapping({'tp': 8, ...}, num_gpus=8)"),
    "span": ("tierwise.hierarchy", "GroupSpan", "tierwise.group_span(cluster, size, stride)"),
    "shape": ("tierwise.workload.flops", "ModelShape", "tierwise.workload.flops.ModelShape.of(model)"),
}
_OPTIONAL_TYPES: dict[str, tuple[str, str, str]] = {
    "constraints": ("tierwise.planner.space", "Constraints", "tierwise.Constraints(tp=8)"),
    "levers": ("tierwise.estimate.levers", "Levers", "tierwise.Levers(reduce_dtype='bf16')"),
    "opts": ("tierwise.goodput.model", "GoodputOptions", "tierwise.GoodputOptions(days=30)"),
    "parameters": ("tierwise.specs.parameters", "Parameters",
                   "tierwise.specs.parameters.load_parameters() (or parameters_file(path))"),
}
_COUNTS: dict[str, int] = {
    # parameter: its maximum (the CLI's bound for the same number)
    "num_gpus": MAX_GPUS, "size": MAX_GPUS, "stride": MAX_GPUS, "outer_size": MAX_GPUS, "outer_stride": MAX_GPUS,
    "gpus_per_process": MAX_GPUS, "top": 100_000, "global_batch_size": MAX_BATCH, "global_batch": MAX_BATCH,
    "seq_length": MAX_SEQ, "seq": MAX_SEQ,
}
_OPTIONAL_COUNTS = {"outer_size", "outer_stride"}
_TEXT = {"kind", "algorithm", "objective", "origin", "plan_source"}
_CONSTRAINT_COUNTS = ("tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch_size", "max_tp", "max_pp", "max_cp", "max_ep",
                      "min_ep", "max_vpp", "max_micro_batch_size", "min_cp_tokens")


def _is_instance(value: Any, module: str, cls: str) -> bool:
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(value, getattr(loaded, cls))


def _got(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {short_repr(value, 40)}"
    return describe_type(value)


def _check_one(func: str, name: str, value: Any) -> None:
    where = f"{func}({name}=...)"
    if name in _TYPES:
        module, cls, make = _TYPES[name]
        if not _is_instance(value, module, cls):
            raise TierwiseError(f"{where}: {name} must be a {cls}, not {_got(value)}; make one with {make}")
    elif name in _OPTIONAL_TYPES:
        module, cls, make = _OPTIONAL_TYPES[name]
        if value is not None and not _is_instance(value, module, cls):
            raise TierwiseError(f"{where}: {name} must be a {cls} or None, not {_got(value)}; e.g. {make}")
        if name == "constraints" and value is not None:
            for field in _CONSTRAINT_COUNTS:
                v = getattr(value, field, None)
                if v is not None:
                    check_int(v, f"Constraints({field}=...)", minimum=0 if field == "min_ep" else 1,
                              maximum=MAX_GPUS, error=TierwiseError)
    elif name in _COUNTS:
        if value is None and name in _OPTIONAL_COUNTS:
            return
        check_int(value, name, maximum=_COUNTS[name], error=TierwiseError, where=f"in {func}()")
    elif name == "size_bytes":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TierwiseError(f"{where}: size_bytes must be a number of bytes, not {_got(value)}; e.g. 2**30 "
                                "(tierwise.units.parse_bytes('1 GiB') turns text into bytes)")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not (math.isfinite(number) and 0 <= number <= MAX_BYTES):
            raise TierwiseError(f"{where}: size_bytes {short_repr(value, 40)} is out of range; use "
                                f"0 <= size_bytes <= {MAX_BYTES:,} (1 PiB)")
    elif name in _TEXT:
        if not isinstance(value, str):
            raise TierwiseError(f"{where}: {name} must be a string, not {_got(value)}")
    elif name in ("params", "prices", "network") and value is not None and not isinstance(value, Mapping):
        raise TierwiseError(f"{where}: {name} must be a mapping (a dict) or None, not {_got(value)}")
    elif name == "tokens_per_s" and (isinstance(value, bool) or not isinstance(value, int | float)
                                     or not _positive(value)):
        raise TierwiseError(f"{where}: tokens_per_s must be a positive number, not {short_repr(value, 40)}")


def _positive(value: int | float) -> bool:
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:
        return False


def check_arguments(func: str, signature: inspect.Signature, args: tuple, kwargs: dict) -> None:
    """Check the arguments of one call of the exported ``func`` (raises :class:`TierwiseError`).

    A call that does not bind (a missing or unknown argument) is left to Python's own ``TypeError``, which
    already names the argument.
    """
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return
    for name, value in bound.arguments.items():
        _check_one(func, name, value)
    _check_gpu_count(func, bound.arguments)
    _check_plans_fit_model(func, bound.arguments)


def _check_plans_fit_model(func: str, arguments: Mapping[str, Any]) -> None:
    """A ``plan`` or ``plans`` given beside a ``model`` must be a plan of that model (tp dividing its heads, pp at
    most its layers, ...: :func:`tierwise.specs.plan.validate_plan_batch`, the rules ``estimate`` applies to a
    scenario); the estimator itself trusts its input, so a notebook's mismatch would be priced silently."""
    model = arguments.get("model")
    plan_module = sys.modules.get("tierwise.specs.plan")  # loaded: a Plan or PlanBatch exists only then
    if model is None or plan_module is None:
        return
    if arguments.get("plan") is not None:
        plan, where = arguments["plan"], "plan"
    elif arguments.get("plans") is not None:
        plans = arguments["plans"]
        ok = plan_module.valid_plan_mask(model, plans)
        if ok.all():
            return
        first = int((~ok).nonzero()[0][0])
        plan, where = plans.plan(first), f"plans[{first}]"
    else:
        return
    try:
        plan_module.validate_plan_batch(model, [plan])
    except TierwiseError as exc:
        raise TierwiseError(f"{func}({where}=...): {exc} (model {model.name})") from None


def _check_gpu_count(func: str, arguments: Mapping[str, Any]) -> None:
    """A ``num_gpus`` given beside a ``plan`` (or ``plans``) must be the plan's own tp x pp x cp x dp: the GPU
    count prices the cluster (fault domains, nodes, cost) while the plan prices the step, so a mismatch
    would answer for two different jobs at once."""
    n = arguments.get("num_gpus")
    if n is None:
        return
    for name in ("plan", "plans"):
        value = arguments.get(name)
        if value is None:
            continue
        used = value.tp * value.pp * value.cp * value.dp  # an int for a Plan, an array for a PlanBatch
        bad = next((int(c) for c in ([used] if name == "plan" else used.tolist()) if int(c) != n), None)
        if bad is not None:
            raise TierwiseError(
                f"{func}(num_gpus=...): num_gpus={n} but the {name} uses tp x pp x cp x dp = {bad} GPUs; pass "
                f"num_gpus={bad}, or make the plan for {n} GPUs (tierwise.plan_from_mapping({{...}}, num_gpus={n}))")


def checked(name: str, fn: Callable) -> Callable:
    """``fn`` with its arguments checked first (:func:`check_arguments`); classes are returned unchanged."""
    if isinstance(fn, type) or not callable(fn):
        return fn
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        check_arguments(name, signature, args, kwargs)
        return fn(*args, **kwargs)

    return wrapper
