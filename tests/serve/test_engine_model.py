"""The engine as a part (issue 31): host time per step from launches, scheduler work and overlap."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from tierwise.errors import ScenarioError
from tierwise.pricing.engine import engine_host_time
from tierwise.specs.engine import (
    DEFAULT_ENGINE,
    ENGINES,
    engine_for_software,
    engine_spec,
    parse_engine_catalog,
)


def test_every_catalog_entry_has_a_source_and_sane_values():
    for (name, version), e in ENGINES.items():
        assert e.name == name and e.version == version and len(e.source) > 80
        assert 0 <= e.step_s < 0.02 and 0 <= e.per_seq_s < 1e-3


def test_engine_catalog_is_yaml_and_its_loader_refuses_a_broken_entry():
    """The catalog is data (specs/catalog/engines.yaml); the loader names the entry and field of a bad value."""
    from importlib import resources

    text = resources.files("tierwise.specs").joinpath("catalog", "engines.yaml").read_text()
    table, default, software = parse_engine_catalog(text)
    assert table == ENGINES and default == DEFAULT_ENGINE == "vllm@0.8" and software[0] == ("splitwise", "vllm@0.2")
    assert ENGINES[("vllm", "0.2")].eager_launch_s == 10e-6 and not ENGINES[("vllm", "0.2")].cuda_graphs
    broken = [(text.replace("step_s: 9.0e-3", "step_s: -1.0"), "engines.vllm.0.2: step_s"),
              (text.replace("per_seq_s: 450.0e-6", "per_seq_s: fast"), "engines.vllm.0.2: per_seq_s"),
              (text.replace("default: vllm@0.8", "default: vllm@9"), "'vllm@9' is not a catalog engine"),
              (text.replace("      cuda_graphs: false\n", "", 1), "missing ['cuda_graphs']")]
    for bad, words in broken:
        assert bad != text
        with pytest.raises(AssertionError, match=re.escape(words)):
            parse_engine_catalog(bad)


def test_serial_overlapped_and_eager_host_time():
    """Serial: step_s + per_seq_s B + graph replay + the GPU idle between kernels. Overlapped: only what the GPU
    step does not cover. Eager: launches add only what they outrun the GPU by."""
    serial = dataclasses.replace(engine_spec("vllm@0.5"), step_s=1e-3, per_seq_s=1e-5)
    got = engine_host_time(serial, gpu_s=5e-3, batch=100, launches=1000, kernel_gap_s=2e-6)
    assert float(got) == pytest.approx(1e-3 + 1e-3 + serial.graph_replay_s + 2e-3)
    over = dataclasses.replace(serial, overlap=True)
    assert float(engine_host_time(over, gpu_s=5e-3, batch=100, launches=1000, kernel_gap_s=2e-6)) == \
        pytest.approx(2e-3)  # 2.02 ms of host work hides behind the 7 ms of kernels and gaps
    short = engine_host_time(over, gpu_s=np.array([0.0, 1e-3]), batch=100, launches=0, kernel_gap_s=0.0)
    assert np.allclose(short, [2.02e-3, 1.02e-3])
    eager = dataclasses.replace(serial, cuda_graphs=False, eager_launch_s=10e-6, step_s=0.0, per_seq_s=0.0)
    # 1,000 launches x 10 us = 10 ms of host launches against 5 ms of kernels: 5 ms exposed, plus the gaps
    assert float(engine_host_time(eager, gpu_s=5e-3, batch=1, launches=1000, kernel_gap_s=0.0)) == \
        pytest.approx(5e-3)
    assert float(engine_host_time(eager, gpu_s=20e-3, batch=1, launches=1000, kernel_gap_s=0.0)) == 0.0


def test_engine_names_versions_and_the_software_column():
    assert engine_spec("vllm").label == "vllm@0.11"
    assert engine_spec("vLLM@v0.6.3").label == "vllm@0.6"
    assert engine_spec("tensorrt-llm@1.2").label == "trtllm@1.0"
    for bad in ("vllm@x", "tgi", "sglang@0.1"):
        with pytest.raises(ScenarioError, match="use one of vllm@0.2"):
            engine_spec(bad)
    assert engine_for_software("vLLM-based serving (Splitwise characterization)") == "vllm@0.2"
    assert engine_for_software("TensorRT-LLM v1.0-era (PyTorch backend)") == "trtllm@1.0"
    assert engine_for_software("TensorRT-LLM (NVIDIA harness)") == "trtllm@0.12"
    assert engine_for_software("vLLM (ROCm) benchmark_latency.py") == "vllm@0.5"
    assert engine_for_software("Mooncake TE vs TCP") is None
