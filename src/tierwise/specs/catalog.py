"""The shipped catalog: YAML files in ``specs/catalog/``, one per kind, every entry with a ``source``.

Kinds: ``accelerators``, ``clusters``, ``models``, ``network`` (links, NICs, switches, optics), and
``parameters`` (the global, fitted efficiency parameters of the performance model).

This module only finds and reads entries; turning a mapping into a typed spec is each spec module's job.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from tierwise.errors import CatalogError, SpecError, did_you_mean

__all__ = ["KINDS", "entries", "entry", "names", "load_yaml_text", "load_yaml_file"]

KINDS = ("accelerators", "clusters", "models", "network", "parameters")


def load_yaml_text(text: str, origin: str) -> Any:
    """Parse YAML; a syntax error names the file and line."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's safe loader: ~10x faster start-up
    try:
        return yaml.load(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{origin}, line {mark.line + 1}, column {mark.column + 1}" if mark else origin
        raise SpecError(f"malformed YAML in {where}: {exc.problem}; fix the syntax there") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"malformed YAML in {origin}: {exc}") from None


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML (or JSON) file; a missing file is a clear error."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise SpecError(f"file {str(p)!r} does not exist; check the path") from None
    except IsADirectoryError:
        raise SpecError(f"{str(p)!r} is a directory, not a YAML file") from None
    except OSError as exc:
        raise SpecError(f"cannot read {str(p)!r}: {exc.strerror}") from None
    return load_yaml_text(text, str(p))


@functools.cache
def entries(kind: str) -> dict[str, dict[str, Any]]:
    """All raw entries of one catalog kind, by name (cached; treat as read-only)."""
    if kind not in KINDS:
        raise ValueError(kind)
    text = resources.files("tierwise.specs").joinpath("catalog", f"{kind}.yaml").read_text()
    data = load_yaml_text(text, f"catalog/{kind}.yaml") or {}
    if not isinstance(data, dict):
        raise AssertionError(f"catalog/{kind}.yaml must be a mapping")
    return data


def names(kind: str) -> list[str]:
    """Sorted catalog names of one kind."""
    return sorted(entries(kind))


def entry(kind: str, name: str) -> dict[str, Any]:
    """One raw entry; an unknown name raises :class:`CatalogError` with did-you-mean suggestions."""
    table = entries(kind)
    key = name.strip().lower()
    if key in table:
        return table[key]
    singular = kind[:-1] if kind.endswith("s") else kind
    raise CatalogError(
        f"unknown {singular} {name!r}{did_you_mean(key, list(table))}; "
        f"`tierwise catalog list {kind}` shows the {len(table)} known names"
    )
