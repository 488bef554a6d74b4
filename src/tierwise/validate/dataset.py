"""The calibration dataset: published, measured training runs in the columns of ``training-runs.csv``.

The package ships a copy of ``shared/data/calibration/training-runs.csv`` and its notes in
``tierwise/data/``; a user may pass their own CSV with the same columns (extra columns are ignored).
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from pathlib import Path

from tierwise.errors import SpecError
from tierwise.files import read_user_text

__all__ = ["DatasetError", "COLUMNS", "REQUIRED_COLUMNS", "load_rows", "default_dataset_path"]


class DatasetError(SpecError):
    """A calibration dataset that cannot be read (missing file, missing columns, unknown source)."""


COLUMNS = (
    "row_id", "source_id", "source", "source_table", "source_ref", "model_name", "params_b", "num_layers",
    "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "vocab_size",
    "seq_length", "moe_num_experts", "moe_shared_experts", "moe_top_k", "moe_ffn_hidden_size", "arch_notes",
    "gpu_type", "hardware_id", "num_gpus", "gpus_per_node", "system", "intra_node_interconnect",
    "inter_node_network", "tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size", "global_batch_size",
    "grad_accum", "activation_recompute", "sequence_parallel", "zero_fsdp", "precision", "framework",
    "tflops_per_gpu", "tflops_kind", "mfu_pct", "hfu_pct", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
    "other_metric", "flops_counting", "peak_tflops_assumed", "derived_fields", "confidence", "notes",
)
"""The 54 columns of training-runs.csv (training-runs-notes.md)."""

REQUIRED_COLUMNS = (
    "row_id", "source_id", "model_name", "num_layers", "hidden_size", "num_attention_heads", "seq_length",
    "hardware_id", "num_gpus", "tp", "pp", "global_batch_size", "precision", "flops_counting", "confidence",
)
"""Columns a user's CSV must have; the others are read when present."""


def default_dataset_path() -> Path:
    """The shipped copy of training-runs.csv."""
    return Path(str(resources.files("tierwise").joinpath("data", "training-runs.csv")))


def load_rows(path: str | Path | None = None) -> list[dict[str, str]]:
    """Rows of a calibration CSV as dicts of stripped strings (every known column present, "" if absent)."""
    p = Path(path) if path is not None else default_dataset_path()
    text = read_user_text(p, what="dataset", error=DatasetError)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise DatasetError(
                f"{str(p)!r} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; a dataset needs "
                f"the columns of training-runs.csv (see training-runs-notes.md)"
            )
        rows = []
        for raw in reader:
            rows.append({c: (raw.get(c) or "").strip() for c in COLUMNS})
    except csv.Error as exc:
        raise DatasetError(f"dataset {str(p)!r} is not a readable CSV (line {reader.line_num}: {exc}); fix the "
                           "quoting there") from None
    if not rows:
        raise DatasetError(f"dataset {str(p)!r} has a header but no rows")
    return rows
