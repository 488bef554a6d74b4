"""Random plan mappings through ``plan_from_mapping``: one line per mapping, the plan (``as_dict``, ``assumed``,
``inferred``) or the error line. A refactor of the plan (issue 27) must leave the output byte-identical:

    PYTHONPATH=<old>/src python tools/plan_mapping_fuzz.py --seed 0 > before.txt
    PYTHONPATH=$PWD/src python tools/plan_mapping_fuzz.py --seed 0 > after.txt && cmp before.txt after.txt

Values are drawn from each key's valid choices and a few invalid ones (wrong types, out of range, unknown
names), so both the defaults and the error messages are exercised.
"""

from __future__ import annotations

import argparse
import random

from tierwise.specs import plan as P
from tierwise.specs.framework import (
    ATTENTION_KERNELS,
    GRAD_REDUCE_DTYPES,
    MOE_DISPATCHERS,
    MOE_GROUPED_GEMMS,
    ZERO2_SYNC,
)
from tierwise.specs.plan_mapping import plan_from_mapping

_CHOICES = {"recompute": P.RECOMPUTE, "precision": P.PRECISION, "schedule": P.SCHEDULES, "order": P.ORDERS,
            "zero3_gather": P.ZERO3_GATHER, "grad_reduce_dtype": GRAD_REDUCE_DTYPES, "zero2_sync": ZERO2_SYNC,
            "attention_kernel": ATTENTION_KERNELS, "moe_dispatcher": MOE_DISPATCHERS,
            "moe_grouped_gemm": MOE_GROUPED_GEMMS}
_OTHER = {"pipeline_layout": ([8, 8], [4, 4, 4, 4], "Et*8|t*8L", [[8], [8]]), "torch_version": ("2.4", "2.7", 2.1, "x")}
_INTS = (0, 1, 2, 3, 4, 8, 16, -1, 2.5, "x", True, None)
_BOOLS = (True, False, "yes", 1, None)


def _value(rng: random.Random, key: str):
    if key in _CHOICES:
        return rng.choice([*_CHOICES[key], "bogus"])
    if key in _OTHER:
        return rng.choice(_OTHER[key])
    if key in P.Plan.__dict__ and isinstance(getattr(P.Plan(), key), bool) or key.startswith("account_for"):
        return rng.choice(_BOOLS)
    return rng.choice(_INTS)


def lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        data = {"global_batch_size": rng.choice([64, 128, 256, 1024, 7]), "seq_length": rng.choice([2048, 4096, 4097])}
        for key in rng.sample(P._KEYS, rng.randint(0, 8)):
            data[key] = _value(rng, key)
        if rng.random() < 0.2:
            data["framework"] = rng.choice(["megatron", "torchtitan", "deepspeed", "nemo", "bogus"])
        kw = {"num_gpus": rng.choice([8, 16, 64, 128]), "num_layers": rng.choice([None, 16, 32, 80]),
              "generation": rng.choice(["", "hopper", "ampere", "blackwell"]), "moe": rng.random() < 0.3}
        try:
            plan = plan_from_mapping(data, **kw)
            out.append(repr((plan.as_dict(), plan.assumed, plan.inferred, plan.num_gpus)))
        except Exception as exc:  # noqa: BLE001 - every error line is part of the output compared
            out.append(f"{type(exc).__name__}: {exc}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    print("\n".join(lines(args.seed, args.count)))


if __name__ == "__main__":
    main()
