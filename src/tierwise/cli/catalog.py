"""``tierwise catalog list [KIND] | show NAME``: what the package ships, with sources."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit, kv_table, print_table

KINDS = ("accelerators", "clusters", "models", "network")


def _list(kind: str | None) -> dict:
    from tierwise.errors import SpecError
    from tierwise.specs import catalog

    if kind is not None and kind not in KINDS:
        raise SpecError(f"unknown catalog kind {kind!r}; choose one of {', '.join(KINDS)}")
    kinds = (kind,) if kind else KINDS
    out = {}
    for k in kinds:
        out[k] = [{"name": name, "display_name": str(entry.get("display_name", entry.get("name", name))),
                   "source": str(entry.get("source", ""))} for name, entry in sorted(catalog.entries(k).items())]
    return out


def _find(name: str) -> tuple[str, dict]:
    from tierwise.errors import CatalogError, did_you_mean
    from tierwise.specs import catalog

    key = name.strip().lower()
    for kind in KINDS:
        if key in catalog.entries(kind):
            return kind, catalog.entries(kind)[key]
    every = [n for k in KINDS for n in catalog.entries(k)]
    raise CatalogError(f"unknown catalog name {name!r}{did_you_mean(key, every)}; `tierwise catalog list` shows them all")


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Accelerators, clusters, models and network parts shipped with their sources.",
                        no_args_is_help=True)

    @group.command("list")
    def list_(kind: Annotated[str | None, typer.Argument(help="accelerators | clusters | models | network")] = None,
              as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        """List catalog entries (all kinds, or one)."""
        data = _list(kind)

        def render(console):
            from rich.table import Table

            for k, rows in data.items():
                table = Table(title=k, show_lines=False)
                table.add_column("name", style="bold")
                table.add_column("description")
                table.add_column("source", overflow="fold", max_width=70)
                for row in rows:
                    table.add_row(row["name"], row["display_name"], row["source"])
                print_table(console, table)

        emit(data, as_json, render, document="catalog-list")

    @group.command("show")
    def show(name: Annotated[str, typer.Argument(help="a catalog name, e.g. h100-sxm, dgx-h100, llama3.1-70b")],
             as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        """Show one entry with every value and its source."""
        kind, entry = _find(name)
        data = {"kind": kind, "name": name.strip().lower(), **entry}

        def render(console):
            table = kv_table(f"{data['name']} ({kind})", value_overflow="fold")
            for key, value in entry.items():
                table.add_row(key, str(value))
            print_table(console, table)

        emit(data, as_json, render, document="catalog-show")

    app.add_typer(group, name="catalog")
