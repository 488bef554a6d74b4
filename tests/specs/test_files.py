"""The guarded file reader, the strict YAML/JSON loaders, HF field checks and the Megatron plan aliases (issue 12)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tierwise.errors import MeasureError, PlanError, SpecError, TopologyError
from tierwise.estimate.scenario import load_scenario, safe_estimate, scenario_from_mapping
from tierwise.files import MAX_SPEC_BYTES, load_json, load_yaml, read_user_text, short_repr
from tierwise.measure.nccl_log import read_text as read_log
from tierwise.specs.catalog import load_yaml_file
from tierwise.specs.model import load_model, model_from_hf_config
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.topology.costs import load_prices
from tierwise.topology.spec import load_topology_yaml
from tierwise.validate.dataset import DatasetError, load_rows

HF_DIR = Path(__file__).resolve().parents[1] / "data" / "hf"
GOOD = "model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 8\nplan: {tp: 8, global_batch_size: 8, seq_length: 2048}\n"


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and len(text) < 600, text
    return text


# --- read_user_text ----------------------------------------------------------------------------------------


def test_reads_a_regular_file_and_strips_a_utf8_bom(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_user_text(p) == "a: 1\n"


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist; check the path"):
        read_user_text(tmp_path / "nope.yaml")


def test_directory_is_refused(tmp_path):
    with pytest.raises(SpecError, match="is a directory, not a regular file") as info:
        read_user_text(tmp_path, what="scenario file")
    assert "scenario file" in _one_line(info)


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(SpecError, match="named pipe"):
        read_user_text(fifo)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    with pytest.raises(SpecError, match="character device"):
        read_user_text(device)


def test_dangling_symlink_is_named(tmp_path):
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(SpecError, match="symbolic link to a missing file"):
        read_user_text(link)


def test_path_through_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SpecError, match="not a directory"):
        read_user_text(tmp_path / "f" / "a.yaml")


def test_huge_file_is_refused_and_names_the_limit(tmp_path):
    p = tmp_path / "big.yaml"
    with open(p, "wb") as fh:
        fh.truncate(MAX_SPEC_BYTES + 1)  # sparse: no disk used
    with pytest.raises(SpecError, match="16.0 MiB limit") as info:
        read_user_text(p)
    _one_line(info)


def test_small_limit_applies(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("x" * 100)
    with pytest.raises(SpecError, match="100 bytes, over the 10 bytes limit"):
        read_user_text(p, max_bytes=10)


def test_not_utf8_names_the_offset_and_never_the_contents(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b"name: secret-caf\xe9\n")
    with pytest.raises(SpecError, match=r"byte 0xe9 at offset 16 \(line 1\)") as info:
        read_user_text(p)
    assert "secret" not in _one_line(info)


def test_utf16_and_binary_files(tmp_path):
    p = tmp_path / "u16.yaml"
    p.write_bytes("a: 1\n".encode("utf-16"))
    with pytest.raises(SpecError, match="UTF-16"):
        read_user_text(p)
    b = tmp_path / "blob.yaml"
    b.write_bytes(b"a: 1\n\x00\x01\x02")
    with pytest.raises(SpecError, match="NUL byte at offset 5"):
        read_user_text(b)


def test_proc_environ_is_not_echoed(monkeypatch):
    if not os.path.exists("/proc/self/environ"):
        pytest.skip("no procfs")
    monkeypatch.setenv("TIERWISE_SECRET_PROBE", "hunter2")
    with pytest.raises(SpecError) as info:
        load_yaml_file("/proc/self/environ")
    assert "hunter2" not in str(info.value) and "TIERWISE_SECRET_PROBE" not in str(info.value)


def test_error_class_follows_the_caller(tmp_path):
    with pytest.raises(MeasureError, match="is a directory"):
        read_log(tmp_path)
    with pytest.raises(TopologyError, match="is a directory"):
        load_topology_yaml(str(tmp_path))
    with pytest.raises(TopologyError, match="is a directory"):
        load_prices(str(tmp_path))
    with pytest.raises(DatasetError, match="is a directory"):
        load_rows(tmp_path)


def test_logs_replace_bad_bytes_but_refuse_binary(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(b"# nccl \xff log\n")
    assert "\ufffd" in read_log(p)
    p.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00")
    with pytest.raises(MeasureError, match="NUL byte"):
        read_log(p)


def test_short_repr_bounds_big_and_deep_values():
    assert len(short_repr("x" * 10_000)) <= 60
    deep: list = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    assert len(short_repr(deep)) <= 60
    assert short_repr(3) == "3"


# --- strict YAML and JSON -------------------------------------------------------------------------------------


def test_duplicate_keys_name_the_key_and_both_lines():
    with pytest.raises(SpecError, match=r"duplicate key 'tp' in s.yaml, line 3 \(first at line 2\)"):
        load_yaml("plan:\n  tp: 2\n  tp: 4\n", "s.yaml")


def test_duplicate_keys_in_flow_mappings_and_nested():
    with pytest.raises(SpecError, match="duplicate key 'a'"):
        load_yaml("x: {a: 1, a: 2}\n", "s.yaml")


def test_same_key_in_different_mappings_is_fine():
    assert load_yaml("a: {x: 1}\nb: {x: 2}\n", "s") == {"a": {"x": 1}, "b": {"x": 2}}


def test_alias_bomb_is_refused_fast():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 30):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    start = time.monotonic()
    with pytest.raises(SpecError, match="anchors and aliases") as info:
        load_yaml("\n".join(lines), "bomb.yaml")
    assert time.monotonic() - start < 2
    assert "line 1" in _one_line(info)


def test_single_alias_and_merge_key_are_refused():
    with pytest.raises(SpecError, match="anchors and aliases"):
        load_yaml("base: &b {tp: 2}\nplan:\n  <<: *b\n  pp: 2\n", "s")
    with pytest.raises(SpecError, match="anchors and aliases"):
        load_yaml("a: &x [*x]\n", "s")


def test_anchor_without_alias_is_harmless():
    assert load_yaml("a: &x 1\n", "s") == {"a": 1}


def test_syntax_error_names_line_and_is_short():
    with pytest.raises(SpecError, match=r"malformed YAML in s.yaml, line 2") as info:
        load_yaml("a: [1, 2\nb: 3\n" + "c: " + "x" * 5000, "s.yaml")
    _one_line(info)


def test_unhashable_key_is_an_error():
    with pytest.raises(SpecError, match="malformed YAML"):
        load_yaml("? [a, b]\n: 1\n", "s")


def test_json_duplicates_nan_and_depth():
    with pytest.raises(SpecError, match="duplicate key 'a'"):
        load_json('{"a": 1, "a": 2}', "c.json")
    with pytest.raises(SpecError, match="NaN in c.json"):
        load_json('{"a": NaN}', "c.json")
    with pytest.raises(SpecError, match="nests too deeply"):
        load_json("[" * 100_000 + "]" * 100_000, "c.json")
    with pytest.raises(SpecError, match="line 1, column 6"):
        load_json('{"a":', "c.json")


# --- spec files: empty, not a mapping -------------------------------------------------------------------------


@pytest.mark.parametrize("text,message", [
    ("", "is empty"),
    ("# only a comment\n", "is empty"),
    ("- a\n- b\n", "holds a list, not a mapping"),
    ("just a string\n", "holds a string, not a mapping"),
    ("42\n", "holds a number, not a mapping"),
])
def test_scenario_empty_or_not_a_mapping(tmp_path, text, message):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    with pytest.raises(SpecError, match=message) as info:
        load_scenario(p)
    _one_line(info)


@pytest.mark.parametrize("text,message", [("", "is empty"), ("[1, 2]\n", "holds a list")])
def test_model_and_cluster_files_empty_or_not_a_mapping(tmp_path, text, message):
    m = tmp_path / "m.yaml"
    m.write_text(text)
    with pytest.raises(SpecError, match=f"model file .*{message}"):
        load_model(str(m))
    with pytest.raises(SpecError, match=message):
        scenario_from_mapping({"model": "llama3.1-8b", "cluster": str(m), "num_gpus": 8,
                               "plan": {"global_batch_size": 8, "seq_length": 2048}})


def test_batch_keeps_the_good_files(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_bytes(b"\xff\xfe\x00")
    ok, err = safe_estimate(str(good)), safe_estimate(str(bad))
    assert "step_time_s" in ok and "error" not in ok
    assert "UTF-16" in err["error"]


def test_price_file_entries_are_checked(tmp_path):
    p = tmp_path / "prices.yaml"
    for text, message in (("switch_usd: [1, 2]\n", "must be a number or a mapping"),
                          ("switch_usd: {value: abc}\n", "switch_usd.value='abc'"),
                          ("switch_usd: {value: 1, colour: red}\n", "unknown key 'colour'"),
                          ("switch_usdd: 1\n", "did you mean 'switch_usd'"),
                          ("switch_usd: 1\nswitch_usd: 2\n", "duplicate key"),
                          ("", "is empty")):
        p.write_text(text)
        with pytest.raises(TopologyError, match=message):
            load_prices(str(p))
    p.write_text("switch_usd: 25000\n")
    assert load_prices(str(p))["switch_usd"]["value"] == 25000


def test_topology_file_types(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("family: fat-tree\ngpus: many\n")
    with pytest.raises(TopologyError, match="gpus='many'.*whole number"):
        load_topology_yaml(str(p))
    p.write_text("family: [fat-tree]\n")
    with pytest.raises(TopologyError, match="must be a string"):
        load_topology_yaml(str(p))


def test_dataset_not_utf8(tmp_path):
    p = tmp_path / "d.csv"
    p.write_bytes(b"row_id,source_id\n1,caf\xe9\n")
    with pytest.raises(DatasetError, match="not UTF-8 text: byte 0xe9"):
        load_rows(p)


# --- mapping values -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("plan,message", [
    ({"tp": float("nan")}, "tp=nan .* whole number"),
    ({"tp": float("inf")}, "tp=inf .* whole number"),
    ({"tp": 10**30}, "tp <= 1,048,576"),
    ({"seq_length": "2k"}, "seq_length='2k'"),
    ({"recompute": ["full"]}, r"recompute=\['full'\]"),
    ({"sequence_parallel": "yes"}, "must be true or false"),
])
def test_plan_values(plan, message):
    with pytest.raises(SpecError, match=message):
        plan_from_mapping({"global_batch_size": 8, "seq_length": 2048, **plan}, num_gpus=8)


def test_long_values_are_cut_in_messages():
    with pytest.raises(SpecError) as info:
        plan_from_mapping({"global_batch_size": 8, "seq_length": "9" * 10_000}, num_gpus=8)
    assert len(str(info.value)) < 300


# --- Hugging Face fields --------------------------------------------------------------------------------------


def _llama() -> dict:
    return json.loads((HF_DIR / "Llama-3.1-8B.config.json").read_text())


@pytest.mark.parametrize("field,value,message", [
    ("num_attention_heads", 0, "num_attention_heads=0 .* must be a positive integer"),
    ("num_attention_heads", -32, "num_attention_heads=-32"),
    ("num_key_value_heads", 0, "num_key_value_heads=0"),
    ("num_hidden_layers", "32", "num_hidden_layers='32' .* positive integer"),
    ("hidden_size", 4096.5, "hidden_size=4096.5"),
    ("hidden_size", True, "hidden_size=True"),
    ("vocab_size", 10**12, "at most 16,777,216"),
    ("tie_word_embeddings", "false", "tie_word_embeddings='false' .* true or false"),
    ("tie_word_embeddings", 1, "tie_word_embeddings=1"),
    ("head_dim", 0, "head_dim=0"),
    ("intermediate_size", None, "intermediate_size=None"),
    ("intermediate_size", [14336], r"intermediate_size=\[14336\]"),
    ("layer_types", "sliding_attention", "layer_types='sliding_attention' .* list of strings"),
    ("use_sliding_window", "yes", "use_sliding_window='yes'"),
    ("architectures", {"a": 1}, "architectures=.* must be a list"),
    ("_name_or_path", ["x"], "_name_or_path"),
])
def test_hf_mistyped_and_impossible_fields(tmp_path, field, value, message):
    cfg = {**_llama(), field: value}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(SpecError, match=message) as info:
        model_from_hf_config(p)
    text = _one_line(info)
    assert str(p) in text


def test_hf_lists_where_mappings_belong():
    cfg = {"architectures": ["MptForCausalLM"], "d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 100,
           "attn_config": [1, 2]}
    with pytest.raises(SpecError, match=r"attn_config=\[1, 2\] .* must be a mapping"):
        model_from_hf_config(cfg)
    cfg["attn_config"] = {"kv_n_heads": 0}
    with pytest.raises(SpecError, match="attn_config.kv_n_heads=0"):
        model_from_hf_config(cfg)


def test_hf_moe_and_mla_fields():
    ds = json.loads((HF_DIR / "DeepSeek-V3.config.json").read_text())
    with pytest.raises(SpecError, match="n_routed_experts=0"):
        model_from_hf_config({**ds, "n_routed_experts": 0})
    with pytest.raises(SpecError, match="kv_lora_rank='512'"):
        model_from_hf_config({**ds, "kv_lora_rank": "512"})
    with pytest.raises(SpecError, match="n_shared_experts=-1"):
        model_from_hf_config({**ds, "n_shared_experts": -1})
    qwen = json.loads((HF_DIR / "Qwen3-30B-A3B.config.json").read_text())
    with pytest.raises(SpecError, match="mlp_only_layers='0'"):
        model_from_hf_config({**qwen, "mlp_only_layers": "0"})
    with pytest.raises(SpecError, match="decoder_sparse_step=0"):
        model_from_hf_config({**qwen, "decoder_sparse_step": 0})


def test_hf_nulls_mean_the_default():
    m = model_from_hf_config({**_llama(), "num_key_value_heads": None, "head_dim": None})
    assert m.num_kv_heads == m.num_attention_heads and m.head_dim == m.hidden_size // m.num_attention_heads


def test_hf_duplicate_key_in_config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "hidden_size": 8192}')
    with pytest.raises(SpecError, match="duplicate key 'hidden_size'"):
        load_model(str(p))


# --- Megatron / NeMo aliases ----------------------------------------------------------------------------------


BASE = {"global_batch_size": 64, "seq_length": 2048}


def test_megatron_names_are_aliases():
    p = plan_from_mapping({**BASE, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 4,
                           "context_parallel_size": 1, "expert_model_parallel_size": 1,
                           "recompute_granularity": "selective"}, num_gpus=64)
    assert (p.tp, p.pp, p.cp, p.ep, p.recompute) == (2, 4, 1, 1, "selective")
    assert not any(a.startswith(("tp=", "pp=", "cp=", "ep=", "recompute=")) for a in p.assumed)


def test_alias_with_the_same_value_as_the_short_name_is_fine():
    p = plan_from_mapping({**BASE, "tp": 2, "tensor_model_parallel_size": 2}, num_gpus=8)
    assert p.tp == 2


def test_alias_conflict_is_an_error():
    with pytest.raises(SpecError, match="tp=2 and its Megatron name tensor_model_parallel_size=4 disagree"):
        plan_from_mapping({**BASE, "tp": 2, "tensor_model_parallel_size": 4}, num_gpus=8)
    with pytest.raises(SpecError, match="recompute='full' and its Megatron name recompute_granularity"):
        plan_from_mapping({**BASE, "recompute": "full", "recompute_granularity": "selective"}, num_gpus=8)


def test_alias_value_is_validated_like_the_short_name():
    with pytest.raises(SpecError, match="tp=0 .* use 1 <= tp"):
        plan_from_mapping({**BASE, "tensor_model_parallel_size": 0}, num_gpus=8)
    with pytest.raises(SpecError, match="recompute='block'"):
        plan_from_mapping({**BASE, "recompute_granularity": "block"}, num_gpus=8)


def test_unknown_alias_like_key_suggests_the_right_one():
    with pytest.raises(SpecError, match="did you mean 'tensor_model_parallel_size'"):
        plan_from_mapping({**BASE, "tensor_model_parallel_sizes": 2}, num_gpus=8)


def test_layers_per_virtual_stage_gives_vpp():
    p = plan_from_mapping({**BASE, "pp": 4, "num_layers_per_virtual_pipeline_stage": 2}, num_gpus=32,
                          num_layers=32)
    assert p.vpp == 4 and p.schedule == "interleaved"
    same = plan_from_mapping({**BASE, "pp": 4, "vpp": 4, "num_layers_per_virtual_pipeline_stage": 2}, num_gpus=32,
                             num_layers=32)
    assert same.vpp == 4


def test_layers_per_virtual_stage_errors():
    with pytest.raises(PlanError, match=r"num_layers=30 is not divisible by pp x 4 = 16"):
        plan_from_mapping({**BASE, "pp": 4, "num_layers_per_virtual_pipeline_stage": 4}, num_gpus=32, num_layers=30)
    with pytest.raises(SpecError, match="vpp=2 and num_layers_per_virtual_pipeline_stage=2 .* = 4"):
        plan_from_mapping({**BASE, "pp": 4, "vpp": 2, "num_layers_per_virtual_pipeline_stage": 2}, num_gpus=32,
                          num_layers=32)
    with pytest.raises(SpecError, match="needs the model's num_layers"):
        plan_from_mapping({**BASE, "pp": 4, "num_layers_per_virtual_pipeline_stage": 2}, num_gpus=32)


def test_scenario_with_megatron_names(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 64\nplan:\n  tensor_model_parallel_size: 8\n"
                 "  pipeline_model_parallel_size: 2\n  num_layers_per_virtual_pipeline_stage: 4\n"
                 "  global_batch_size: 64\n  seq_length: 4096\n")
    s = load_scenario(p)
    assert (s.plan.tp, s.plan.pp, s.plan.vpp) == (8, 2, 4)  # 32 layers / (2 x 4)


def test_numbers_past_the_digit_limit_and_impossible_dates_are_one_line():
    with pytest.raises(SpecError, match="cannot be read .*digits") as info:
        load_yaml("tp: " + "9" * 5000 + "\n", "s.yaml")
    _one_line(info)
    with pytest.raises(SpecError, match="cannot be read .*month"):
        load_yaml("name: 2024-13-45\n", "s.yaml")
    with pytest.raises(SpecError, match="cannot be read"):
        load_json('{"a": ' + "9" * 5000 + "}", "c.json")


def test_names_too_long_are_one_line(tmp_path):
    with pytest.raises(SpecError, match="File name too long") as info:
        read_user_text("x" * 5000 + ".yaml")
    assert len(_one_line(info)) < 300
    scenario = tmp_path / "s.yaml"
    scenario.write_text(GOOD.replace("model: llama3.1-8b", "model: " + "m" * 5000 + ".yaml"))
    with pytest.raises(SpecError, match="File name too long"):
        load_scenario(scenario)


def test_nul_in_a_path_is_one_line():
    with pytest.raises(SpecError, match="NUL character"):
        read_user_text("a\x00b.yaml")
