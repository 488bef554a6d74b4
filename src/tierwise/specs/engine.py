"""What each serving engine does on the host per step: the one place that knows it (the serving counterpart of
:mod:`tierwise.specs.framework`).

A serving deployment names its ``engine`` (``--engine NAME[@VERSION]``); :func:`engine_spec` gives the
engine's per-step host work, which :func:`tierwise.pricing.engine.engine_host_time` prices:

* **launches**: with CUDA graphs (captured decode batches) a step replays one graph, ``graph_replay_s``; eager
  engines launch every kernel of every layer from Python, ``eager_launch_s`` each (the host runs ahead of the
  GPU, so eager launches cost only where they outrun it);
* **scheduler and input preparation**: ``step_s`` per step plus ``per_seq_s`` per running sequence (batch
  assembly, block tables, sampling and output processing -- Python objects per sequence in vLLM < 0.8 and in
  TensorRT-LLM's PyTorch backend);
* **overlap**: engines that prepare step ``n+1`` while the GPU runs step ``n`` (vLLM V1 async scheduling,
  SGLang's overlap scheduler, TensorRT-LLM's executor) expose only the host time the GPU step does not cover.

The catalog is data, ``catalog/engines.yaml`` (beside the other catalogs), loaded and validated here once:
every value carries its source there; where a value is set by a serving-set row (docs/serving.md, "The engine
as a part") the row says so. No value is fitted per row: one value per engine version.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from importlib import resources

from tierwise.errors import ScenarioError
from tierwise.files import short_repr
from tierwise.specs import catalog

__all__ = ["EngineSpec", "ENGINES", "DEFAULT_ENGINE", "engine_spec", "engine_names", "engine_for_software",
           "parse_engine_catalog"]


_FIELDS = {"cuda_graphs": bool, "step_s": float, "per_seq_s": float, "overlap": bool, "source": str,
           "graph_replay_s": float, "eager_launch_s": float}
_REQUIRED = ("cuda_graphs", "step_s", "per_seq_s", "overlap", "source")


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """One engine version's host work per step (module docstring; field meanings in ``catalog/engines.yaml``)."""

    name: str
    version: str
    cuda_graphs: bool
    """Decode steps replay a captured CUDA graph (one launch per step) instead of launching every kernel."""
    graph_replay_s: float
    """Host time of one ``cudaGraphLaunch`` of a whole decoder (the catalog's ``graph_replay_source``)."""
    eager_launch_s: float
    """Host time per kernel launched from Python in eager mode (the catalog's ``eager_launch_source``)."""
    step_s: float
    """Serial host time per step: scheduling, input preparation, sampling set-up, output processing."""
    per_seq_s: float
    """Host time per running sequence per step."""
    overlap: bool
    """The host work of the next step runs while the GPU executes this one."""
    source: str

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"


def _bad(where: str, what: str) -> AssertionError:
    return AssertionError(f"catalog/engines.yaml {where}: {what}")


def _entry(name: str, version: str, raw, defaults: dict) -> EngineSpec:
    """One validated catalog entry: every required field present, of its type, times finite and >= 0 (seconds),
    a non-empty source, no field the catalog does not define."""
    where = f"engines.{name}.{version}"
    if not isinstance(raw, dict):
        raise _bad(where, "must be a mapping")
    unknown = sorted(set(raw) - set(_FIELDS))
    missing = [k for k in _REQUIRED if k not in raw]
    if unknown or missing:
        raise _bad(where, f"unknown field(s) {unknown}, missing {missing}")
    vals = {**defaults, **raw}
    for key, kind in _FIELDS.items():
        v = vals[key]
        if kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise _bad(where, f"{key} {v!r} must be a number of seconds >= 0")
            vals[key] = float(v)
        elif not isinstance(v, kind) or (kind is str and not v.strip()):
            raise _bad(where, f"{key} {v!r} must be a {kind.__name__}" + (" (non-empty)" if kind is str else ""))
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise _bad(where, "the version must be a dotted number")
    return EngineSpec(name=name, version=version, **vals)


def parse_engine_catalog(text: str) -> tuple[dict[tuple[str, str], EngineSpec], str, tuple[tuple[str, str], ...]]:
    """The text of ``catalog/engines.yaml`` -> (the catalog by (name, version), the default engine, the software
    matches), validated (:func:`_entry`; the default and every software match must name a catalog engine): a
    broken catalog fails at import with the entry and field named."""
    data = catalog.load_yaml_text(text, "catalog/engines.yaml")
    if not isinstance(data, dict) or not isinstance(data.get("engines"), dict):
        raise _bad("top level", "must be a mapping with an 'engines' mapping")
    for key in ("graph_replay", "eager_launch", "default"):
        if not str(data.get(f"{key}_source", "")).strip():
            raise _bad(key, f"needs its {key}_source")
    defaults = {"graph_replay_s": data.get("graph_replay_s"), "eager_launch_s": data.get("eager_launch_s")}
    table = {(str(n), str(v)): _entry(str(n), str(v), raw, defaults)
             for n, versions in data["engines"].items() for v, raw in (versions or {}).items()}
    labels = {e.label for e in table.values()}
    software = data.get("software") or {}
    if not str(software.get("source", "")).strip():
        raise _bad("software", "needs its source")
    matches = tuple((str(k).lower(), str(e)) for k, e in software.get("match", []))
    for label in [data.get("default"), *(e for _, e in matches)]:
        if label not in labels:
            raise _bad("default/software", f"{label!r} is not a catalog engine ({sorted(labels)})")
    return table, str(data["default"]), matches


ENGINES, DEFAULT_ENGINE, _SOFTWARE = parse_engine_catalog(
    resources.files("tierwise.specs").joinpath("catalog", "engines.yaml").read_text())
"""The catalog: (name, version) -> its host work (sources in each entry's ``source``); the engine assumed when
none is stated (listed under ``assumed``); a serving row's software column -> its engine (first match)."""
LATEST = {n: max((v for m, v in ENGINES if m == n), key=lambda v: tuple(int(p) for p in v.split(".")))
          for n, _ in ENGINES}
"""The version a bare engine name means: its highest catalog version."""


def engine_names() -> list[str]:
    """Every ``name@version`` the catalog knows."""
    return [f"{n}@{v}" for n, v in ENGINES]


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def engine_spec(text: str) -> EngineSpec:
    """``NAME`` (its latest version) or ``NAME@VERSION`` -> the catalog entry. A version the catalog does not
    list exactly is the latest catalog version at or below it (``vllm@0.6.3`` -> ``vllm@0.6``); one below every
    catalog version, or an unknown name, is refused with one line listing those known."""
    raw = str(text).strip().lower()
    name, _, version = raw.partition("@")
    name = {"tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm"}.get(name, name)
    if name not in LATEST:
        raise ScenarioError(f"--engine {short_repr(text)} is not a known engine; use one of {', '.join(engine_names())}")
    if not version:
        return ENGINES[(name, LATEST[name])]
    version = version.lstrip("v")
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise ScenarioError(f"--engine {short_repr(text)}: version {short_repr(version)} is not a version number; "
                            f"use one of {', '.join(engine_names())}")
    have = sorted((v for n, v in ENGINES if n == name), key=_version_key)
    below = [v for v in have if _version_key(v) <= _version_key(version)]
    if not below:
        raise ScenarioError(f"--engine {short_repr(text)}: no catalog entry at or below {version}; use one of "
                            f"{', '.join(engine_names())}")
    return ENGINES[(name, below[-1])]


def engine_for_software(text: str) -> str | None:
    """The catalog engine a serving row's ``software`` column names (None when it names none)."""
    low = text.lower()
    for key, name in _SOFTWARE:
        if key in low:
            return name
    return None
