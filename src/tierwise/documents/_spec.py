"""A short notation for the documents' JSON Schemas, and its translation into JSON Schema (draft 2020-12).

A document's body is written as a Python literal, one line per key, so that a reader sees the document's
shape at a glance and a schema cannot drift from a second copy:

- ``"str"``, ``"num"`` (any JSON number), ``"int"``, ``"bool"``: a value of that type; ``"num?"`` also
  allows ``null`` (a figure that does not exist for this answer, or a non-finite one: NaN and infinity are
  written as ``null``); ``"str|num"``: either type; ``"any"``: any value.
- ``"obj"``: an object whose keys are not fixed (a table keyed by tier, source or part); ``"list"``: any
  array; ``"list[num]"``: an array of that type.
- ``{"key": spec, "?optional": spec}``: an object that must hold every key without ``?`` (a key with ``?``
  appears only with some options); other keys are allowed, so that adding a key is not a breaking change.
- ``[spec]``: an array whose items follow ``spec``; ``("anyof", spec, spec, ...)``: one of several shapes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["to_schema"]

_TYPES = {"str": "string", "num": "number", "int": "integer", "bool": "boolean", "obj": "object",
          "list": "array", "null": "null"}


def _scalar(spec: str) -> dict[str, Any]:
    nullable = spec.endswith("?")
    spec = spec.removesuffix("?")
    if spec == "any":
        return {}
    if spec.startswith("list[") and spec.endswith("]"):
        out: dict[str, Any] = {"type": "array", "items": _scalar(spec[5:-1])}
    else:
        types = [_TYPES[t] for t in spec.split("|")]
        out = {"type": types[0] if len(types) == 1 else types}
    if nullable:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    return out


def to_schema(spec: Any) -> dict[str, Any]:
    """The JSON Schema of ``spec`` written in the notation above (a ``ValueError`` for a bad spec)."""
    if isinstance(spec, str):
        return _scalar(spec)
    if isinstance(spec, list):
        if len(spec) != 1:
            raise ValueError(f"an array spec holds one item spec, not {len(spec)}")
        return {"type": "array", "items": to_schema(spec[0])}
    if isinstance(spec, tuple) and spec and spec[0] == "anyof":
        return {"anyOf": [to_schema(s) for s in spec[1:]]}
    if isinstance(spec, dict):
        properties = {key.removeprefix("?"): to_schema(sub) for key, sub in spec.items()}
        required = [key for key in spec if not key.startswith("?")]
        return {"type": "object", "properties": properties, "required": required}
    raise ValueError(f"not a document spec: {spec!r}")
