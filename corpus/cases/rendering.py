"""Rendering through the real entry point: names from files print as text (never rich markup), ``--json``
puts one JSON document on stdout, ``--version``, and the width follows ``COLUMNS``."""

from __future__ import annotations

import json
from pathlib import Path

from corpus.harness import Case, Result

_HF = (Path(__file__).resolve().parents[2] / "tests" / "data" / "hf" / "Llama-3.1-8B.config.json").read_text()
_CLOSE = "x[/bold]"  # a closing tag with no opening one: rich raises MarkupError on it


def _hf(name_or_path: str | None) -> str:
    data = json.loads(_HF)
    data.pop("_name_or_path", None)
    if name_or_path is not None:
        data["_name_or_path"] = name_or_path
    return json.dumps(data)


def _inline_model(name: str) -> str:
    return (f'{{name: "{name}", num_layers: 4, hidden_size: 1024, ffn_hidden_size: 4096, num_attention_heads: 8, '
            "num_kv_heads: 8, vocab_size: 32000, gated_mlp: true}")


def _scenario(model: str, cluster: str = "dgx-h100") -> str:
    return (f"model: {model}\ncluster: {cluster}\nnum_gpus: 16\n"
            "plan: {tp: 2, global_batch_size: 64, seq_length: 2048}\n")


def _cluster(name: str, display: str | None = None) -> str:
    text = f'base: dgx-h100\nname: "{name}"\n'
    return text + (f'display_name: "{display}"\n' if display else "")


def _stdout_has(*needles: str):
    def check(r: Result) -> None:
        for needle in needles:
            assert needle in r.stdout, f"stdout lacks {needle!r}:\n{r.stdout[-1500:]}"
    return check


def _json_doc(path: tuple = (), expected=None):
    """stdout parses as one JSON document; the value at ``path`` (keys, or ``len`` to count) is ``expected``."""
    def check(r: Result) -> None:
        value = json.loads(r.stdout)  # nothing but the document on stdout
        if not path:
            return
        for key in path:
            value = len(value) if key is len else value[key]
        assert value == expected, f"{path}: {value!r}, expected {expected!r}"
    return check


def _narrow(width: int):
    def check(r: Result) -> None:
        wide = [line for line in r.stdout.splitlines() if len(line) > width]
        assert not wide, f"{len(wide)} lines wider than COLUMNS={width}: {wide[:2]}"
    return check


_PLAN = ["--gpus", "16", "--global-batch", "64", "--seq", "2048"]

CASES = [
    Case(id="rendering/estimate-inline-model-name-closing-tag", argv=["estimate", "s.yaml"], exit_code=0,
         files={"s.yaml": _scenario(_inline_model(_CLOSE))}, check=_stdout_has(f"{_CLOSE} on 16 x dgx-h100")),
    Case(id="rendering/estimate-cluster-name-closing-tag", argv=["estimate", "s.yaml"], exit_code=0,
         files={"s.yaml": _scenario("llama3.1-8b", f'{{base: dgx-h100, name: "c{_CLOSE}"}}')},
         check=_stdout_has(f"on 16 x c{_CLOSE}")),
    Case(id="rendering/estimate-link-markup-in-name", argv=["estimate", "s.yaml"], exit_code=0,
         files={"s.yaml": _scenario(_inline_model("[link=http://example.com]m[/link]"))},
         check=_stdout_has("[link=http://example.com]m[/link] on 16")),
    Case(id="rendering/estimate-emoji-code-in-name", argv=["estimate", "s.yaml"], exit_code=0,
         files={"s.yaml": _scenario(_inline_model(":smile: m"))}, check=_stdout_has(":smile: m on 16")),
    Case(id="rendering/plan-hf-name-or-path-closing-tag",
         argv=["plan", "--model", "m.json", "--cluster", "dgx-h100", *_PLAN, "--top", "1"], exit_code=0,
         files={"m.json": _hf(f"org/m{_CLOSE}")}, check=_stdout_has(f"org/m{_CLOSE} on 16 x dgx-h100")),
    Case(id="rendering/plan-hf-file-name-opening-tag",
         argv=["plan", "--model", "[bold]m.json", "--cluster", "dgx-h100", *_PLAN, "--top", "1"], exit_code=0,
         files={"[bold]m.json": _hf(None)}, check=_stdout_has("[bold]m on 16 x dgx-h100")),
    Case(id="rendering/scale-hf-name-or-path-closing-tag",
         argv=["scale", "--model", "m.json", "--cluster", "c.yaml", "--gpus", "8,16", "--global-batch", "64",
               "--seq", "2048"], exit_code=0,
         files={"m.json": _hf(f"m{_CLOSE}"), "c.yaml": _cluster(f"c{_CLOSE}")},
         check=_stdout_has(f"m{_CLOSE} on c{_CLOSE}")),
    Case(id="rendering/tiers-display-name-markup", argv=["tiers", "c.yaml"], exit_code=0,
         files={"c.yaml": _cluster("c", f"[red]fast {_CLOSE}")}, check=_stdout_has(f"[red]fast {_CLOSE}")),
    Case(id="rendering/collective-cluster-name-closing-tag",
         argv=["collective", "all-reduce", "--size", "1GB", "--ranks", "16", "--cluster", "c.yaml"], exit_code=0,
         files={"c.yaml": _cluster(f"c{_CLOSE}")}, check=_stdout_has(f"(c{_CLOSE})")),
    Case(id="rendering/plan-json-is-one-document",
         argv=["plan", "--model", "m.json", "--cluster", "dgx-h100", *_PLAN, "--top", "2", "--json"], exit_code=0,
         files={"m.json": _hf(f"m{_CLOSE}")},
         check=_json_doc(("model",), f"m{_CLOSE}")),
    Case(id="rendering/estimate-json-has-the-parsed-model", argv=["estimate", "s.yaml", "--json"], exit_code=0,
         files={"s.yaml": _scenario("m.json"), "m.json": _hf("m")},
         check=_json_doc(("results", 0, "model_summary", "kv_heads"), 8)),
    Case(id="rendering/simulate-json-with-failures-is-one-document",
         argv=["simulate", "all-reduce", "--gpus", "64", "--radix", "8", "--fail-links", "2", "--json"],
         exit_code=0, check=_json_doc(("failures", "failed_parts", "cables", len), 2)),
    Case(id="rendering/version", argv=["--version"], exit_code=0, check=_stdout_has("tierwise ")),
    Case(id="rendering/help-offers-completion", argv=["--help"], exit_code=0,
         check=_stdout_has("--install-completion", "--version")),
    Case(id="rendering/plan-fits-a-narrow-terminal",
         argv=["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", *_PLAN, "--top", "2"], exit_code=0,
         env={"COLUMNS": "70"}, check=_narrow(70)),
    Case(id="rendering/estimate-fits-a-narrow-terminal", argv=["estimate", "s.yaml"], exit_code=0,
         files={"s.yaml": _scenario("llama3.1-8b")}, env={"COLUMNS": "60"}, check=_narrow(60)),
    Case(id="rendering/estimate-errors-of-several-files-on-stderr",
         argv=["estimate", "[red]gone.yaml", f"{_CLOSE}.yaml"], stderr_has=["[red]gone.yaml", f"{_CLOSE}.yaml"]),
]

# ---- issue 32: empty answers are errors: a terminal too narrow for a table, a fabric with every path cut ----
_TABLE_COMMANDS = {
    "tiers": ["tiers", "dgx-h100"],
    "plan": ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "simulate": ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"],
    "serve": ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "catalog": ["catalog", "list", "clusters"],
}
for _cmd, _argv in _TABLE_COMMANDS.items():
    for _width in ("0", "1", "39"):
        CASES.append(Case(id=f"rendering/{_cmd}-columns-{_width}", argv=_argv, env={"COLUMNS": _width},
                          stderr_has=[f"COLUMNS={_width}", "--json"], max_lines=1, timeout_s=20.0))
    CASES.append(Case(id=f"rendering/{_cmd}-columns-0-json-still-works", argv=[*_argv, "--json"],
                      env={"COLUMNS": "0"}, exit_code=0, timeout_s=20.0,
                      check=lambda r: __import__("json").loads(r.stdout) is not None))

for _kind in ("all-reduce", "all-to-all", "all-gather", "permutation", "pipeline"):
    for _fail in ("--fail-links", "--fail-switches", "--fail-domains"):
        CASES.append(Case(id=f"rendering/simulate-{_kind}{_fail}-everything",
                          argv=["simulate", _kind, "--gpus", "64", "--radix", "16", "--size", "1MB", _fail, "100%"],
                          stderr_has=[f"{_fail} 100%", "0 of 64 ranks", "at least 2"], max_lines=1, timeout_s=20.0))
