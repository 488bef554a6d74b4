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

from tierwise.errors import CatalogError, did_you_mean
from tierwise.files import load_yaml, read_user_text, short_repr

__all__ = ["KINDS", "entries", "entry", "names", "load_yaml_text", "load_yaml_file"]

KINDS = ("accelerators", "clusters", "models", "network", "parameters")


def load_yaml_text(text: str, origin: str) -> Any:
    """Parse YAML; a syntax error names the file and line; duplicate keys and anchors/aliases are refused
    (:func:`tierwise.files.load_yaml`)."""
    return load_yaml(text, origin)


def load_yaml_file(path: str | Path, what: str = "file") -> Any:
    """Read and parse a YAML (or JSON) file through :func:`tierwise.files.read_user_text`: a missing file, a
    directory, a FIFO or device, a file over 16 MiB, a file that is not UTF-8 text is a one-line
    :class:`SpecError`. ``what`` names the file's role in messages ("scenario file", "cluster file")."""
    p = Path(path)
    return load_yaml(read_user_text(p, what=what), f"{what} {str(p)!r}" if what != "file" else repr(str(p)))


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
        f"unknown {singular} {short_repr(name)}{did_you_mean(key[:100], list(table))}; "
        f"`tierwise catalog list {kind}` shows the {len(table)} known names"
    )
