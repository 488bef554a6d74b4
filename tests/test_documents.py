"""Every command's --json document follows its published JSON Schema (issue 32, item 6).

The commands are listed from the typer app, so a new command with ``--json`` and no schema fails here; each
is run in-process with small arguments and its output validated with ``jsonschema``. The schemas themselves
are checked: valid JSON Schema, the keys other tools read required at their paths, and docs/schema/ equal to
what ``tools/schemas.py write`` produces.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest
import typer

from tierwise.cli import app, main
from tierwise.documents import DOCUMENTS, SCHEMA_VERSION, commands, finish, schema

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "llama3.1-70b-dgx-h100.yaml")
AZURE = str(ROOT / "tests" / "data" / "nccl-logs" / "azure_nd_a100v4_h100v5_h200v5_x8_1node_allreduce_busbw.tsv")
TRAIN = ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64"]

# command -> [(document, argv)]: small, fast runs (the whole set takes a few seconds on one core)
RUNS = {
    "tiers": [("tiers", ["tiers", "dgx-h100"])],
    "collective": [("collective", ["collective", "all-reduce", "--size", "1GiB", "--ranks", "32",
                                   "--cluster", "dgx-h100"])],
    "estimate": [("estimate", ["estimate", EXAMPLE]), ("estimate", ["estimate", EXAMPLE, "--tokens", "1e12"])],
    "plan": [("plan", ["plan", *TRAIN, "--global-batch", "128", "--seq", "4096"]),
             ("plan", ["plan", *TRAIN, "--global-batch", "128", "--seq", "4096", "--goodput"])],
    "scale": [("scale", ["scale", *TRAIN[:4], "--gpus", "8:64"])],
    "validate": [("validate", ["validate"]), ("validate-serving", ["validate", "--serving"])],
    "topo": [("topo", ["topo", "fat-tree", "--gpus", "1024", "--radix", "64", "--cluster", "dgx-h100"]),
             ("topo", ["topo", "nvl72", "--gpus", "144"])],
    "simulate": [("simulate", ["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix", "16",
                               "--size", "1MB"]),
                 ("simulate-incast", ["simulate", "incast", "--topology", "fat-tree", "--gpus", "64", "--radix", "16",
                                      "--fan-in", "4", "--size", "1MB"]),
                 ("simulate-jobs", ["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix",
                                    "16", "--size", "1MB", "--second-job", "all-reduce",
                                    "--placement", "fragmented"])],
    "calibrate": [("calibrate", ["calibrate", AZURE, "--select", "h100", "--out", "{tmp}/cal.yaml"])],
    "design": [("design", ["design", "--model", "llama3.1-8b", "--gpus", "64"]),
               ("design-domains", ["design", "--model", "llama3.1-8b", "--gpus", "64", "--domain-sweep",
                                   "--domains", "8,72"]),
               ("design-power", ["design", "--model", "llama3.1-8b", "--power", "1MW"])],
    "trend": [("trend", ["trend", "--model", "llama3.1-8b", "--gpus", "64"])],
    "bandwidth": [("bandwidth", ["bandwidth", *TRAIN, "--tp", "8", "--pp", "1", "--dp", "8"])],
    "goodput": [("goodput", ["goodput", *TRAIN, "--runs", "5", "--seed", "0"])],
    "serve": [("serve", ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1",
                         "--input-len", "1024", "--output-len", "128"]),
              ("serve", ["serve", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--prefill-gpus", "4",
                         "--decode-gpus", "4", "--input-len", "2000", "--output-len", "256"])],
    "serve-plan": [("serve-plan", ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"]),
                   ("serve-plan", ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "4",
                                   "--decode-cluster", "hgx-h200"])],
    "catalog list": [("catalog-list", ["catalog", "list"])],
    "catalog show": [("catalog-show", ["catalog", "show", "dgx-h100"]),
                     ("catalog-show", ["catalog", "show", "llama3.1-8b"])],
    "sweep run": [("sweep-run", ["sweep", "run", "{tmp}/grid.yaml", "--out", "{tmp}/sweep"])],
    "sweep show": [("sweep-show", ["sweep", "show", "{tmp}/sweep"])],  # after sweep run (same tmp folder)
}
# commands this test cannot run here, each with why; their schemas are still checked below, and their
# documents are validated where they run (tests/measure, tests/testbed, .ci/testbed)
NOT_RUN = {
    "measure gemm": "needs a CUDA GPU",
    "measure hbm": "needs a CUDA GPU",
    "testbed up": "needs root and network namespaces (.ci/testbed)",
    "testbed down": "needs root and network namespaces (.ci/testbed)",
    "testbed run": "needs root and network namespaces (.ci/testbed)",
    "testbed ddp": "needs root and network namespaces (.ci/testbed)",
    "testbed check": "needs root and network namespaces (.ci/testbed)",
}
# commands that spawn torch processes: run, but only in the slow set
SLOW_RUNS = {
    "measure collective": [("measure-collective", ["measure", "collective", "--op", "all-reduce", "--sizes",
                                                   "4KiB:16KiB", "--factor", "4", "--iters", "3", "--warmup", "1",
                                                   "--ranks", "2"])],
    "measure ddp": [("measure-ddp", ["measure", "ddp", "--ranks", "2", "--steps", "5", "--warmup", "1",
                                     "--width", "64", "--layers", "2", "--batch", "4"])],
    "measure compute": [("measure-compute", ["measure", "compute", "--cpu", "--cluster", "dgx-h100", "--iters",
                                             "1", "--warmup", "1"])]
    # one Hugging Face training step beside its prediction (the hf extra, in the test extra: transformers)
    + ([("measure-compute", ["measure", "compute", "--cpu", "--cluster", "dgx-h100", "--iters", "1", "--warmup",
                             "1", "--hf-step", "{tmp}/tiny-llama", "--hf-steps", "1"])]
       if importlib.util.find_spec("transformers") else []),
}
# keys that other tools read (issue 32): document -> paths that its schema must require ([] = each item;
# ?key: a key that appears only with some options, whose own keys are then required)
PROTECTED = {
    "estimate": ["results.[].tokens_per_s_per_gpu", "results.[].memory.fits", "results.[].breakdown"],
    "serve": ["output_tokens_per_s", "ttft_s", "tpot_s", "phases"],
    "goodput": ["mtti_s", "ettr", "?ettr_simulated.mean"],  # ettr_simulated: with --runs
    "tiers": ["tiers.[].name", "tiers.[].latency_s"],
    "simulate": ["time_s", "analytic_time_s"],
    "topo": ["servers.units", "servers.price_key"],
}


def json_commands() -> set[str]:
    """Every command of the app that has a --json option, as typed (``measure collective``)."""
    found: set[str] = set()

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        elif any("--json" in getattr(p, "opts", ()) for p in command.params):
            found.add(" ".join(path))

    walk(typer.main.get_command(app), [])
    return found


def test_every_json_command_has_a_schema_and_a_run_or_a_reason():
    cli = json_commands()
    assert len(cli) >= 29
    assert cli - set(commands()) == set(), "a command with --json has no document in tierwise.documents"
    assert set(commands()) - cli == set(), "a document names a command the app does not have"
    planned = set(RUNS) | set(NOT_RUN) | set(SLOW_RUNS)
    assert cli - planned == set(), "a command with --json is neither run here nor listed in NOT_RUN"
    ran = {kind for runs in (*RUNS.values(), *SLOW_RUNS.values()) for kind, _ in runs}
    not_run = {kind for command in NOT_RUN for kind in commands()[command]}
    assert set(DOCUMENTS) - ran - not_run == set(), "a document is never produced by a run here"


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_schema_is_valid_and_requires_its_keys(kind):
    s = schema(kind)
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["required"][:2] == ["schema_version", "document"] and len(s["required"]) > 2
    for key in s["required"]:
        assert s["properties"][key], f"{kind}: {key} has no type"


def _required_at(s: dict, path: str) -> bool:
    for part in path.split("."):
        if part.startswith("?"):
            s = s["properties"][part[1:]]
            continue
        if part == "[]":
            s = s["items"]
            s = s["anyOf"][0] if "anyOf" in s else s
            continue
        if part not in s.get("required", ()):
            return False
        s = s["properties"][part]
    return True


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_keys_other_tools_read_are_required(kind):
    for path in PROTECTED[kind]:
        assert _required_at(schema(kind), path), f"{kind}: {path} is not required"


def test_published_schemas_are_the_package_schemas():
    spec = importlib.util.spec_from_file_location("schemas_tool", ROOT / "tools" / "schemas.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.differences() == [], "docs/schema/ is stale: run python tools/schemas.py write"


def test_finish_stamps_the_version_and_keeps_one_shape():
    assert finish("collective", {"op": "x"}) == {"schema_version": SCHEMA_VERSION, "document": "collective",
                                                 "op": "x"}
    assert finish("estimate", [{"file": "a"}])["results"] == [{"file": "a"}]  # one file: still a list
    inner = finish("measure-ddp", {"step_s": 1.0})  # testbed ddp re-emits measure ddp's document as its own
    assert finish("testbed-ddp", inner) == {"schema_version": SCHEMA_VERSION, "document": "testbed-ddp",
                                            "step_s": 1.0}
    with pytest.raises(TypeError):
        finish("estimate", {"file": "a"})
    with pytest.raises(TypeError):
        finish("collective", [{"op": "x"}])
    with pytest.raises(KeyError):
        finish("no-such-document", {})


def _validate(kind: str, doc) -> None:
    assert isinstance(doc, dict) and doc["schema_version"] == SCHEMA_VERSION and doc["document"] == kind
    errors = sorted(jsonschema.Draft202012Validator(schema(kind)).iter_errors(doc), key=str)
    assert not errors, "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:5])


def _run_and_validate(runs, tmp_path, capsys):
    (tmp_path / "grid.yaml").write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: [16, 32]\n"
                                        "plan: {tp: 8}\n")
    (tmp_path / "tiny-llama").mkdir()
    (tmp_path / "tiny-llama" / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256, "max_position_embeddings": 4096}))
    for command, cases in runs.items():
        for kind, argv in cases:
            argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
            rc = main([*argv, "--json"])
            out = capsys.readouterr().out
            assert rc == 0, f"{command}: exit {rc}"
            _validate(kind, json.loads(out))


def test_every_command_json_follows_its_schema(tmp_path, capsys):
    _run_and_validate(RUNS, tmp_path, capsys)


@pytest.mark.slow
def test_measure_json_follows_its_schema(tmp_path, capsys):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    _run_and_validate(SLOW_RUNS, tmp_path, capsys)


def test_golden_documents_follow_their_schemas():
    for path in sorted((ROOT / "tests" / "golden").glob("*.json")):
        doc = json.loads(path.read_text())["output"]
        _validate(doc["document"], doc)
