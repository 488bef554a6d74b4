"""A sweep's grid: the YAML file, its expansion into points, stable point ids, and shards.

A grid is one *study* or a list of them under ``studies:``. A study names its point ``kind`` (see
:mod:`tierwise.sweep.kinds`: ``estimate``, ``plan`` = best plan, ``simulate``; more kinds register
themselves) and gives every parameter either as one value or as a YAML list; the study's points are the
Cartesian product of its lists (a list-valued parameter such as a plan mapping is given as a list of
mappings). Example::

    studies:
      - kind: plan                        # the best plan at each point
        model: [llama3.1-8b, llama3.1-70b]
        cluster: [dgx-h100, {base: dgx-h100, name: h100-ndr800, nic_bandwidth: 800 Gb/s}]
        gpus: [64, 128, 256]
      - kind: simulate
        pattern: [all-reduce, all-to-all]
        topology: [{family: fat-tree, gpus: 256}, {family: dragonfly, gpus: 256}]
        size: 1GB

A point is the canonical JSON of ``{"kind": ..., <every parameter, defaults filled>}`` (keys sorted, no
whitespace); its id is the first 16 hex digits of that text's SHA-256. The same grid therefore gives the
same ids on every run and every machine, which is what lets a rerun skip the points already written and a
shard ``i/N`` take a fixed subset: the points whose ``int(id, 16) % N == i - 1`` (hashing spreads the slow
points over the shards instead of handing one shard a whole slow study).

Every parameter is checked (and every model, cluster, plan and topology loaded once) before any point runs:
a bad grid is one :class:`SweepError` line naming the study, the key and the value.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from tierwise.errors import did_you_mean
from tierwise.files import load_yaml, read_user_text, require_document
from tierwise.limits import MAX_GPUS, check_int
from tierwise.sweep.errors import SweepError
from tierwise.sweep.kinds import get_kind

__all__ = ["SweepError", "Point", "load_grid", "grid_from_mapping", "parse_shard", "shard_points", "point_id",
           "MAX_POINTS"]

MAX_POINTS = 1_000_000
"""Points one grid may expand to: a million rows of results is far past what one sweep directory serves well."""


@dataclass(frozen=True)
class Point:
    """One grid point: its ``kind``, its parameters (defaults filled), and its stable id."""

    id: str
    kind: str
    params: dict[str, Any]
    study: int

    def canonical(self) -> str:
        return canonical_json({"kind": self.kind, **self.params})


def canonical_json(value: Any) -> str:
    """Keys sorted, no whitespace, non-ASCII kept: the text a point id hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def point_id(kind: str, params: dict[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of the point's canonical JSON (64 bits: no collision in 10^6 points
    short of ~3e-8 probability, the birthday bound n^2 / 2^65)."""
    return hashlib.sha256(canonical_json({"kind": kind, **params}).encode("utf-8")).hexdigest()[:16]


def load_grid(path: str) -> list[Point]:
    """Read and expand a grid YAML file (through :mod:`tierwise.files`): every point, checked."""

    text = read_user_text(path, what="grid file", error=SweepError)
    data = require_document(load_yaml(text, f"grid file {path!r}", error=SweepError), f"grid file {path!r}",
                            "give 'kind:' and the parameters of one study, or 'studies:' with a list of them",
                            error=SweepError)
    return grid_from_mapping(data, origin=f"grid file {path!r}")


def grid_from_mapping(data: dict[str, Any], origin: str = "grid") -> list[Point]:
    """Expand a grid mapping into checked points, in grid order, without duplicates."""

    if "studies" in data:
        extra = sorted(set(data) - {"studies", "name", "description"})
        if extra:
            raise SweepError(f"{origin}: unknown top-level key {extra[0]!r}; a grid with 'studies:' takes only "
                             "name, description and studies")
        studies = data["studies"]
        if not isinstance(studies, list) or not studies:
            raise SweepError(f"{origin}: 'studies' must be a non-empty list of studies (mappings with 'kind:')")
    else:
        studies = [{k: v for k, v in data.items() if k not in ("name", "description")}]
    points: list[Point] = []
    seen: set[str] = set()
    for number, study in enumerate(studies, 1):
        where = f"{origin}: study {number}"
        if not isinstance(study, dict):
            raise SweepError(f"{where} is a {type(study).__name__}; give a mapping with 'kind:' and parameters")
        kind = get_kind(study.get("kind"), where)
        axes = {k: v for k, v in study.items() if k != "kind"}
        unknown = sorted(set(axes) - set(kind.parameters))
        if unknown:

            raise SweepError(f"{where}: unknown key {unknown[0]!r} for kind {kind.name!r}"
                             f"{did_you_mean(unknown[0], list(kind.parameters))}; "
                             f"keys: {', '.join(kind.parameters)}")
        missing = [k for k in kind.required if k not in axes]
        if missing:
            raise SweepError(f"{where}: kind {kind.name!r} needs {missing[0]!r}")
        names = list(kind.parameters)
        values = []
        for name in names:
            raw = axes.get(name, kind.parameters[name])
            vals = raw if isinstance(raw, list) else [raw]
            if not vals:
                raise SweepError(f"{where}: {name!r} is an empty list; give at least one value")
            values.append([kind.normalize(name, v, f"{where}: {name}") for v in vals])
        total = 1
        for v in values:
            total *= len(v)
        if total + len(points) > MAX_POINTS:
            raise SweepError(f"{where} expands to {total:,} points; a grid takes at most {MAX_POINTS:,} "
                             "(split it into several grids)")
        kind.check_study(dict(zip(names, values, strict=True)), where)
        for combo in itertools.product(*values):
            params = dict(zip(names, combo, strict=True))
            pid = point_id(kind.name, params)
            if pid in seen:
                continue
            seen.add(pid)
            points.append(Point(id=pid, kind=kind.name, params=params, study=number))
    return points


_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"i/N"`` (1 <= i <= N) -> ``(i, N)``; ``None`` -> ``(1, 1)``. Slurm: ``--shard $((SLURM_ARRAY_TASK_ID+1))/N``."""
    if text is None:
        return 1, 1
    m = _SHARD.match(str(text))
    if not m:
        raise SweepError(f"--shard {text!r}; give i/N with 1 <= i <= N, e.g. --shard 3/8")
    i, n = int(m.group(1)), int(m.group(2))
    check_int(n, "--shard N", maximum=MAX_GPUS, error=SweepError)
    if not 1 <= i <= n:
        raise SweepError(f"--shard {text!r}: shard {i} of {n} does not exist; give i/N with 1 <= i <= N")
    return i, n


def shard_points(points: list[Point], shard: tuple[int, int]) -> list[Point]:
    """The points of shard ``i/N``: ``int(id, 16) % N == i - 1`` (every point in exactly one shard)."""
    i, n = shard
    return points if n == 1 else [p for p in points if int(p.id, 16) % n == i - 1]
