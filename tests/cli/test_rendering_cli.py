"""What users read (issue 12): names print as text, --json is the only thing on stdout, --version, the
parsed model, the assumed fp32 gradient reduction, the DP group counted one way, the collective/simulate
comparison and the failed parts of a simulation."""

import json
import textwrap
from pathlib import Path

import pytest

from tierwise.cli import main

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
MARKUP = "x[/bold]"  # a closing tag with no opening one: rich markup raises MarkupError on it


def _run(capsys, *argv, rc=0):
    got = main(list(argv))
    captured = capsys.readouterr()
    assert got == rc, captured.err
    assert "Traceback" not in captured.err
    return captured


def _json(capsys, *argv):
    return json.loads(_run(capsys, *argv, "--json").out)


def _write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


def _hf_config(tmp_path: Path, name: str, source: str = "Llama-3.1-8B.config.json", name_or_path=None) -> str:
    data = json.loads((HF / source).read_text())
    if name_or_path is not None:
        data["_name_or_path"] = name_or_path
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def markup_files(tmp_path):
    """A cluster file, an HF config and a scenario whose names are rich markup."""
    cluster = _write(tmp_path / "c.yaml", f"""
        base: dgx-h100
        name: "c{MARKUP}"
        display_name: "[red]cluster {MARKUP}"
    """)
    model = _hf_config(tmp_path, "m.json", name_or_path=f"m{MARKUP}")
    scenario = _write(tmp_path / "s.yaml", f"""
        model: {{name: "{MARKUP}", num_layers: 4, hidden_size: 1024, ffn_hidden_size: 4096,
                 num_attention_heads: 8, num_kv_heads: 8, vocab_size: 32000, gated_mlp: true}}
        cluster: c.yaml
        num_gpus: 16
        plan: {{tp: 2, global_batch_size: 64, seq_length: 2048}}
    """)
    return {"cluster": cluster, "model": model, "scenario": scenario, "dir": tmp_path}


def test_estimate_prints_markup_names_literally(capsys, markup_files):
    out = _run(capsys, "estimate", markup_files["scenario"]).out
    assert f"{MARKUP} on 16 x c{MARKUP}" in out


def test_plan_and_scale_print_markup_names_literally(capsys, markup_files):
    out = _run(capsys, "plan", "--model", markup_files["model"], "--cluster", markup_files["cluster"],
               "--gpus", "16", "--global-batch", "64", "--seq", "2048", "--top", "2").out
    assert f"m{MARKUP} on 16 x c{MARKUP}" in out
    out = _run(capsys, "scale", "--model", markup_files["model"], "--cluster", markup_files["cluster"],
               "--gpus", "8,16", "--global-batch", "64", "--seq", "2048").out
    assert f"m{MARKUP} on c{MARKUP}" in out


def test_tiers_and_collective_print_markup_names_literally(capsys, markup_files):
    out = _run(capsys, "tiers", markup_files["cluster"]).out
    assert f"[red]cluster {MARKUP}" in out
    out = _run(capsys, "collective", "all-reduce", "--size", "1GB", "--ranks", "16",
               "--cluster", markup_files["cluster"]).out
    assert f"(c{MARKUP})" in out


def test_a_failing_file_among_several_prints_its_name_literally(capsys, markup_files):
    missing = str(markup_files["dir"] / "[red]gone.yaml")
    captured = _run(capsys, "estimate", markup_files["scenario"], missing, rc=2)
    assert f"{MARKUP} on 16 x" in captured.out  # the good file's result stays on stdout
    assert captured.err.startswith(f"error: {missing}: ") and len(captured.err.splitlines()) == 1


def test_width_follows_columns_and_a_pipe_gets_whole_tables(capsys, monkeypatch):
    from tierwise.cli._output import console

    monkeypatch.setenv("COLUMNS", "100")
    assert console().width == 100
    monkeypatch.delenv("COLUMNS")
    out = _run(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
               "--global-batch", "64", "--seq", "2048", "--top", "2").out
    header = next(line for line in out.splitlines() if "tokens/s" in line)
    assert "exposed scale_out" in header and "…" not in header  # an 80-column console would cut it


@pytest.mark.parametrize("argv", [
    ["tiers", "dgx-h100"],
    ["collective", "all-gather", "--size", "64MB", "--ranks", "16"],
    ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
     "--seq", "2048", "--top", "2"],
    ["simulate", "all-reduce", "--gpus", "64", "--radix", "8", "--fail-links", "2"],
])
def test_json_stdout_is_one_document(capsys, argv):
    out = _run(capsys, *argv, "--json").out
    json.loads(out)  # nothing else on stdout: notes and progress are in the document or on stderr


def test_interrupted_measure_collective_keeps_stdout_empty(tmp_path, capsys, monkeypatch):
    import tierwise.measure.bench as bench

    def interrupted(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "require_torch", lambda: None)
    monkeypatch.setattr(bench, "run_collectives", interrupted)
    captured = _run(capsys, "measure", "collective", "--out", str(tmp_path / "r.json"), "--json", rc=130)
    assert captured.out == ""
    assert captured.err == f"interrupted: the completed sizes are in {tmp_path / 'r.json'}\n"


def test_version(capsys):
    from tierwise import __version__

    assert _run(capsys, "--version").out == f"tierwise {__version__}\n"


def test_completion_is_offered_and_help_still_works(capsys):
    out = _run(capsys, "--help").out
    assert "--install-completion" in out and "--version" in out and "estimate" in out


def test_estimate_shows_what_a_config_json_was_parsed_into(capsys, tmp_path):
    model = _hf_config(tmp_path, "qwen.json", "Qwen3-30B-A3B.config.json")
    scenario = _write(tmp_path / "s.yaml", f"""
        model: {model}
        cluster: dgx-h100
        num_gpus: 64
        plan: {{ep: 8, global_batch_size: 256, seq_length: 4096}}
    """)
    s = _json(capsys, "estimate", scenario)["results"][0]["model_summary"]
    assert (s["layers"], s["hidden_size"], s["attention_heads"], s["kv_heads"], s["head_dim"]) == (48, 2048, 32, 4, 128)
    assert (s["experts"], s["top_k"], s["moe_layers"], s["vocab_size"]) == (128, 8, 48, 151936)
    assert s["parameters"] == pytest.approx(30.5e9, rel=0.02)  # Qwen3-30B-A3B: 30.5B total, 3.3B active
    assert s["active_parameters"] == pytest.approx(3.3e9, rel=0.05)
    out = _run(capsys, "estimate", scenario, "--show-model").out
    assert "model (as parsed)" in out and "128 experts top-8" in out and "4 KV heads" in out
    assert "kv_heads" in out  # the --show-model table lists every field


def test_a_dense_config_json_has_no_experts(capsys, tmp_path):
    model = _hf_config(tmp_path, "llama.json")
    scenario = _write(tmp_path / "s.yaml", f"""
        model: {model}
        cluster: dgx-h100
        num_gpus: 8
        plan: {{tp: 8, global_batch_size: 8, seq_length: 4096}}
    """)
    s = _json(capsys, "estimate", scenario)["results"][0]["model_summary"]
    assert s["experts"] is None and s["kv_heads"] == 8 and s["layers"] == 32
    assert s["parameters"] == s["active_parameters"] == pytest.approx(8.03e9, rel=0.01)


def _scenario(tmp_path, plan: str, num_gpus: int) -> str:
    return _write(tmp_path / "s.yaml", f"""
        model: llama3.1-8b
        cluster: dgx-h100
        num_gpus: {num_gpus}
        plan: {plan}
    """)


def test_fp32_gradient_reduction_is_assumed_where_gradients_are_reduced(capsys, tmp_path):
    scenario = _scenario(tmp_path, "{tp: 8, global_batch_size: 64, seq_length: 4096}", 64)
    doc = _json(capsys, "estimate", scenario)["results"][0]
    assert any(a.startswith("gradient reduction in fp32") for a in doc["assumed"])
    scenario = _scenario(tmp_path, "{tp: 8, global_batch_size: 8, seq_length: 4096}", 8)
    doc = _json(capsys, "estimate", scenario)["results"][0]
    assert not any("gradient reduction" in a for a in doc["assumed"])  # dp 1: nothing is reduced


def test_dp_group_is_counted_the_same_in_the_table_and_the_explanation(capsys, tmp_path):
    doc = _json(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64",
                "--global-batch", "64", "--seq", "8192", "--cp", "2", "--tp", "1", "--pp", "1", "--top", "1")
    best = doc["plans"][0]
    dp_row = best["estimate"]["breakdown"]["per_axis"]["dp"]
    assert best["dp"] == 32 and dp_row["ranks"] == 64 and dp_row["group"] == "dp x cp"
    assert "DP (dp x cp = 32 x 2 = 64 ranks)" in doc["explanation"]
    scenario = _scenario(tmp_path, "{cp: 2, global_batch_size: 64, seq_length: 8192}", 64)
    out = _run(capsys, "estimate", scenario).out
    assert "dp x cp (64)" in out


def test_hidden_shares_are_labelled_modelled_and_no_jargon(capsys):
    doc = _json(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64",
                "--global-batch", "64", "--seq", "8192", "--top", "1")
    text = doc["explanation"]
    assert "seeds" not in text
    assert "modelled" in text and "hidden" in text
    assert "overlap is modelled, not measured" in text and "overlap_interference" in text


def test_collective_and_simulate_say_why_their_rings_differ(capsys):
    col = _json(capsys, "collective", "all-reduce", "--size", "1GB", "--ranks", "64", "--algorithm", "ring")
    note = next(n for n in col["notes"] if n.startswith("against `tierwise simulate`"))
    assert "line rate" in note and "latencies" in note
    sim = _json(capsys, "simulate", "all-reduce", "--size", "1GB", "--gpus", "64", "--ranks", "64",
                "--algorithm", "ring")
    # the simulated fat-tree has dgx-h100's figures: both sides name the same model time
    assert sim["collective_model_time_s"] == pytest.approx(col["time_s"], rel=1e-9)
    assert sim["time_s"] < col["time_s"]
    assert any(n.startswith("against `tierwise collective`") for n in sim["notes"])
    sim = _json(capsys, "simulate", "all-reduce", "--size", "1GB", "--gpus", "256", "--tiers", "2",
                "--oversubscription", "2", "--routing", "ecmp")
    assert sim["time_s"] > 1.05 * sim["analytic_time_s"]
    slow = next(n for n in sim["notes"] if n.startswith("simulated"))
    assert "2:1 oversubscription" in slow and "saturated" in slow


def test_simulate_names_the_failed_parts(capsys):
    argv = ["simulate", "all-reduce", "--gpus", "256", "--fail-links", "3", "--fail-switches", "2",
            "--fail-domains", "1"]
    r = _json(capsys, *argv)
    parts = r["failures"]["failed_parts"]
    assert len(parts["cables"]) == r["failures"]["failed_cables"] == 3
    assert len(parts["switches"]) == 2 and len(parts["domains"]) == 1
    assert all(" <-> " in c for c in parts["cables"])
    out = _run(capsys, *argv).out
    assert "failed cables (3)" in out and "failed switches (2)" in out
    for name in parts["cables"] + parts["switches"]:
        assert name in out
    assert parts["domains"][0] in out


def test_markup_in_the_file_name_of_a_model(capsys, tmp_path):
    """A config.json without _name_or_path is named after its file: ``[bold]m.json`` is model ``[bold]m``."""
    data = json.loads((HF / "Llama-3.1-8B.config.json").read_text())
    data.pop("_name_or_path", None)
    model = tmp_path / "[bold]m.json"
    model.write_text(json.dumps(data))
    out = _run(capsys, "plan", "--model", str(model), "--cluster", "dgx-h100", "--gpus", "8",
               "--global-batch", "16", "--seq", "2048", "--top", "1").out
    assert "[bold]m on 8 x dgx-h100" in out


@pytest.mark.parametrize("config, total, active, layers, kv_heads, experts", [
    ("DeepSeek-V3.config.json", 671e9, 37e9, 61, 128, 256),  # published: 671B total, 37B activated
    ("Mixtral-8x7B-v0.1.config.json", 46.7e9, 12.9e9, 32, 8, 8),  # Mistral: 46.7B total, 12.9B active
])
def test_model_summary_of_moe_configs(config, total, active, layers, kv_heads, experts):
    from tierwise.estimate.scenario import model_summary
    from tierwise.specs.model import load_model

    s = model_summary(load_model(HF / config))
    assert s["parameters"] == pytest.approx(total, rel=0.01)
    assert s["active_parameters"] == pytest.approx(active, rel=0.02)
    assert (s["layers"], s["kv_heads"], s["experts"]) == (layers, kv_heads, experts)


@pytest.mark.parametrize("width", ["0", "1", "39", "000"])
def test_a_terminal_too_narrow_for_a_table_is_one_line_not_nothing(capsys, monkeypatch, width):
    # issue 32 (empty answers): COLUMNS=0 used to print nothing and exit 0
    monkeypatch.setenv("COLUMNS", width)
    captured = _run(capsys, "tiers", "dgx-h100", rc=2)
    assert captured.out == ""
    assert captured.err.startswith(f"error: COLUMNS={width} is too narrow") and captured.err.count("\n") == 1
    assert "--json" in captured.err


def test_json_and_wide_enough_terminals_do_not_depend_on_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "0")
    assert json.loads(_run(capsys, "tiers", "dgx-h100", "--json").out)
    monkeypatch.setenv("COLUMNS", "40")
    assert "scale_out" in _run(capsys, "tiers", "dgx-h100").out
    monkeypatch.setenv("COLUMNS", "wide")  # not a number: ignored, as rich ignores it
    assert "scale_out" in _run(capsys, "tiers", "dgx-h100").out
