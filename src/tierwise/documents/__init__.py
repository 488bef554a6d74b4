"""The JSON documents of the commands: the one place where each ``--json`` document is finished and its
JSON Schema is defined (issue 32, item 6; issue 27's "typed results -> documents" step).

Every command's ``--json`` prints one JSON object, always of the same shape for that command::

    {"schema_version": 1, "document": "estimate", ...the command's keys...}

``schema_version`` is :data:`SCHEMA_VERSION` (raised when a key is renamed or removed or changes type;
adding a key does not raise it) and ``document`` names the document, so that a reader can tell what it holds
and which schema to check it against. A command whose answer is a list (``estimate`` over several files,
``tiers``, the rows of ``measure`` and ``testbed``) puts it under one key (``results``, ``tiers``, ``rows``)
whatever its length. The schemas are built from the short specs in the modules beside this one
(:mod:`tierwise.documents._spec` explains the notation) and published in ``docs/schema/<document>.json`` by
``tools/schemas.py``; ``tests/test_documents.py`` runs every command that has ``--json`` and validates its
output against its schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tierwise.documents import fabric, serving, tools, training
from tierwise.documents._spec import to_schema

__all__ = ["SCHEMA_VERSION", "DOCUMENTS", "Document", "finish", "schema", "commands"]

SCHEMA_VERSION = 1
"""The version of every document's shape; see docs/architecture.md, "The JSON documents"."""

_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Document:
    """One JSON document: its name, the command that prints it, and the shape of its keys."""

    kind: str
    command: str
    title: str
    body: dict
    list_key: str | None = None
    """The key the command's list goes under (a command whose answer is a list); None for an object."""


DOCUMENTS: dict[str, Document] = {
    kind: Document(kind, *entry) for module in (training, serving, fabric, tools)
    for kind, entry in module.DOCUMENTS.items()
}
"""Every document by name (``document`` in the JSON)."""


def finish(kind: str, data: Any) -> dict:
    """The document ``kind`` holding ``data`` (plain JSON types): stamped with :data:`SCHEMA_VERSION` and
    its name, a list put under its key. An unknown ``kind`` is a programming error (``KeyError``)."""
    doc = DOCUMENTS[kind]
    if doc.list_key is not None:
        if not isinstance(data, list):
            raise TypeError(f"document {kind!r} finishes a list, not {type(data).__name__}")
        data = {doc.list_key: data}
    elif not isinstance(data, dict):
        raise TypeError(f"document {kind!r} finishes an object, not {type(data).__name__}")
    # a document built from another's (testbed ddp from measure ddp's) is stamped as itself
    body = {k: v for k, v in data.items() if k not in ("schema_version", "document")}
    return {"schema_version": SCHEMA_VERSION, "document": kind, **body}


def schema(kind: str) -> dict:
    """The JSON Schema of document ``kind`` (the file ``docs/schema/<kind>.json`` holds)."""
    doc = DOCUMENTS[kind]
    body = to_schema(doc.body)
    properties = {"schema_version": {"const": SCHEMA_VERSION}, "document": {"const": kind},
                  **body["properties"]}
    return {
        "$schema": _SCHEMA_DIALECT,
        "title": f"tierwise {doc.command} --json",
        "description": doc.title,
        "type": "object",
        "properties": properties,
        "required": ["schema_version", "document", *body["required"]],
    }


def commands() -> dict[str, tuple[str, ...]]:
    """Command (as typed, e.g. ``measure collective``) -> the documents it can print."""
    out: dict[str, tuple[str, ...]] = {}
    for kind, doc in DOCUMENTS.items():
        out[doc.command] = (*out.get(doc.command, ()), kind)
    return out
