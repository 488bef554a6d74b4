"""Issue 32, "answers that mislead": what plan, scale, estimate and goodput say must be what they mean
(the cluster's own name, the precision asked for, MFU comparable with published bf16 figures, a bubble that
is half of the step named, and every "see ..." pointer leading to something printed)."""

from __future__ import annotations

import json
import re

import pytest

import tierwise
from tierwise.cli import main


def _json(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    if doc.get("document") == "estimate":  # one scenario: the one result of the document's list
        assert len(doc["results"]) == 1
        return doc["results"][0]
    return doc


def _scenario(tmp_path, cluster="hgx-h100-roce", **plan):
    plan = {"tp": 8, "pp": 2, "global_batch_size": 64, "seq_length": 4096, **plan}
    body = "\n".join(f"  {k}: {v}" for k, v in plan.items())
    path = tmp_path / "s.yaml"
    path.write_text(f"model: llama3.1-8b\ncluster: {cluster}\nnum_gpus: 64\nplan:\n{body}\n")
    return str(path)


# --- item 4: a catalog cluster keeps its name -------------------------------------------------------------

def test_a_catalog_cluster_built_on_a_base_keeps_its_own_name(capsys, tmp_path):
    assert tierwise.load_cluster("hgx-h100-roce").name == "hgx-h100-roce"
    assert tierwise.load_cluster("dgx-a100-40gb").name == "dgx-a100-40gb"
    small = ["--model", "llama3.1-8b", "--cluster", "hgx-h100-roce", "--gpus", "16", "--global-batch", "32",
             "--seq", "4096", "--json"]
    assert _json(capsys, "plan", *small, "--top", "1", "--max-mbs", "1", "--max-vpp", "1")["cluster"] == "hgx-h100-roce"
    assert _json(capsys, "goodput", *small, "--runs", "0")["cluster"] == "hgx-h100-roce"
    assert _json(capsys, "estimate", _scenario(tmp_path), "--json")["cluster"] == "hgx-h100-roce"


def test_a_cluster_modified_by_a_mapping_says_what_was_modified(tmp_path):
    assert tierwise.load_cluster({"base": "dgx-h100"}).name == "dgx-h100"
    changed = tierwise.load_cluster({"base": "dgx-h100", "nic_bandwidth": "200 Gb/s", "nics_per_node": 4})
    assert changed.name == "dgx-h100 (modified: nic_bandwidth, nics_per_node)"
    path = tmp_path / "my-h100.yaml"
    path.write_text("base: dgx-h100\nnic_bandwidth: 200 Gb/s\n")
    assert tierwise.load_cluster(str(path)).name == "my-h100"  # a user's file is named by its file


# --- item 1: the model's training precision unless asked; MFU also against the bf16 peak ------------------

PLAN_70B = ["--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "64", "--seq",
            "4096", "--max-mbs", "1", "--max-vpp", "2", "--json"]


def test_plan_answers_a_bf16_model_in_bf16_unless_fp8_is_asked(capsys):
    doc = _json(capsys, "plan", *PLAN_70B, "--top", "3")
    assert {p["precision"] for p in doc["plans"]} == {"bf16"}
    assert any("training precision" in n for n in doc["notes"])  # the default is said, not silent
    for p in doc["plans"]:
        assert p["estimate"]["mfu_bf16"] == pytest.approx(p["estimate"]["mfu"])
    both = _json(capsys, "plan", *PLAN_70B, "--top", "1", "--precision", "bf16,fp8")
    best = both["plans"][0]
    assert best["precision"] == "fp8"  # what the old default silently answered
    e = best["estimate"]
    assert e["mfu_bf16"] == pytest.approx(e["mfu"] * 1979 / 989)  # H100 SXM dense peaks, fp8 and bf16
    assert f"{e['mfu_bf16']:.1%} against the bf16 peak" in both["explanation"].splitlines()[0]


def test_a_model_trained_in_fp8_is_planned_in_fp8_by_default():
    m, c = tierwise.load_model("deepseek-v3"), tierwise.load_cluster("dgx-h100")
    assert m.training_precision == "fp8" and tierwise.load_model("llama3.1-405b").training_precision == "bf16"
    from tierwise.planner.space import _precisions

    assert _precisions(m, c, tierwise.Constraints())[0] == ("fp8",)
    assert _precisions(m, tierwise.load_cluster("dgx-a100"), tierwise.Constraints())[0] == ("bf16",)  # no fp8
    with pytest.raises(tierwise.errors.TierwiseError, match="training_precision"):
        tierwise.load_model({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
                             "ffn_hidden_size": 128, "gated_mlp": True, "training_precision": "fp16"})


def test_goodput_ranking_and_the_sweep_take_the_default_precision(capsys):
    doc = _json(capsys, "goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
                "--global-batch", "32", "--seq", "4096", "--runs", "0", "--json")
    assert doc["plan"]["precision"] == "bf16"
    from tierwise.specs.parameters import load_parameters
    from tierwise.sweep.kinds import get_kind

    cols, _ = get_kind("plan", "test").run({"model": "llama3.1-8b", "cluster": "dgx-h100", "gpus": 8, "global_batch": 16,
                                    "seq": 4096, "objective": "step_time", "constraints": {"max_vpp": 1}},
                                   load_parameters())
    assert "bf16" in cols["plan"] and cols["mfu_bf16"] == pytest.approx(cols["mfu"])


def test_scale_keeps_one_precision_along_the_curve(capsys):
    doc = _json(capsys, "scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:32",
                "--global-batch", "64", "--seq", "4096", "--precision", "bf16,fp8", "--json")
    precisions = {p["plan"]["precision"] for p in doc["points"] if p["plan"]}
    assert len(precisions) == 1 and doc["precision"] in precisions
    assert "one precision per curve" in doc["explanation"]
    assert all(p["efficiency_vs_linear"] <= 1.05 for p in doc["points"] if p["plan"])
    plain = _json(capsys, "scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16",
                  "--global-batch", "64", "--seq", "4096", "--json")
    assert plain["precision"] == "bf16" and "one precision" not in plain["explanation"]


# --- item 5: every "see ..." pointer leads to something printed ------------------------------------------

_POINTER = re.compile(r"\bsee ('[^']+'|`[^`]+`|\S+(?: \S+){0,4}?)(?= below| above|[;,.)]|$)( below| above)?")


def dangling_pointers(text: str) -> list[str]:
    """The pointers of ``text`` ("see 'X' below", "see `tierwise goodput`", "see --json by_component") that lead
    nowhere: a quoted heading no line of the same output starts with (below the pointer for "below"), a command
    tierwise lacks, or a bare "see what it buys below" that names nothing."""
    from tierwise.cli import app

    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    lines = text.splitlines()
    bad = []
    for n, line in enumerate(lines):
        for target, where in _POINTER.findall(line):
            if target.startswith("'"):
                scope = lines[n + 1:] if where == " below" else lines[:n] if where == " above" else lines
                if not any(x.strip().startswith(target.strip("'")) for x in scope):
                    bad.append(line)
            elif target.startswith("`"):
                words = target.strip("`").split()
                if words[:1] != ["tierwise"] or len(words) < 2 or words[1] not in commands:
                    bad.append(line)
            elif not target.startswith(("--", "'tierwise")):  # a flag, or the CLI's "see 'tierwise X --help'"
                bad.append(line)
    return bad


def test_the_pointer_checker_catches_the_old_dangling_pointer():
    old = "tier rule broken: CP traffic (every layer) crosses scale_out; see what it buys below\nlimits: ..."
    assert dangling_pointers(old)
    assert dangling_pointers("x; see 'CP 4 crosses scale_out' below\nlimits")
    assert not dangling_pointers("x; see 'CP 4 crosses scale_out' below\nCP 4 crosses scale_out: it buys 3%")
    assert dangling_pointers("see `tierwise nosuch`") and not dangling_pointers("see `tierwise goodput`")


POINTER_RUNS = [
    # CP across nodes (the case), TP forced across nodes, EP forced across nodes
    ["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--global-batch", "2048",
     "--seq", "8192", "--top", "2"],
    ["plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "64",
     "--seq", "4096", "--tp", "16", "--max-mbs", "1", "--max-vpp", "1", "--top", "2"],
    ["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "128",
     "--seq", "4096", "--ep", "8", "--tp", "2", "--max-mbs", "1", "--max-vpp", "1", "--top", "2"],
    ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:32", "--global-batch", "64",
     "--seq", "4096", "--precision", "bf16,fp8"],
    ["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "32",
     "--seq", "4096", "--runs", "0"],
    ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    ["trend", "--model", "llama3.1-8b", "--gpus", "64", "--global-batch", "64", "--seq", "4096"],
]


@pytest.mark.parametrize("args", POINTER_RUNS, ids=[" ".join(a[:3]) for a in POINTER_RUNS])
def test_every_see_pointer_leads_to_something_printed(capsys, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "400")  # one line per sentence: the pointer and its heading are whole
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert not dangling_pointers(out), dangling_pointers(out)
    rc = main([*args, "--json"])
    doc, _ = capsys.readouterr()
    texts = []

    def walk(x):
        if isinstance(x, str):
            texts.append(x)
        elif isinstance(x, dict | list):
            for v in x.values() if isinstance(x, dict) else x:
                walk(v)
    walk(json.loads(doc))
    for text in texts:  # a pointer inside a JSON string leads to something in the same document
        assert not dangling_pointers("\n".join([text, *(t for t in texts if t is not text)])), text


def test_the_plan_pointer_names_the_crossing_line(capsys):
    doc = _json(capsys, *POINTER_RUNS[0], "--json")
    lines = doc["explanation"].splitlines()
    rule = next(x for x in lines if x.startswith("tier rule broken"))
    assert "see 'CP 4 crosses scale_out' below" in rule
    assert any(x.startswith("CP 4 crosses scale_out") for x in lines[lines.index(rule) + 1:])


# --- item 2: a bubble over 15% of the step says what interleaving would give -----------------------------

def _scenario_file(tmp_path, model, num_gpus, **plan):
    body = "\n".join(f"  {k}: {v}" for k, v in plan.items())
    path = tmp_path / f"{model}-{num_gpus}.yaml"
    path.write_text(f"model: {model}\ncluster: dgx-h100\nnum_gpus: {num_gpus}\nplan:\n{body}\n")
    return str(path)


def test_estimate_warns_of_a_large_bubble_and_estimates_interleaving(capsys, monkeypatch, tmp_path):
    """The issue's case: a 405B layout at pp 16 with 16 micro-batches idles about half of its step."""
    path = _scenario_file(tmp_path, "llama3.1-405b", 1024, tp=8, pp=16, global_batch_size=128, seq_length=8192,
                          recompute="full")
    doc = _json(capsys, "estimate", path, "--json")
    share = doc["breakdown"]["bubble_s"] / doc["step_time_s"]
    assert share > 0.4
    block = doc["interleaving"]
    assert block["bubble_share"] == pytest.approx(share) and block["why_none"] is None
    vpps = [o["vpp"] for o in block["options"]]
    assert vpps[0] == 2 and len(vpps) == len(set(vpps))  # the smallest valid vpp, then the fastest
    for o in block["options"]:  # each is a real estimate of the same plan interleaved: less bubble
        assert o["bubble_s"] < doc["breakdown"]["bubble_s"] and o["step_time_s"] < doc["step_time_s"]
    fastest = min(block["options"], key=lambda o: o["step_time_s"])
    (tmp_path / "v").mkdir()
    again = _json(capsys, "estimate", _scenario_file(tmp_path / "v", "llama3.1-405b", 1024, tp=8, pp=16,
                                                     global_batch_size=128, seq_length=8192, recompute="full",
                                                     vpp=fastest["vpp"]), "--json")
    assert again["step_time_s"] == pytest.approx(fastest["step_time_s"]) and "interleaving" not in again
    assert any(w.startswith("pipeline bubble is") and f"vpp {fastest['vpp']}: step" in w for w in doc["warnings"])
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["estimate", path]) == 0
    assert "warning: pipeline bubble is" in capsys.readouterr().out


def test_no_warning_under_the_bound_and_a_reason_when_no_vpp_is_valid(capsys, tmp_path):
    small = _scenario_file(tmp_path, "llama3.1-8b", 16, tp=8, pp=2, global_batch_size=256, seq_length=4096)
    doc = _json(capsys, "estimate", small, "--json")
    assert doc["breakdown"]["bubble_s"] < 0.15 * doc["step_time_s"] and "interleaving" not in doc
    deep = _scenario_file(tmp_path, "llama3.1-8b", 32, tp=1, pp=32, global_batch_size=32, seq_length=4096)
    doc = _json(capsys, "estimate", deep, "--json")
    assert doc["interleaving"]["options"] == []
    assert "num_layers=32" in doc["interleaving"]["why_none"]
    assert any("no interleaved schedule is valid" in w for w in doc["warnings"])
