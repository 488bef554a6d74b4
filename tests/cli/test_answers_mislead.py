"""Issue 32, "answers that mislead": what plan, scale, estimate and goodput say must be what they mean
(the cluster's own name, the precision asked for, MFU comparable with published bf16 figures, a bubble that
is half of the step named, and every "see ..." pointer leading to something printed)."""

from __future__ import annotations

import json

import pytest

import tierwise
from tierwise.cli import main


def _json(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


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
    from tierwise.sweep.kinds import get_kind

    cols, _ = get_kind("plan", "test").run({"model": "llama3.1-8b", "cluster": "dgx-h100", "gpus": 8, "global_batch": 16,
                                    "seq": 4096, "objective": "step_time", "constraints": {"max_vpp": 1}})
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
