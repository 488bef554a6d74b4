"""`tierwise measure compute --hf-step` on the CPU: one Hugging Face training step (a 2-layer Llama of hidden 128,
random weights, seq 64) measured beside the estimator's prediction, the document and profile it writes, the
reverse mapping from a tierwise model to a transformers config, and the refusals (one line, exit code 2)."""

import contextlib
import io
import json
import sys

import jsonschema
import pytest
import yaml

from tierwise.cli import main
from tierwise.documents import schema
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import model_from_hf_config, model_from_mapping
from tierwise.specs.parameters import load_parameters

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tierwise.measure.hf_step import (  # noqa: E402
    CPU_NOTE,
    HF_STEP_KERNEL,
    HFStep,
    finish_hf_step,
    hf_config_for,
    prepare_hf_step,
)

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 4096, "tie_word_embeddings": False}
TINY_PARAMS = 2 * 1000 * 128 + 2 * (128 * 128 * 2 + 2 * 128 * 64 + 3 * 128 * 256 + 2 * 128) + 128


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _tiny(tmp_path, **changes) -> str:
    folder = tmp_path / "tiny-llama"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**TINY, **changes}))
    return str(folder)


@pytest.fixture(scope="module")
def step_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf")
    out = tmp / "profile.yaml"
    code, stdout, stderr = _cli("measure", "compute", "--cpu", "--cluster", "dgx-h100", "--iters", "1", "--warmup",
                                "0", "--hf-step", _tiny(tmp), "--hf-steps", "2", "--out", str(out), "--json")
    assert code == 0, stderr
    return json.loads(stdout), out


def test_the_step_runs_and_is_predicted(step_run):
    doc, _ = step_run
    hf = doc["hf_step"]
    assert hf["architecture"] == "LlamaForCausalLM" and hf["attention"] == "sdpa" and hf["attention_kernel"] == "sdpa"
    assert hf["params"] == TINY_PARAMS  # the config as written: GQA (2 KV heads of 32), SwiGLU, untied
    assert (hf["layers"], hf["seq"], hf["batch"], hf["steps_timed"]) == (2, 64, 1, 2)
    assert hf["measured_s"] > 0 and hf["predicted_s"] > 0
    assert hf["ratio"] == pytest.approx(hf["predicted_s"] / hf["measured_s"])
    assert hf["note"] == CPU_NOTE  # the CPU path says what the figure is not
    assert 0 < hf["predicted"]["compute_s"] < hf["predicted_s"]
    # the step's row sits with the kernels', its prediction the estimator's
    row = next(r for r in doc["rows"] if r["kernel"] == HF_STEP_KERNEL)
    pred = next(p for p in doc["predictions"] if p["kernel"] == HF_STEP_KERNEL)
    assert row["time_s"] == hf["measured_s"] and pred["predicted_s"] == hf["predicted_s"]
    errors = list(jsonschema.Draft202012Validator(schema("measure-compute")).iter_errors(doc))
    assert not errors, errors[0].message


def test_the_profile_keeps_the_step_and_still_loads_as_a_cluster(step_run):
    doc, out = step_run
    written = yaml.safe_load(out.read_text())
    rows = [r for r in written["compute_rows"] if r["kernel"] == HF_STEP_KERNEL]
    assert len(rows) == 1 and rows[0]["predicted_s"] == pytest.approx(doc["hf_step"]["predicted_s"], rel=1e-3)
    assert load_cluster(str(out)).compute["matmul_efficiency_max"] == pytest.approx(
        doc["compute"]["matmul_efficiency_max"], rel=1e-3)


def test_the_prediction_uses_the_compute_block_measured(tmp_path):
    """Priced with half the GEMM fraction the step is predicted slower; eager attention is the unfused core."""
    base = load_cluster("dgx-h100")
    keys = {"base": "dgx-h100"}
    run = prepare_hf_step(HFStep(model=_tiny(tmp_path), seq=2048, batch=4, layers=2), keys, "dgx-h100", "cpu")
    run.samples.append(0.01)
    fast = finish_hf_step(run, keys, "dgx-h100", {"matmul_efficiency_max": 0.8}, "cpu", cpu=False,
                          parameters=load_parameters())[0]
    slow = finish_hf_step(run, keys, "dgx-h100", {"matmul_efficiency_max": 0.08}, "cpu", cpu=False,
                          parameters=load_parameters())[0]
    assert slow["predicted_s"] > fast["predicted_s"] and fast["note"] == ""
    assert base.accelerator.name == "h100-sxm"
    eager = prepare_hf_step(HFStep(model=_tiny(tmp_path), attention="eager"), keys, "dgx-h100", "cpu")
    assert eager.plan.attention_kernel == "unfused" and not eager.plan.fused_elementwise


@pytest.mark.parametrize("extra", [
    {"gated_mlp": True, "num_kv_heads": 2},  # Llama
    {"gated_mlp": True, "ffn_hidden_size": 96, "moe": {"num_experts": 4, "top_k": 2, "ffn_hidden_size": 96}},  # Mixtral
    {"gated_mlp": True, "sliding_window": 32, "sliding_window_layers": 2},  # Mistral
    {"gated_mlp": True, "ffn_hidden_size": 96, "sliding_window": 32, "sliding_window_layers": 2,
     "moe": {"num_experts": 4, "top_k": 2, "ffn_hidden_size": 96}},  # Mixtral with a window
    {"gated_mlp": False, "bias": True, "tied_embeddings": True},  # GPT-2
    {"gated_mlp": False, "bias": True, "rotary": True, "norm": "layernorm"},  # GPT-NeoX
    {"gated_mlp": False, "rotary": True, "norm": "layernorm"},  # Nemotron
    {"gated_mlp": True, "head_dim": 24, "moe": {"num_experts": 4, "top_k": 2, "ffn_hidden_size": 96, "shared_experts": 1,
                                "shared_ffn_hidden_size": 96, "first_dense_layers": 1},
     "mla": {"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
             "v_head_dim": 16}},  # DeepSeek-V3
])
def test_a_tierwise_model_maps_to_a_transformers_config_that_reads_back(extra):
    spec = model_from_mapping({"name": "t", "num_layers": 2, "hidden_size": 128, "ffn_hidden_size": 384,
                               "num_attention_heads": 4, "vocab_size": 1000, **extra}, origin="test")
    back = model_from_hf_config(hf_config_for(spec).to_dict())
    for key in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
                "vocab_size", "gated_mlp", "tied_embeddings", "moe", "mla", "sliding_window"):
        assert getattr(back, key) == getattr(spec, key), key


def _refused(*args):
    code, stdout, stderr = _cli("measure", "compute", "--cpu", "--cluster", "dgx-h100", "--iters", "1", *args)
    assert code == 2 and stdout == "" and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    return stderr


def test_refusals_are_one_line_before_anything_runs(tmp_path, monkeypatch):
    assert "needs about" in _refused("--hf-step", "llama3.1-405b", "--hf-layers", "126")  # TBs, on any machine
    assert "unknown model" in _refused("--hf-step", "llama9-77b")
    bad = tmp_path / "bad" / "config.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    assert "config.json" in _refused("--hf-step", str(bad))
    assert "cannot read it" in _refused("--hf-step", _tiny(tmp_path, model_type="warp-drive"))
    assert "has 2 layers" in _refused("--hf-step", _tiny(tmp_path), "--hf-layers", "3")
    assert "--hf-attention" in _refused("--hf-step", _tiny(tmp_path), "--hf-attention", "flash")
    gpt2 = tmp_path / "gpt2" / "config.json"
    gpt2.parent.mkdir()
    gpt2.write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64,
                                "n_layer": 2, "n_head": 4, "vocab_size": 256, "n_positions": 32}))
    assert "learns 32 positions" in _refused("--hf-step", str(gpt2))  # --cpu's sequence is 64
    monkeypatch.setitem(sys.modules, "transformers", None)  # not installed
    assert "pip install 'tierwise[hf]'" in _refused("--hf-step", _tiny(tmp_path))


def test_ctrl_c_in_the_step_keeps_the_kernels_and_the_steps_timed(tmp_path, monkeypatch):
    import tierwise.measure.compute as mc
    import tierwise.measure.hf_step as hs

    def kernels(bench, rows, on_row=None):
        rows.append({"kernel": "gemm", "shape": "512x512x512", "dtype": "bf16", "time_s": 0.01, "flops": 2.0 * 512**3,
                     "bytes": 0.0, "flops_per_s": 2.0 * 512**3 / 0.01, "bytes_per_s": None, "m": 512, "n": 512,
                     "k": 512, "use": "training", "device": "cpu (x86_64)"})

    def step(run, device):
        run.info = {"architecture": "LlamaForCausalLM", "transformers": "x", "attention": "sdpa",
                    "optimizer": "foreach", "params": 1}
        run.samples.append(0.02)
        raise KeyboardInterrupt

    monkeypatch.setattr(mc, "run_compute", kernels)
    monkeypatch.setattr(hs, "run_hf_step", step)
    out = tmp_path / "partial.yaml"
    code, _, stderr = _cli("measure", "compute", "--cpu", "--cluster", "dgx-h100", "--out", str(out), "--hf-step",
                           _tiny(tmp_path))
    assert code == 130 and "1 kernels measured and 1 timed --hf-step steps are in" in stderr
    rows = yaml.safe_load(out.read_text())["compute_rows"]
    assert [r["kernel"] for r in rows] == ["gemm", HF_STEP_KERNEL] and rows[1]["time_s"] == 0.02


def test_a_tierwise_model_file_runs_through_its_nearest_architecture(tmp_path):
    """A model YAML (GPT-2 shaped: GELU, LayerNorm, biases, tied) becomes GPT2LMHeadModel and trains a step."""
    from tierwise.measure.hf_step import run_hf_step

    path = tmp_path / "tiny-gpt.yaml"
    path.write_text("num_layers: 2\nhidden_size: 64\nffn_hidden_size: 256\nnum_attention_heads: 4\n"
                    "vocab_size: 512\ngated_mlp: false\nbias: true\ntied_embeddings: true\n")
    keys = {"base": "dgx-h100"}
    run = prepare_hf_step(HFStep(model=str(path), steps=1, warmup=1, seq=32), keys, "dgx-h100", "cpu")
    run_hf_step(run, "cpu")
    assert run.info["architecture"] == "GPT2LMHeadModel" and len(run.samples) == 1 and run.samples[0] > 0
    # tied 512 x 64 embedding, 32 x 64 learned positions (the step's sequence), per layer 4 h^2 + 4 h attention,
    # 2 h f + f + h MLP, two LayerNorms (4 h); the final LayerNorm (2 h)
    h, f = 64, 256
    assert run.info["params"] == 512 * h + 32 * h + 2 * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h) + 2 * h


def test_hf_layers_keeps_the_first_layers_of_both(tmp_path):
    """--hf-layers 3 of a 4-layer config whose layer_types alternate: one sliding-window layer kept in the
    transformers config and in the model the estimator prices."""
    types = ["full_attention", "sliding_attention"] * 2
    folder = _tiny(tmp_path, architectures=["Qwen2ForCausalLM"], model_type="qwen2", num_hidden_layers=4,
                   layer_types=types, sliding_window=16, use_sliding_window=True, max_window_layers=0)
    run = prepare_hf_step(HFStep(model=folder, layers=3), {"base": "dgx-h100"}, "dgx-h100", "cpu")
    assert run.config.num_hidden_layers == 3 and run.config.layer_types == types[:3]
    assert (run.spec.num_layers, run.spec.sliding_window, run.spec.sliding_window_layers) == (3, 16, 1)
