"""The documents of the tools around the model: calibrate, catalog, sweep, measure and testbed.

Shapes are written in the notation of :mod:`tierwise.documents._spec`. Commands whose answer is a list of
measured rows put it under ``rows``.
"""

from __future__ import annotations

__all__ = ["DOCUMENTS"]

CALIBRATE = {"base": "str", "name": "str", "source": "str", "fitted": "obj"}

ENTRY = {"name": "str", "display_name": "str", "source": "str"}
CATALOG_LIST = {"accelerators": [ENTRY], "clusters": [ENTRY], "models": [ENTRY], "network": [ENTRY]}
CATALOG_SHOW = {"kind": "str", "name": "str", "source": "str"}

SWEEP_RUN = {
    "out": "str", "shard": "str", "executor": "str", "workers": "int", "points_in_grid": "int",
    "points_in_shard": "int", "already_done": "int", "ran": "int", "status_counts": "obj",
    "part_files_written": "int", "already_stored_by_another_run": "int", "wall_s": "num",
}
SWEEP_SHOW = {
    "summary": {"out": "str", "part_files": "int", "rows": "int", "points": "int", "duplicate_rows": "int",
                "status_counts": "obj"},
    "?query": {"query": "str", "columns": "list[str]", "rows": "list[list]", "truncated": "bool"},
}

MEASURED_COLLECTIVE = {
    "op": "str", "num_ranks": "int", "size_bytes": "int", "time_s": "num", "algbw_bytes_per_s": "num",
    "busbw_bytes_per_s": "num",
}
MEASURE_COLLECTIVE = {"rows": [{**MEASURED_COLLECTIVE, "backend": "str", "wrong": "int", "iters": "int"}]}
MEASURE_GEMM = {"rows": [{"m": "int", "n": "int", "k": "int", "dtype": "str", "time_s": "num",
                          "flops_per_s": "num", "device": "str"}]}
MEASURE_HBM = {"rows": [{"kernel": "str", "size_bytes": "int", "bytes_moved": "int", "time_s": "num",
                         "bytes_per_s": "num", "device": "str"}]}
HF_STEP = {
    "model": "str", "architecture": "str", "transformers": "str", "attention": "str", "attention_kernel": "str",
    "optimizer": "str", "params": "int", "layers": "int", "seq": "int", "batch": "int", "precision": "str",
    "steps_timed": "int", "samples_s": "list[num]", "measured_s": "num", "predicted_s": "num", "ratio": "num",
    "predicted": {"compute_s": "num", "attention_s": "num", "memory_bound_s": "num", "optimizer_s": "num"},
    "model_flops": "num", "memory_estimate": {"total_bytes": "num"}, "note": "str", "interrupted": "bool",
}
MEASURE_COMPUTE = {
    "device": "obj", "cluster": "str", "accelerator": "str", "compute": "obj", "rows": "list[obj]",
    "predictions": "list[obj]", "warnings": "list[str]", "interrupted": "bool",
    "?hf_step": HF_STEP,  # with --hf-step: one Hugging Face training step, measured and predicted
}
MEASURE_DDP = {
    "num_ranks": "int", "config": "obj", "num_params": "int", "forward_s": "num", "backward_s": "num",
    "compute_s": "num", "step_s": "num", "comm_s": "num", "exposed_comm_s": "num", "predicted_comm_s": "num",
    "predicted_exposed_comm_s": "num", "prediction_error_pct": "num?",
}

TESTBED_UP = {
    "spec": "obj", "namespaces": "list[str]", "links": "list[obj]", "repaired": "list", "probes": "obj",
    "latency": "str?", "cluster_file": "str", "assumed": "list[str]",
}
TESTBED_DOWN = {"removed": "list[str]", "left": "list[str]"}
TESTBED_ROWS = {"rows": [{"op": "str", "algorithm": "str", "size_bytes": "int", "measured_s": "num"}]}

DOCUMENTS = {
    "calibrate": ("calibrate", "Latency and bandwidth per size regime fitted from measurements (the fitted: "
                               "block written into the calibrated cluster YAML).", CALIBRATE),
    "catalog-list": ("catalog list", "The shipped catalog: accelerators, clusters, models and network parts.",
                     CATALOG_LIST),
    "catalog-show": ("catalog show", "One catalog entry as loaded; kind says whether it is an accelerator, "
                                     "a cluster, a model or a network part.", CATALOG_SHOW),
    "sweep-run": ("sweep run", "What a sweep run did: points in the grid and the shard, run, skipped, "
                               "stored.", SWEEP_RUN),
    "sweep-show": ("sweep show", "A sweep's results folder: its summary, and a query's rows.", SWEEP_SHOW),
    "measure-collective": ("measure collective", "Measured collectives (nccl-tests' columns), one row per "
                                                 "op and size.", MEASURE_COLLECTIVE, "rows"),
    "measure-gemm": ("measure gemm", "Measured GEMM times and rates on this GPU, one row per shape.",
                     MEASURE_GEMM, "rows"),
    "measure-hbm": ("measure hbm", "Measured memory copy rates on this GPU, one row per kernel and size.",
                    MEASURE_HBM, "rows"),
    "measure-compute": ("measure compute", "Measured kernels on one device and the compute: block they "
                                           "give, with the model's prediction beside each.", MEASURE_COMPUTE),
    "measure-ddp": ("measure ddp", "A small DistributedDataParallel run: compute, communication and exposed "
                                   "time, measured and predicted.", MEASURE_DDP),
    "testbed-up": ("testbed up", "The testbed brought up: namespaces, links, probes and its cluster file.",
                   TESTBED_UP),
    "testbed-down": ("testbed down", "The testbed's namespaces removed, and any left.", TESTBED_DOWN),
    "testbed-run": ("testbed run", "Collectives measured across the testbed, one row per op and size.",
                    TESTBED_ROWS, "rows"),
    "testbed-ddp": ("testbed ddp", "measure ddp with its ranks in the testbed's nodes.", MEASURE_DDP),
    "testbed-check": ("testbed check", "Measured against analytic and simulated times, one row per op and "
                                       "size.", TESTBED_ROWS, "rows"),
}
