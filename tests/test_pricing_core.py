"""One pricing core (issue 27): a training micro-batch's forward and a serving prefill of the same tokens are the
same kernel records priced by the same function, so ``estimate``'s ``breakdown.forward_layers_s`` and ``serve``'s
``phases.prefill_layers_s`` agree; serving has no efficiency law of its own; the import graph has no cycles."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from tierwise.cli import main

SRC = Path(__file__).resolve().parents[1] / "src" / "tierwise"


def _json(capsys, *args):
    rc = main([*args, "--json"])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


CASES = [
    # model, cluster, precision, attention kernel, tokens
    ("llama3.1-8b", "hgx-h200", "bf16", "auto", 8192),
    ("llama3.1-8b", "hgx-h200", "bf16", "flash2", 8192),
    ("llama3.1-70b", "dgx-h100", "bf16", "auto", 4096),
    ("llama3.1-70b", "dgx-a100", "bf16", "auto", 2048),
    ("mixtral-8x7b", "dgx-h100", "bf16", "auto", 4096),
    ("qwen3-30b-a3b", "gb200-nvl72", "bf16", "auto", 8192),
    ("llama3.1-8b", "mi300x-8", "bf16", "auto", 8192),
]


@pytest.mark.parametrize(("model", "cluster", "precision", "kernel", "tokens"), CASES)
def test_training_forward_equals_serving_prefill(capsys, tmp_path, model, cluster, precision, kernel, tokens):
    """The same model, part, precision, attention kernel and tokens on one GPU: the training model's forward
    through the layers and the serving model's prefill through the layers agree within 3% (they are one
    function; what may differ is only what each side puts around it)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"model: {model}\ncluster: {cluster}\nnum_gpus: 1\n"
        f"plan: {{tp: 1, pp: 1, cp: 1, ep: 1, micro_batch_size: 1, global_batch_size: 1, seq_length: {tokens},"
        f" recompute: full, zero_stage: 0, precision: {precision}, attention_kernel: {kernel},"
        f" fused_elementwise: true}}\n")
    train = _json(capsys, "estimate", str(scenario))["results"][0]
    served = _json(capsys, "serve", "--model", model, "--cluster", cluster, "--gpus", "1", "--tp", "1",
                   "--precision", precision, "--attention-kernel", kernel, "--input-len", str(tokens),
                   "--output-len", "16")
    fwd = train["breakdown"]["forward_layers_s"]
    prefill = served["phases"]["prefill_layers_s"]
    assert fwd > 0 and prefill > 0
    assert prefill == pytest.approx(fwd, rel=0.03)


def test_prefill_layers_follow_the_attention_kernel(capsys):
    """The prefill is priced by the attention family it names: FlashAttention-2 on an H200 (the sum of its
    GEMMs and exponentials, at its own efficiency) is slower than the generation's cuDNN-class default."""
    base = ["serve", "--model", "llama3.1-8b", "--cluster", "hgx-h200", "--gpus", "1", "--tp", "1",
            "--input-len", "16384", "--output-len", "16"]
    fa2 = _json(capsys, *base, "--attention-kernel", "flash2")["phases"]["prefill_layers_s"]
    auto = _json(capsys, *base)["phases"]["prefill_layers_s"]
    assert fa2 > 1.05 * auto


def test_serve_has_no_efficiency_law_of_its_own():
    """serve/ prices no kernel itself: no module of it reads a compute efficiency parameter or a part's peak
    HBM rate directly, nor the per-part fractions of specs/compute.py; every rate comes through tierwise.pricing
    (api.py checks that the part has the asked precision's peak, a validation, not a price)."""
    banned = ("matmul_efficiency", "attention_efficiency", "memory_bound_efficiency", "hbm_bytes_per_s",
              "matmul_residual", "hbm_residual", "compute_profile", "grouped_gemm_efficiency", "specs.compute")
    for path in sorted((SRC / "serve").glob("*.py")):
        text = path.read_text()
        for word in banned:
            assert word not in text, f"{path.name} uses {word}"


def test_decode_weights_read_at_the_gemm_roofline():
    """A batch-1 decode step of a dense model is memory-bound: its weight GEMMs take the weight bytes at the
    datasheet rate times (1 + matmul_memory_weight), the roofline every GEMM is priced on."""
    from tierwise.estimate.compute import compute_params
    from tierwise.serve.kv import weight_bytes_read_per_step
    from tierwise.serve.params import serving_parameters
    from tierwise.serve.phases import linear_time
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model

    model, cluster = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    got = float(np.asarray(linear_time(model, cluster, "bf16", 1, 1, 1.0, serving_parameters())))
    w = compute_params()["matmul_memory_weight"]
    head = 2.0 * model.hidden_size * model.vocab_size  # the LM head is not among the layers' GEMMs
    weights = float(np.asarray(weight_bytes_read_per_step(model, "bf16", 1, 1, 1.0))) - head
    want = weights * (1 + w) / cluster.accelerator.hbm_bytes_per_s
    assert got == pytest.approx(want, rel=0.01)


def _is_module(dotted: str) -> bool:
    path = SRC.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _module_imports(path: Path) -> set[str]:
    """Every tierwise module ``path`` imports (``from package import submodule`` is the submodule), at module
    level or inside a function (a lazy import is still a dependency)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tierwise"):
            subs = [f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")]
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("tierwise"))
    return out


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def test_modules_import_without_cycles():
    """No import cycle among tierwise's modules, the CLI's included; a package's ``__init__`` re-exporting its
    submodules is not a cycle of theirs."""
    import networkx as nx

    graph = nx.DiGraph()
    for path in SRC.rglob("*.py"):
        name = _module_name(path)
        if name in ("tierwise", "tierwise.__main__"):
            continue
        graph.add_node(name)
        for target in _module_imports(path):
            if target != name and target != "tierwise":
                graph.add_edge(name, target)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, cycles[:3]


def test_step_module_is_composition_only():
    """estimate/step.py composes; the pricing lives in pricing/ and parallel/ (under 400 lines)."""
    lines = (SRC / "estimate" / "step.py").read_text().splitlines()
    assert len(lines) < 400
    assert np.all([len(line) <= 120 for line in lines])
