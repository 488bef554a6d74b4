"""Point kinds: what one grid point runs. Pluggable: a kind is registered by name with :func:`register_kind`.

Shipped kinds:

``estimate``
    One given plan through the step-time estimator (``tierwise estimate``): model, cluster, gpus, plan.
``plan``
    The best plan at the point (``tierwise plan --top 1``): model, cluster, gpus, global_batch, seq,
    objective, constraints (the planner's :class:`~tierwise.planner.space.Constraints` fields).
``simulate``
    One flow-level simulation (``tierwise simulate``): topology, pattern, size, routing, failures, seed.

A kind declares its ``parameters`` (name -> default; ``required`` ones have no default), normalises each
value into plain JSON (the point id hashes it), checks a whole study once before any work (loads every model,
cluster, plan, topology), runs one point (``run(params, parameters)``, the model's
:class:`~tierwise.specs.parameters.Parameters` that :func:`tierwise.sweep.run.run_point` loads once per point)
into ``(columns, document)``: flat columns for SQL (declared in
``columns`` with their Arrow type) and the command's whole ``--json`` document, stored as JSON text.

Models and clusters are named as on the command line (catalog name or file). A cluster may also be a
mapping as in a scenario file: ``{base: CATALOG-NAME, name: LABEL, nic_bandwidth: 800 Gb/s, ...}`` is the
catalog cluster with those keys replaced (``nic_bandwidth``, ``scale_up_domain``, ...), named ``LABEL``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tierwise.collectives.volumes import normalize_kind
from tierwise.errors import TierwiseError, did_you_mean
from tierwise.estimate import estimate
from tierwise.estimate.scenario import Scenario, estimate_scenario, result_dict
from tierwise.limits import MAX_BATCH, MAX_BYTES, MAX_GPUS, MAX_SEQ, MAX_SIM_GPUS, check_int
from tierwise.netsim import KINDS as PATTERNS
from tierwise.netsim import Failures, simulate
from tierwise.planner.branch_and_bound import OBJECTIVES, search
from tierwise.planner.explain import plan_label
from tierwise.planner.space import Constraints
from tierwise.specs import catalog
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.sweep.errors import SweepError
from tierwise.topology import build_fabric
from tierwise.topology.spec import spec_from_mapping
from tierwise.units import parse_bytes

__all__ = ["PointKind", "register_kind", "get_kind", "KINDS", "cluster_label", "COMMON_COLUMNS"]

COMMON_COLUMNS = {"point_id": "string", "kind": "string", "study": "int64", "status": "string", "error": "string",
                  "params": "string", "result": "string", "wall_s": "float64", "finished_at": "string",
                  "tierwise_version": "string"}
"""Columns every row has. ``status`` is ``ok``, ``no_fit`` (the planner found no plan that fits memory) or
``error`` (the point's own input was refused, e.g. a plan that does not divide the GPUs: ``error`` says why)."""

REQUIRED = object()


@dataclass
class PointKind:
    """One kind of grid point (see the module doc)."""

    name: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], Parameters], tuple[dict[str, Any], dict[str, Any]]]
    columns: dict[str, str]
    normalizers: dict[str, Callable[[Any, str], Any]] = field(default_factory=dict)
    study_check: Callable[[dict[str, list], str], None] | None = None
    label: Callable[[dict[str, Any]], str] | None = None

    @property
    def required(self) -> list[str]:
        return [k for k, v in self.parameters.items() if v is REQUIRED]

    def normalize(self, name: str, value: Any, where: str) -> Any:
        if value is REQUIRED:
            raise SweepError(f"{where}: required")
        fn = self.normalizers.get(name)
        out = fn(value, where) if fn else value
        try:
            json.dumps(out)
        except (TypeError, ValueError):
            raise SweepError(f"{where}: {value!r} is not a plain YAML value") from None
        return out

    def check_study(self, values: dict[str, list], where: str) -> None:
        if self.study_check is not None:
            self.study_check(values, where)


KINDS: dict[str, PointKind] = {}


def _with_parameters(kind: PointKind) -> PointKind:
    """``kind`` with a ``run(params, parameters)``: a one-argument ``run(params)`` is wrapped to ignore the
    parameters (it prices with whatever it loads itself, as plug-ins did before)."""
    try:
        positional = [p for p in inspect.signature(kind.run).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):  # a builtin or C callable without a signature: called as declared
        return kind
    if len(positional) == 1 and positional[0].kind is not positional[0].VAR_POSITIONAL:
        one = kind.run
        return dataclasses.replace(kind, run=lambda params, parameters: one(params))
    return kind


def register_kind(kind: PointKind) -> PointKind:
    """Add (or replace) a kind; its columns must not give a column another kind declares a different type. A
    ``run`` written for one argument (``run(params)``, the plug-in signature before the model's parameters were
    passed as an argument) is kept working: it is called without them (:func:`_with_parameters`)."""
    kind = _with_parameters(kind)
    for col, typ in kind.columns.items():
        for other in KINDS.values():
            if other.name != kind.name and other.columns.get(col, typ) != typ:
                raise ValueError(f"column {col!r}: {typ} in kind {kind.name!r}, {other.columns[col]} in {other.name!r}")
        if COMMON_COLUMNS.get(col, typ) != typ:
            raise ValueError(f"column {col!r} is a common column of type {COMMON_COLUMNS[col]}")
    KINDS[kind.name] = kind
    return kind


def get_kind(name: Any, where: str) -> PointKind:
    if name is None:
        raise SweepError(f"{where}: no 'kind:'; choose one of {', '.join(KINDS)}")
    if not isinstance(name, str) or name not in KINDS:

        raise SweepError(f"{where}: unknown kind {name!r}{did_you_mean(str(name), list(KINDS))}; "
                         f"choose one of {', '.join(KINDS)}")
    return KINDS[name]


def all_columns() -> dict[str, str]:
    """Every column of every registered kind, common ones first (the Parquet schema of a part file)."""
    out = dict(COMMON_COLUMNS)
    for kind in KINDS.values():
        for col, typ in kind.columns.items():
            out.setdefault(col, typ)
    return out


# ---- normalisers and loaders -------------------------------------------------------------------------------

def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SweepError(f"{where}: {value!r}; give a name (a non-empty string)")
    return value.strip()


def _catalog_name(kind: str) -> Callable[[Any, str], str]:
    """A catalog name in the catalog's own spelling: names are matched case-insensitively when loaded, so
    ``Llama3.1-8B`` and ``llama3.1-8b`` are one point (one id, one row). A file name is kept as written."""
    def norm(value: Any, where: str) -> str:
        text = _text(value, where)
        return text.lower() if text.lower() in catalog.entries(kind) else text
    return norm


def _lower(value: Any, where: str) -> str:
    """A keyword matched without regard to case (``ECMP``, ``ecmp``): one spelling, lower case."""
    return _text(value, where).lower()


def _pattern(value: Any, where: str) -> str:
    """A collective in its canonical spelling (``allreduce``, ``all_reduce``, ``All-Reduce`` -> ``all-reduce``);
    one that is not a collective is kept for the study check to name."""
    text = _text(value, where).lower()
    if text in ("pipeline", "permutation"):
        return text
    try:
        return normalize_kind(text)
    except TierwiseError:
        return text


def _size(value: Any, where: str) -> Any:
    """A size as whole bytes (``1GB``, ``1 GB``, ``1e9``, ``1000000000`` are one point); a size that does not
    parse is kept for the study check to name."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    try:
        number = parse_bytes(value.strip() if isinstance(value, str) else value, what=where, maximum=MAX_BYTES)
    except TierwiseError:
        return str(value).strip()
    return int(number) if number.is_integer() else number


def _count(maximum: int) -> Callable[[Any, str], int]:
    def check(value: Any, where: str) -> int:
        return check_int(value, where, maximum=maximum, error=SweepError)
    return check


def _cluster_ref(value: Any, where: str) -> Any:
    """A catalog name or file (text), or a cluster mapping as in a scenario file: ``{base: dgx-h100, name: ...,
    nic_bandwidth: 800 Gb/s}`` (the catalog cluster with those keys replaced) or a whole cluster."""
    if isinstance(value, str):
        return _catalog_name("clusters")(value, where)
    if isinstance(value, dict):
        return value
    raise SweepError(f"{where}: {value!r}; give a catalog cluster, a cluster YAML file, or a mapping such as "
                     "{base: dgx-h100, name: my-cluster, nic_bandwidth: 800 Gb/s}")


@functools.lru_cache(maxsize=64)
def _model(ref: str):

    return load_model(ref)


_CLUSTERS: dict[tuple[str, str], Any] = {}
"""Loaded clusters by (reference as JSON, the parameters' fingerprint): a worker loads each once."""


def _cluster(ref: Any, parameters: Parameters):
    key = (json.dumps(ref, sort_keys=True), parameters.fingerprint)
    if key not in _CLUSTERS:
        if len(_CLUSTERS) >= 64:
            _CLUSTERS.clear()
        _CLUSTERS[key] = load_cluster(json.loads(key[0]), parameters=parameters)
    return _CLUSTERS[key]


def cluster_label(ref: Any, *, parameters: Parameters) -> str:
    """The cluster's name as results show it (a mapping's ``name``, else tierwise's name for it)."""
    return _cluster(ref, parameters).name


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise SweepError(f"{where}: {value!r}; give a mapping")
    return value


def _check_models_clusters(values: dict[str, list], where: str) -> None:
    for ref in values["model"]:
        _model(ref)
    parameters = load_parameters()  # the grid's check, before any point runs: the run's parameters
    for ref in values["cluster"]:
        _cluster(ref, parameters)


# ---- estimate ----------------------------------------------------------------------------------------------

_TRAIN_COLUMNS = {"model": "string", "cluster": "string", "num_gpus": "int64", "global_batch": "int64",
                  "seq": "int64", "plan": "string", "step_time_s": "float64", "tokens_per_s": "float64",
                  "tokens_per_s_per_gpu": "float64", "mfu": "float64", "mfu_bf16": "float64",
                  "memory_per_gpu_bytes": "float64",
                  "fits": "bool", "exposed_comm_s": "float64", "bubble_s": "float64", "compute_s": "float64"}


def _plan(params: dict[str, Any], model):

    data = dict(params["plan"])
    data.setdefault("global_batch_size", params["global_batch"])
    data.setdefault("seq_length", params["seq"])
    return plan_from_mapping(data, num_gpus=params["gpus"], origin="plan", num_layers=model.num_layers)


def _train_columns(params: dict[str, Any], doc: dict[str, Any] | None, plan, cluster) -> dict[str, Any]:
    cols = {"model": params["model"], "cluster": cluster.name, "num_gpus": params["gpus"],
            "global_batch": params["global_batch"], "seq": params["seq"]}
    if doc is not None:

        b = doc["breakdown"]
        cols.update(plan=plan_label(plan), step_time_s=doc["step_time_s"], tokens_per_s=doc["tokens_per_s"],
                    tokens_per_s_per_gpu=doc["tokens_per_s_per_gpu"], mfu=doc["mfu"], mfu_bf16=doc["mfu_bf16"],
                    memory_per_gpu_bytes=doc["memory"]["per_gpu_bytes"], fits=doc["memory"]["fits"],
                    exposed_comm_s=b["exposed_comm_s"], bubble_s=b["bubble_s"], compute_s=b["compute_s"])
    return cols


def _run_estimate(params: dict[str, Any], parameters: Parameters) -> tuple[dict[str, Any], dict[str, Any]]:
    model, cluster = _model(params["model"]), _cluster(params["cluster"], parameters)
    plan = _plan(params, model)
    validate_plan_batch(model, [plan])
    doc = estimate_scenario(Scenario(model=model, cluster=cluster, num_gpus=params["gpus"], plan=plan),
                            parameters=parameters)
    doc.pop("model_summary", None)
    return _train_columns(params, doc, plan, cluster), doc


def _check_estimate(values: dict[str, list], where: str) -> None:
    _check_models_clusters(values, where)


register_kind(PointKind(
    name="estimate",
    parameters={"model": REQUIRED, "cluster": REQUIRED, "gpus": REQUIRED, "plan": REQUIRED, "global_batch": 1024,
                "seq": 8192},
    run=_run_estimate, columns=_TRAIN_COLUMNS,
    normalizers={"model": _catalog_name("models"), "cluster": _cluster_ref, "gpus": _count(MAX_GPUS), "plan": _mapping,
                 "global_batch": _count(MAX_BATCH), "seq": _count(MAX_SEQ)},
    study_check=_check_estimate))


# ---- plan (best plan) --------------------------------------------------------------------------------------

def _constraints(data: dict[str, Any]):

    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    if "zero" in fields:
        fields["zero_stages"] = fields.pop("zero")
    try:
        return Constraints(**fields)
    except TypeError as exc:
        raise SweepError(f"constraints {data!r}: {exc}; use the planner's Constraints fields (max_tp, recompute, "
                         "zero_stages, precision, ...)") from None


def _run_plan(params: dict[str, Any], parameters: Parameters) -> tuple[dict[str, Any], dict[str, Any]]:
    model, cluster = _model(params["model"]), _cluster(params["cluster"], parameters)
    result = search(model, cluster, params["gpus"], params["global_batch"], params["seq"],
                    constraints=_constraints(params["constraints"]), objective=params["objective"], top=1, parameters=parameters)
    counts = {"num_evaluated": result.num_evaluated, "num_feasible": result.num_feasible,
              "space_size": result.space_size}
    if not len(result.plans["tp"]):
        return _train_columns(params, None, None, cluster), {"plan": None, **counts, "notes": result.notes}
    batch = result.batch()
    plan = batch.plan(0)
    doc = result_dict(estimate(model, cluster, batch, parameters=parameters), 0, plan)
    doc.update(counts)
    return _train_columns(params, doc, plan, cluster), doc


def _check_plan(values: dict[str, list], where: str) -> None:

    _check_models_clusters(values, where)
    for obj in values["objective"]:
        if obj not in OBJECTIVES:
            raise SweepError(f"{where}: objective {obj!r}; choose one of {', '.join(OBJECTIVES)}")
    for c in values["constraints"]:
        _constraints(c)


register_kind(PointKind(
    name="plan",
    parameters={"model": REQUIRED, "cluster": REQUIRED, "gpus": REQUIRED, "global_batch": 1024, "seq": 8192,
                "objective": "step_time", "constraints": {}},
    run=_run_plan, columns=_TRAIN_COLUMNS,
    normalizers={"model": _catalog_name("models"), "cluster": _cluster_ref, "gpus": _count(MAX_GPUS),
                 "global_batch": _count(MAX_BATCH), "seq": _count(MAX_SEQ), "objective": _lower,
                 "constraints": _mapping},
    study_check=_check_plan))


# ---- simulate ----------------------------------------------------------------------------------------------

def _topology_ref(value: Any, where: str) -> dict:
    if isinstance(value, str):
        return {"family": _text(value, where)}
    return _mapping(value, where)


def _spec(ref: dict):

    return spec_from_mapping(dict(ref), where="grid topology")


@functools.lru_cache(maxsize=16)
def _fabric(text: str):

    return build_fabric(_spec(json.loads(text)))


def _topology_label(ref: dict) -> str:
    family = ref.get("family", ref.get("topology", "?"))
    rest = ",".join(f"{k}={ref[k]}" for k in sorted(ref) if k not in ("family", "topology"))
    return f"{family}({rest})" if rest else str(family)


def _run_simulate(params: dict[str, Any], parameters: Parameters) -> tuple[dict[str, Any], dict[str, Any]]:
    """One simulated collective (the flow simulator takes no model parameters; ``parameters`` is the kinds'
    common signature)."""

    fab = _fabric(json.dumps(params["topology"], sort_keys=True))
    pattern = params["pattern"]
    kind = pattern if pattern in ("pipeline", "permutation") else normalize_kind(pattern)
    size = parse_bytes(params["size"], what="size", maximum=MAX_BYTES)
    doc = simulate(fab, kind, size, algorithm=params["algorithm"], num_ranks=params["ranks"],
                   routing=params["routing"], seed=params["seed"], stages=params["stages"], shift=params["shift"],
                   failures=Failures(links=params["fail_links"], switches=params["fail_switches"],
                                     domains=params["fail_domains"]))
    cols = {"topology": _topology_label(params["topology"]), "pattern": doc["pattern"], "num_gpus": fab.num_gpus,
            "size_bytes": doc["size_bytes"], "routing": doc["routing"], "algorithm": doc["algorithm"],
            "seed": params["seed"], "fail_links": str(params["fail_links"]),
            "fail_switches": str(params["fail_switches"]), "fail_domains": str(params["fail_domains"]),
            "time_s": doc["time_s"], "analytic_time_s": doc["analytic_time_s"],
            "busbw_bytes_per_s": doc["busbw_bytes_per_s"], "algbw_bytes_per_s": doc["algbw_bytes_per_s"],
            "degradation": doc.get("degradation"), "num_ranks_simulated": doc["num_ranks_simulated"]}
    return cols, doc


def _check_simulate(values: dict[str, list], where: str) -> None:

    for ref in values["topology"]:
        _spec(ref)
    for p in values["pattern"]:
        if p not in PATTERNS and p not in ("allreduce", "allgather", "reducescatter", "alltoall"):
            raise SweepError(f"{where}: pattern {p!r}; choose one of {', '.join(PATTERNS)}")
    for r in values["routing"]:
        if r not in ("ecmp", "adaptive"):
            raise SweepError(f"{where}: routing {r!r}; choose ecmp or adaptive")
    for s in values["size"]:
        parse_bytes(s, what=f"{where}: size", maximum=MAX_BYTES)


def _opt_count(maximum: int, minimum: int = 1) -> Callable[[Any, str], int | None]:
    def check(value: Any, where: str) -> int | None:
        return None if value is None else check_int(value, where, minimum=minimum, maximum=maximum, error=SweepError)
    return check


def _fail(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SweepError(f"{where}: {value!r}; give a count (12) or a percentage ('0.5%')")
    text = str(value).strip()
    percent = text.endswith("%")
    number = text[:-1].strip() if percent else text
    try:  # one spelling per number: 2, 2.0, '2', ' 2 ' are one point; '0.50%' and '0.5%' too
        x = float(number)
    except ValueError:
        return text
    if x == x and abs(x) != float("inf"):
        number = str(int(x)) if x.is_integer() else repr(x)
    return number + ("%" if percent else "")


register_kind(PointKind(
    name="simulate",
    parameters={"topology": REQUIRED, "pattern": REQUIRED, "size": "1GB", "ranks": None, "routing": "adaptive",
                "algorithm": "auto", "fail_links": "0", "fail_switches": "0", "fail_domains": "0", "seed": 1,
                "stages": 4, "shift": None},
    run=_run_simulate,
    columns={"topology": "string", "pattern": "string", "num_gpus": "int64", "size_bytes": "float64",
             "routing": "string", "algorithm": "string", "seed": "int64", "fail_links": "string",
             "fail_switches": "string", "fail_domains": "string", "time_s": "float64", "analytic_time_s": "float64",
             "busbw_bytes_per_s": "float64", "algbw_bytes_per_s": "float64", "degradation": "float64",
             "num_ranks_simulated": "int64"},
    normalizers={"topology": _topology_ref, "pattern": _pattern, "size": _size,
                 "ranks": _opt_count(MAX_SIM_GPUS, 2), "routing": _lower, "algorithm": _lower,
                 "fail_links": _fail, "fail_switches": _fail, "fail_domains": _fail,
                 "seed": _opt_count(2**32 - 1, 0), "stages": _opt_count(MAX_SIM_GPUS, 2),
                 "shift": lambda v, w: None if v is None else check_int(v, w, minimum=-MAX_SIM_GPUS,
                                                                         maximum=MAX_SIM_GPUS, error=SweepError)},
    study_check=_check_simulate))
