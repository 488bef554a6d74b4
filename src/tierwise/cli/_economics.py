"""Options and rendering shared by the commands that report cost and energy (``estimate``, ``plan``, ``design``,
``trend``) and the communication levers (``estimate``, ``plan``). The library functions are
:func:`tierwise.design.cost.economics` and :class:`tierwise.estimate.levers.Levers`."""

from __future__ import annotations

from typing import Annotated

import typer

TokensOpt = Annotated[float | None, typer.Option("--tokens", help="tokens to train on: adds time, cost and energy "
                                                 "to train")]
PricesOpt = Annotated[str | None, typer.Option("--prices", help="price/power YAML overriding the shipped "
                                               "topology/prices.yaml (server, rack, network, kWh, PUE, life)")]
ReduceDtypeOpt = Annotated[str | None, typer.Option("--reduce-dtype", help="gradient reduction dtype: fp32 | bf16 | "
                                                    "fp8 (default the cluster's grad_bytes, fp32)")]
PowerSgdOpt = Annotated[int, typer.Option("--powersgd-rank", help="PowerSGD gradient compression of rank r (0 off)")]
OneBitOpt = Annotated[bool, typer.Option("--onebit", help="1-bit Adam-style sign compression of DP traffic")]
SyncEveryOpt = Annotated[int, typer.Option("--sync-every", help="local SGD / DiLoCo: average replicas every H steps")]
StalenessOpt = Annotated[int, typer.Option("--async-staleness", help="asynchronous DP: gradients up to s steps "
                                           "stale (0 synchronous)")]


def make_levers(reduce_dtype, powersgd_rank, onebit, sync_every, async_staleness):
    """Validated :class:`~tierwise.estimate.levers.Levers` from the CLI flags (one-line errors)."""
    from tierwise.errors import SpecError
    from tierwise.estimate.levers import Levers
    from tierwise.limits import check_int

    rank = check_int(powersgd_rank, "--powersgd-rank", minimum=0, maximum=4096, error=SpecError)
    h = check_int(sync_every, "--sync-every", minimum=1, maximum=1_000_000, error=SpecError)
    s = check_int(async_staleness, "--async-staleness", minimum=0, maximum=1000, error=SpecError)
    return Levers(reduce_dtype=reduce_dtype.lower() if reduce_dtype else None, powersgd_rank=rank,
                  onebit=bool(onebit), sync_every=h, async_staleness=s)


def load_prices_checked(path):
    from tierwise.topology.costs import load_prices

    return load_prices(path)


def economics_block(tokens_per_s, cluster, num_gpus, *, tokens=None, prices=None, overrides=None) -> dict:
    """:func:`tierwise.design.cost.economics` for a command's document (``overrides``: the fabric flags)."""
    from tierwise.design.cost import economics

    return economics(tokens_per_s, cluster, num_gpus, prices, tokens=tokens, overrides=overrides)


def _usd(x: float) -> str:
    return f"${x / 1e6:,.1f}M" if x >= 1e6 else f"${x:,.0f}"


def render_economics(console, e: dict | None) -> None:
    if not e:
        return
    from tierwise.cli._output import kv_table, print_table

    t = kv_table("cost and energy", key_style="")
    cap = e["capex_usd"]
    t.add_row("capex", f"{_usd(cap['total'])} (servers {_usd(cap['servers'])}, network "
                       f"{_usd(cap['total'] - cap['servers'])} = {e['network_share_of_capex']:.1%})")
    t.add_row("power (facility)", f"{e['power_w']['facility'] / 1e6:,.2f} MW at PUE {e['pue']:g}")
    t.add_row("cost per million tokens", f"${e['usd_per_million_tokens']:,.3f}  ({e['life_years']:g}-year life, "
                                         f"${e['usd_per_kwh']:g}/kWh)")
    t.add_row("energy per token", f"{e['joules_per_token']:,.2f} J")
    if "time_to_train_s" in e:
        t.add_row("time / cost / energy to train", f"{e['time_to_train_days']:,.1f} days / "
                  f"{_usd(e['cost_to_train_usd'])} / {e['energy_to_train_mwh']:,.1f} MWh")
    print_table(console, t)
    console.print(f"assumed: {'; '.join(e['assumed'])}", style="dim")


def render_levers(console, lev: dict | None) -> None:
    if not lev or not lev.get("levers"):
        return
    console.print(f"levers: {lev['levers']}; {lev['convergence']}", style="yellow")
    for k, v in lev["published"].items():
        console.print(f"  published ({k}): {v}", style="dim")
