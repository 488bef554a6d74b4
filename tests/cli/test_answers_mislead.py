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
