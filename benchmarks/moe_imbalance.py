"""The dropless load imbalance of a trained router, from the Megatron MoE Model Zoo's forced-balance A/B runs.

Source: github.com/yanring/Megatron-MoE-ModelZoo best_practice/Qwen3/readme.md @c1ad0b5c, "Long Context" table:
Qwen3-235B-A22B, H100, 32 nodes (256 GPUs), DeepEP, bf16, TP 4, PP 8, VPP 4, EP 8, GBS 256 (its command line;
expert TP 1 and MBS 1 from model_configs/benchmarking/Qwen3-235B-A22B.yaml and runtime_configs/benchmarking/
runtime.conf), each sequence length run twice, with ``--moe-router-force-load-balancing`` and dropless:

    seq 16384 (CP 1): 295 / 237 TFLOPS;  32768 (CP 2): 335 / 277;  65536 (CP 4): 368 / 320;
    131072 (CP 8): 389 / 357.

The two runs of a pair differ only in how the router spreads the tokens, so the ratio of their step times is
what the imbalance costs. The model prices a trained router's load as the busiest EP rank's tokens over the
mean, ``I`` (``moe_load_imbalance``), on the routed-expert GEMMs and the dispatch / combine
(``estimate.step.moe_imbalance``); this script solves ``T(I) / T(1) = forced / dropless`` for ``I`` on each
pair with the shipped parameters. Bias: the runs recompute the MoE block (``--recompute-modules layernorm
moe``), which the model does not price, so its imbalance-sensitive share of the step is too small by up to
a third of the MoE forward and the solved ``I`` is a little high.

Run: ``PYTHONPATH=src python benchmarks/moe_imbalance.py`` (seconds). Prints one line per pair and the median.
"""

from __future__ import annotations

import numpy as np

PAIRS = ((16384, 1, 295.0, 237.0), (32768, 2, 335.0, 277.0), (65536, 4, 368.0, 320.0), (131072, 8, 389.0, 357.0))


def main() -> None:
    from scipy.optimize import brentq

    from tierwise.estimate.step import estimate
    from tierwise.specs.plan import PlanBatch
    from tierwise.specs.plan_mapping import plan_from_mapping
    from tierwise.validate.run import load_cases

    case = next(c for c in load_cases() if c.row_id == "441")  # the same model on the same 256-GPU H100 cluster
    model, cluster = case.model, case.cluster
    solved = []
    for seq, cp, forced, dropless in PAIRS:
        plan = plan_from_mapping({"tp": 4, "pp": 8, "vpp": 4, "cp": cp, "ep": 8, "etp": 1, "micro_batch_size": 1,
                                  "global_batch_size": 256, "seq_length": seq, "moe_dispatcher": "deepep",
                                  "recompute": "none"},
                                 num_gpus=256, num_layers=model.num_layers, framework="megatron", generation="hopper",
                                 moe=True)
        batch = PlanBatch.from_plans([plan])

        def step(i, batch=batch):
            return float(estimate(model, cluster, batch, params={"moe_load_imbalance": i}).step_time_s[0])

        ratio = forced / dropless
        base = step(1.0)
        imb = brentq(lambda i, base=base, ratio=ratio: step(i) / base - ratio, 1.0, 5.0)
        moe_share = (step(1.001) - base) / base / 0.001
        solved.append(imb)
        print(f"seq {seq:6d} cp {cp}: forced/dropless {ratio:.3f}  imbalance-sensitive share {moe_share:.3f}  "
              f"I = {imb:.3f}")
    print(f"median I = {float(np.median(solved)):.3f}  (range {min(solved):.3f}-{max(solved):.3f})")


if __name__ == "__main__":
    main()
