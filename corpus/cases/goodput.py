"""tierwise goodput (issue 15): hostile numbers in its own options and a hostile failure-rates file; one line,
exit 2, naming the option or the key."""

from __future__ import annotations

from corpus.harness import Case

CASES: list[Case] = []

_BASE = ["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8",
         "--seq", "2048"]

for _name, _value in {"neg": "-1", "nan": "nan", "inf": "inf", "huge": "1e400", "abc": "abc"}.items():
    CASES.append(Case(id=f"goodput/node-failure-rate-{_name}", argv=[*_BASE, "--node-failure-rate", _value],
                      stderr_has=["--node-failure-rate"]))
for _opt, _value in (("--days", "0"), ("--days", "-5"), ("--days", "nan"), ("--runs", "-1"), ("--runs", "10000000"),
                     ("--seed", "-1"), ("--spares", "-2"), ("--checkpoint-interval", "-5 min"),
                     ("--checkpoint-interval", "banana"), ("--checkpoint-write", "often"),
                     ("--checkpoint-write", "-3 s"), ("--restart-time", "nan"), ("--storage-bandwidth", "0 GB/s"),
                     ("--storage-bandwidth", "fast"), ("--tokens", "-1"), ("--tokens", "1e400")):
    CASES.append(Case(id=f"goodput/{_opt.lstrip('-')}-{_value.replace(' ', '')}", argv=[*_BASE, _opt, _value],
                      stderr_has=[_opt]))
CASES.append(Case(id="goodput/interval-shorter-than-write",
                  argv=[*_BASE, "--checkpoint-write", "sync", "--checkpoint-interval", "1 ms"],
                  stderr_has=["--checkpoint-interval", "checkpoint write"]))
CASES.append(Case(id="goodput/rates-and-node-rate", argv=[*_BASE, "--node-failure-rate", "0.01", "--failure-rates",
                                                         "rates.yaml"], files={"rates.yaml": "components:\n  gpu: 1e-4\n"},
                  stderr_has=["--node-failure-rate", "not both"]))
CASES.append(Case(id="goodput/zero-gpus", argv=[*_BASE[:5], "--gpus", "0"], stderr_has=["--gpus"]))
CASES.append(Case(id="goodput/missing-model", argv=["goodput", "--cluster", "dgx-h100", "--gpus", "8"],
                  stderr_has=["--model"]))
CASES.append(Case(id="goodput/one-run-too-long", argv=[*_BASE, "--node-failure-rate", "1000", "--runs", "1", "--days",
                                                       "3650"], stderr_has=["--days"]))
CASES.append(Case(id="goodput/runs-times-days-too-many",
                  argv=[*_BASE, "--node-failure-rate", "10", "--runs", "100000", "--days", "365"],
                  stderr_has=["--runs"]))
for _name, (_text, _needle) in {
    "negative-rate": ("components:\n  gpu: -1\n", "components.gpu.rate_per_day"),
    "unknown-section": ("componets:\n  gpu: 1\n", "componets"),
    "unknown-per": ("components:\n  thing: {rate_per_day: 1, per: planet}\n", "planet"),
    "rate-string": ("components:\n  gpu: lots\n", "must be a number"),
    "repair-negative": ("repair_s:\n  node: -5\n", "repair_s.node"),
    "list": ("- 1\n", "list"),
}.items():
    CASES.append(Case(id=f"goodput/rates-file-{_name}", argv=[*_BASE, "--failure-rates", "rates.yaml"],
                      files={"rates.yaml": _text}, stderr_has=[_needle]))
for _cmd in (["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8"],
             ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8"]):
    CASES.append(Case(id=f"goodput/{_cmd[0]}-node-rate-neg", argv=[*_cmd, "--goodput", "--node-failure-rate", "-1"],
                      stderr_has=["--node-failure-rate"]))
    CASES.append(Case(id=f"goodput/{_cmd[0]}-rate-without-goodput", argv=[*_cmd, "--node-failure-rate", "1"],
                      stderr_has=["--goodput"]))
