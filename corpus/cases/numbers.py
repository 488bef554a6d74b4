"""Numbers (issue 12, class 2): NaN, infinities, zero, negatives and absurdly large values in every numeric
option, quantity and spec field are rejected with exit 2 and a message naming the option (or field) and the
valid range; never a NaN answer, an overflow traceback or a loop that runs for minutes.

The families are generated: each numeric option crossed with the hostile values that are invalid for it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from corpus.harness import Case

CASES: list[Case] = []

_HOSTILE = {"nan": "nan", "inf": "inf", "neginf": "-inf", "zero": "0", "neg": "-1", "2p31": str(2**31),
            "2p63": str(2**63), "2p64": str(2**64), "1e400": "1e400", "abc": "abc"}
_SHORT = ("zero", "2p64")
"""The subset used for options whose full cross would repeat the same code path (the full cross of one option
of each command runs the rest)."""


def _family(prefix: str, base: list[str], option: str, names=tuple(_HOSTILE), *, needle: str | None = None,
            skip: tuple[str, ...] = (), files: dict | None = None, timeout_s: float = 30.0) -> None:
    for name in names:
        if name in skip:
            continue
        CASES.append(Case(id=f"numbers/{prefix}{option.lstrip('-')}-{name}", argv=[*base, option, _HOSTILE[name]],
                          files=files or {}, stderr_has=[needle or option], timeout_s=timeout_s))


# ---------------------------------------------------------------------------------------------- collective
_COLL = ["collective", "all-reduce", "--size", "1GB"]
_family("collective-", [*_COLL, "--ranks", "16"], "--ranks-per-node")
_family("collective-", [*_COLL], "--ranks", ("nan", "zero", "neg", "2p63", "abc"))
CASES.append(Case(id="numbers/collective-ranks-one", argv=[*_COLL, "--ranks", "1"], stderr_has=["--ranks", "2 <="]))

# ---------------------------------------------------------------------------------------------- plan
_PLAN = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100"]
_family("plan-", _PLAN, "--gpus")
for _opt in ("--global-batch", "--seq", "--top"):
    _family("plan-", [*_PLAN, "--gpus", "8"], _opt, ("zero", "neg", "2p31", "2p64"))
for _opt in ("--tp", "--pp", "--cp", "--ep", "--dp", "--vpp", "--mbs"):
    _family("plan-", [*_PLAN, "--gpus", "8"], _opt, _SHORT)
for _opt in ("--max-tp", "--max-pp", "--max-cp", "--max-ep", "--max-vpp", "--max-mbs"):
    _family("plan-", [*_PLAN, "--gpus", "8"], _opt, ("zero",))
CASES.append(Case(id="numbers/plan-max-mbs-past-bound", argv=[*_PLAN, "--gpus", "8", "--max-mbs", "4096"],
                  stderr_has=["--max-mbs", "1,024"]))

# ---------------------------------------------------------------------------------------------- scale
_SCALE = ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100"]
for _opt in ("--global-batch", "--seq"):
    _family("scale-", [*_SCALE, "--gpus", "8"], _opt, _SHORT)
for _name, _text in {"zero": "0", "neg": "-8", "nan": "nan", "inf": "inf", "2p63": str(2**63),
                     "range-to-2p64": f"8:{2**64}", "range-from-zero": "0:64", "range-backwards": "64:8",
                     "range-nan": "nan:64", "list-with-zero": "8,0,16", "list-huge": f"8,{2**31}",
                     "list-too-long": ",".join(["8"] * 65), "float": "1e3"}.items():
    CASES.append(Case(id=f"numbers/scale-gpus-{_name}", argv=[*_SCALE, "--gpus", _text], stderr_has=["--gpus"]))

# ---------------------------------------------------------------------------------------------- topo
_TOPO = ["topo", "fat-tree", "--radix", "16"]
_family("topo-", ["topo", "fat-tree"], "--gpus")
for _opt in ("--gpus-per-node", "--nics-per-node", "--radix", "--tiers", "--domain-size"):
    _family("topo-", [*_TOPO, "--gpus", "64"], _opt, _SHORT)
_family("topo-dragonfly-", ["topo", "dragonfly", "--gpus", "64", "--radix", "16"], "--groups", ("zero", "2p64"))
CASES.append(Case(id="numbers/topo-dragonfly-groups-one", argv=["topo", "dragonfly", "--gpus", "64", "--radix",
                                                                  "16", "--groups", "1"], stderr_has=["--groups"]))
_family("topo-torus-", ["topo", "torus"], "--gpus", ("zero", "neg", "2p63"))
CASES.append(Case(id="numbers/topo-torus-ring-too-long", argv=["topo", "torus", "--gpus", "131072"],
                  stderr_has=["torus dims", "use more dimensions"]))
CASES.append(Case(id="numbers/topo-torus-dim-zero", argv=["topo", "torus", "--gpus", "64", "--dims", "0x64"],
                  stderr_has=["torus dims"]))
CASES.append(Case(id="numbers/topo-gpus-past-fabric-bound",
                  argv=["topo", "fat-tree", "--gpus", str(2**20 + 8), "--radix", "128"],
                  stderr_has=["--gpus", "1,048,576"]))
CASES.append(Case(id="numbers/simulate-gpus-past-simulation-bound",  # issue 28: topo goes to 2^20, simulate not
                  argv=["simulate", "all-reduce", "--gpus", str(2**17 + 8), "--radix", "128"],
                  stderr_has=["--gpus", "131,072", "for simulate"]))
_family("topo-", [*_TOPO, "--gpus", "64"], "--oversubscription",
        ("nan", "inf", "zero", "2p31", "1e400"))
CASES.append(Case(id="numbers/topo-oversubscription-below-one",
                  argv=[*_TOPO, "--gpus", "64", "--oversubscription", "0.5"], stderr_has=["--oversubscription",
                                                                                             "1 <="]))
for _opt, _values in {"--nic-bandwidth": ("-400Gb/s", "0Gb/s", "1e400Gb/s", "1e20GB/s"),
                      "--scale-up-bandwidth": ("0GB/s", "1e400GB/s"),
                      "--hop-latency": ("-1ns", "5s")}.items():
    for _i, _v in enumerate(_values):
        CASES.append(Case(id=f"numbers/topo-{_opt.lstrip('-')}-{_i}", argv=[*_TOPO, "--gpus", "64", _opt, _v],
                          stderr_has=[_opt]))
_TOPO_YAML = "family: fat-tree\ngpus: 64\nradix: 16\n"
for _name, (_key, _text) in {"gpus-nan": ("gpus", ".nan"), "gpus-zero": ("gpus", "0"),
                             "radix-huge": ("radix", str(2**63)), "tiers-inf": ("tiers", ".inf"),
                             "oversubscription-nan": ("oversubscription", ".nan"),
                             "nic-bandwidth-zero": ("nic_bandwidth", "'0 Gb/s'"),
                             "gpus-text": ("gpus", "lots")}.items():
    _body = "\n".join(ln for ln in _TOPO_YAML.splitlines() if not ln.startswith(_key + ":")) + f"\n{_key}: {_text}\n"
    CASES.append(Case(id=f"numbers/topo-yaml-{_name}", argv=["topo", "fab.yaml"], files={"fab.yaml": _body},
                      stderr_has=[_key]))

# ---------------------------------------------------------------------------------------------- simulate
_SIM = ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"]
_family("simulate-", _SIM, "--ranks", ("zero", "2p64"))
CASES.append(Case(id="numbers/simulate-ranks-one", argv=[*_SIM, "--ranks", "1"], stderr_has=["--ranks"]))
CASES.append(Case(id="numbers/simulate-ranks-past-fabric", argv=[*_SIM, "--ranks", "65"], stderr_has=["--ranks"]))
_family("simulate-", _SIM, "--seed", ("neg", "2p64"))
_family("simulate-pipeline-", ["simulate", "pipeline", "--gpus", "64", "--radix", "16"], "--stages",
        ("zero", "2p64"))
CASES.append(Case(id="numbers/simulate-pipeline-stages-one",
                  argv=["simulate", "pipeline", "--gpus", "64", "--radix", "16", "--stages", "1"],
                  stderr_has=["--stages"]))
CASES.append(Case(id="numbers/simulate-pipeline-stages-past-ranks",
                  argv=["simulate", "pipeline", "--gpus", "64", "--radix", "16", "--stages", "65"],
                  stderr_has=["--stages", "64"]))
_PERM = ["simulate", "permutation", "--gpus", "64", "--radix", "16"]
_family("simulate-permutation-", _PERM, "--shift", ("zero", "2p64"))
CASES.append(Case(id="numbers/simulate-permutation-shift-multiple-of-ranks", argv=[*_PERM, "--shift", "128"],
                  stderr_has=["--shift"]))
CASES.append(Case(id="numbers/simulate-all-to-all-too-many-flows",
                  argv=["simulate", "all-to-all", "--topology", "rail-only", "--gpus", "2048", "--radix", "64",
                        "--size", "1MB"],  # path classes (issue 19) lift the limit elsewhere; rail-only is per flow
                  stderr_has=["--ranks <= 1024"], timeout_s=60))
for _i, _v in enumerate(("-1MB", "0B", "1e400GB", "2PiB")):
    CASES.append(Case(id=f"numbers/simulate-size-{_i}", argv=[*_SIM[:-2], "--size", _v], stderr_has=["--size"]))
for _opt, _hostile in {"--fail-links": {"nan-pct": "nan%", "inf-pct": "inf%", "neg-pct": "-5%", "over-pct": "150%",
                                         "neg": "-1", "huge": str(2**64), "text": "some"},
                      "--fail-switches": {"inf-pct": "inf%", "neg": "-1"},
                      "--fail-domains": {"nan-pct": "nan%", "huge": str(2**64)}}.items():
    for _name, _v in _hostile.items():
        CASES.append(Case(id=f"numbers/simulate-{_opt.lstrip('-')}-{_name}", argv=[*_SIM, _opt, _v],
                          stderr_has=[_opt]))

# ---------------------------------------------------------------------------------------------- measure
_MC = ["measure", "collective"]
_family("measure-collective-", _MC, "--ranks", ("nan", "zero", "neg", "2p31", "2p64"))
for _opt in ("--iters", "--rounds"):
    _family("measure-collective-", _MC, _opt, ("zero", "2p31"))
_family("measure-collective-", _MC, "--warmup", ("neg", "2p64"))
_family("measure-collective-", _MC, "--factor", ("nan", "inf", "zero", "neg", "1e400"))
CASES.append(Case(id="numbers/measure-collective-factor-one", argv=[*_MC, "--factor", "1"], stderr_has=["--factor"]))
CASES.append(Case(id="numbers/measure-collective-endless-sweep", argv=[*_MC, "--factor", "1.0000001"],
                  stderr_has=["--sizes", "at most 64"], timeout_s=10))
for _name, _v in {"inf-end": "1KiB:1e400B", "zero": "0B", "sub-byte": "0.5B", "past-tib": "1B:2TiB",
                  "too-many": ",".join(["1KiB"] * 65), "backwards": "1MiB:1KiB"}.items():
    CASES.append(Case(id=f"numbers/measure-collective-sizes-{_name}", argv=[*_MC, "--sizes", _v],
                      stderr_has=["--sizes"]))
_MD = ["measure", "ddp"]
_family("measure-ddp-", _MD, "--ranks", ("zero", "neg", "2p31", "2p64"))
for _opt in ("--width", "--layers", "--batch"):
    _family("measure-ddp-", _MD, _opt, _SHORT)
_family("measure-ddp-", _MD, "--steps", ("zero", "2p64"))
CASES.append(Case(id="numbers/measure-ddp-steps-four", argv=[*_MD, "--steps", "4"], stderr_has=["--steps", ">= 5"]))
_family("measure-ddp-", _MD, "--warmup", ("neg",))
_family("measure-ddp-", _MD, "--bucket-cap-mb", ("nan", "inf", "zero", "2p31"))
for _i, _v in enumerate(("0B", "1e400GB", "2TiB", "0.5B")):
    CASES.append(Case(id=f"numbers/measure-hbm-size-{_i}", argv=["measure", "hbm", "--size", _v],
                      stderr_has=["--size"]))
_HF = ["measure", "compute", "--cpu", "--cluster", "dgx-h100", "--hf-step", "llama3.1-8b"]  # refused before torch
for _opt in ("--hf-layers", "--hf-seq", "--hf-batch", "--hf-steps"):
    _family("measure-compute-", _HF, _opt, ("zero", "neg", "2p64"))
_CAL = ["calibrate", "sweep.log", "--out", "cal.yaml"]
_family("calibrate-", _CAL, "--ranks", ("zero", "2p64"))
CASES.append(Case(id="numbers/calibrate-ranks-one", argv=[*_CAL, "--ranks", "1"], stderr_has=["--ranks"]))
_family("calibrate-", _CAL, "--ranks-per-domain", ("zero", "2p64"))

# ---------------------------------------------------------------------------------------------- collective sizes
for _i, _v in enumerate(("nanGB", "-1GB", "0GB", "1e400GB", "1e300PB", "2PiB")):
    CASES.append(Case(id=f"numbers/collective-size-{_i}", argv=["collective", "all-reduce", "--size", _v, "--ranks",
                                                                 "8"], stderr_has=["--size"]))
for _i, _v in enumerate(("0GB/s", "1e400GB/s", "1e20GB/s")):
    CASES.append(Case(id=f"numbers/collective-link-bandwidth-{_i}",
                      argv=[*_COLL, "--ranks", "8", "--link-bandwidth", _v], stderr_has=["--link-bandwidth"]))

# ---------------------------------------------------------------------------------------------- scenario fields
_SCENARIO = {"model": "llama3.1-8b", "cluster": "dgx-h100", "num_gpus": "16"}
_PLAN_FIELDS = {"tp": "8", "global_batch_size": "64", "seq_length": "8192"}


def _scenario(num_gpus: str = "16", cluster: str = "dgx-h100", model: str = "llama3.1-8b", **plan: str) -> str:
    fields = {**_PLAN_FIELDS, **plan}
    body = ", ".join(f"{k}: {v}" for k, v in fields.items())
    return f"model: {model}\ncluster: {cluster}\nnum_gpus: {num_gpus}\nplan: {{{body}}}\n"


_YAML_HOSTILE = {"nan": ".nan", "inf": ".inf", "neginf": "-.inf", "zero": "0", "neg": "-8", "2p31": str(2**31),
                 "2p63": str(2**63), "2p64": str(2**64), "1e30": "1.0e+30", "frac": "8.5", "text": "many"}
for _name in ("nan", "inf", "zero", "neg", "2p63", "2p64", "1e30", "frac"):
    _v = _YAML_HOSTILE[_name]
    CASES.append(Case(id=f"numbers/scenario-num-gpus-{_name}", argv=["estimate", "s.yaml"],
                      files={"s.yaml": _scenario(num_gpus=_v)}, stderr_has=["num_gpus"]))
for _field, _names in {"tp": ("nan", "zero", "2p64", "frac"), "pp": ("inf", "2p63"),
                       "global_batch_size": ("nan", "zero", "1e30", "2p31"), "seq_length": ("inf", "neg", "2p63"),
                       "micro_batch_size": ("zero",), "vpp": ("2p63",), "ep": ("nan",), "dp": ("zero", "2p64"),
                       "zero_stage": ("neg", "2p31"), "first_stage_layers": ("neg",)}.items():
    for _name in _names:
        CASES.append(Case(id=f"numbers/scenario-{_field.replace('_', '-')}-{_name}", argv=["estimate", "s.yaml"],
                          files={"s.yaml": _scenario(**{_field: _YAML_HOSTILE[_name]})}, stderr_has=[_field]))

# ---------------------------------------------------------------------------------------------- cluster fields
_CLUSTER_BAD = {
    "no-nics": ("nics_per_node: 0", "nics_per_node"),
    "nics-nan": ("nics_per_node: .nan", "nics_per_node"),
    "nics-huge": (f"nics_per_node: {2**63}", "nics_per_node"),
    "nic-bandwidth-zero": ("nic_bandwidth: '0 Gb/s'", "nic_bandwidth"),
    "nic-bandwidth-nan": ("nic_bandwidth: .nan", "nic_bandwidth"),
    "nic-bandwidth-overflow": ("nic_bandwidth: '1e400 Gb/s'", "nic_bandwidth"),
    "nic-bandwidth-negative": ("nic_bandwidth: -5", "nic_bandwidth"),
    "gpus-per-node-inf": ("gpus_per_node: .inf", "gpus_per_node"),
    "gpus-per-node-zero": ("gpus_per_node: 0", "gpus_per_node"),
    "scale-up-domain-2p64": (f"scale_up_domain: {2**64}", "scale_up_domain"),
    "scale-up-bandwidth-inf": ("scale_up_bandwidth: .inf", "scale_up_bandwidth"),
    "host-bandwidth-overflow": ("host_bandwidth: '1e300 GB/s'", "host_bandwidth"),
    "latency-nan": ("scale_out_latency: .nan", "scale_out_latency"),
    "latency-overflow": ("scale_up_latency: '1e400 s'", "scale_up_latency"),
    "efficiency-nan": ("efficiency: {scale_out: .nan}", "scale_out"),
    "efficiency-zero": ("efficiency: {scale_out: 0}", "scale_out"),
    "oversubscription-nan": ("scale_out_levels: [{domain_size: 64, oversubscription: .nan}]", "oversubscription"),
    "level-domain-zero": ("scale_out_levels: [{domain_size: 0}]", "domain_size"),
    "peak-nan": ("accelerator: {base: h100-sxm, peak_dense_tflops: {bf16: .nan}}", "peak_dense_tflops"),
    "peak-inf": ("accelerator: {base: h100-sxm, peak_dense_tflops: {bf16: .inf}}", "peak_dense_tflops"),
    "power-text": ("accelerator: {base: h100-sxm, power_w: lots}", "power_w"),
    "hbm-overflow": ("accelerator: {base: h100-sxm, hbm_capacity: '1e400 GB'}", "hbm_capacity"),
}
for _name, (_line, _needle) in _CLUSTER_BAD.items():
    CASES.append(Case(id=f"numbers/cluster-file-{_name}", argv=["tiers", "c.yaml"],
                      files={"c.yaml": f"base: dgx-h100\n{_line}\n"}, stderr_has=[_needle]))
CASES.append(Case(id="numbers/scenario-inline-cluster-no-nics", argv=["estimate", "s.yaml"],
                  files={"s.yaml": _scenario(cluster="{base: dgx-h100, nics_per_node: 0}")},
                  stderr_has=["nics_per_node", ">= 1"]))
CASES.append(Case(id="numbers/collective-cluster-no-nics", argv=[*_COLL, "--ranks", "16", "--cluster", "c.yaml"],
                  files={"c.yaml": "base: dgx-h100\nnics_per_node: 0\n"}, stderr_has=["nics_per_node"]))

# ---------------------------------------------------------------------------------------------- model fields
_MODEL = {"num_layers": "32", "hidden_size": "4096", "ffn_hidden_size": "14336", "num_attention_heads": "32",
          "num_kv_heads": "8", "vocab_size": "128256", "gated_mlp": "true", "tied_embeddings": "false"}
for _name, (_key, _v) in {"layers-nan": ("num_layers", ".nan"), "layers-huge": ("num_layers", str(2**40)),
                          "hidden-2p63": ("hidden_size", str(2**63)), "hidden-zero": ("hidden_size", "0"),
                          "vocab-inf": ("vocab_size", ".inf"), "heads-neg": ("num_attention_heads", "-32"),
                          "params-nan": ("params_b", ".nan"), "params-inf": ("params_b", ".inf"),
                          "window-neg": ("sliding_window", "-1"),
                          "experts-zero": ("moe", "{num_experts: 0, top_k: 1, ffn_hidden_size: 128}")}.items():
    _m = "{" + ", ".join(f"{k}: {v}" for k, v in {**_MODEL, _key: _v}.items()) + "}"
    CASES.append(Case(id=f"numbers/model-inline-{_name}", argv=["estimate", "s.yaml"],
                      files={"s.yaml": _scenario(num_gpus="8", model=_m)},
                      stderr_has=["num_experts" if _key == "moe" else _key]))

# ---------------------------------------------------------------------------------------------- dataset numbers
_DATASET = Path(__file__).resolve().parents[2] / "src" / "tierwise" / "data" / "training-runs.csv"


def _dataset_with(column: str, value: str) -> str:
    """The first two rows of the shipped dataset with one stated number replaced in the first."""
    rows = list(csv.DictReader(io.StringIO(_DATASET.read_text(encoding="utf-8"))))[:2]
    rows[0][column] = value
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


for _name, (_column, _v) in {"tp-zero": ("tp", "0"), "tp-negative": ("tp", "-4"), "cp-zero": ("cp", "0"), "gpus-huge": ("num_gpus", str(2**64)),
                             "step-nan": ("step_time_s", "nan"), "step-negative": ("step_time_s", "-3"),
                             "throughput-inf": ("tokens_per_s_per_gpu", "inf"), "mfu-over-100": ("mfu_pct", "250")
                             }.items():
    CASES.append(Case(id=f"numbers/validate-dataset-{_name}", argv=["validate", "runs.csv"],
                      files={"runs.csv": _dataset_with(_column, _v)}, stderr_has=[_column, "row 1"]))

# ---------------------------------------------------------------------------------------------- price file numbers
for _name, _body in {"nan": "switch_usd: .nan\n", "inf": "nic_w: {value: .inf}\n", "negative": "cable_usd: -5\n",
                     "text": "nic_usd: {value: cheap}\n", "no-value": "nic_usd: {unit: USD}\n"}.items():
    CASES.append(Case(id=f"numbers/topo-prices-{_name}", argv=[*_TOPO, "--gpus", "64", "--prices", "p.yaml"],
                      files={"p.yaml": _body}, stderr_has=[_body.split(":")[0]]))

# issue 28: the fabric overrides every fabric-building command takes, one line each
_PLAN8 = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64"]
CASES.append(Case(id="numbers/plan-radix-past-catalog", argv=[*_PLAN8, "--radix", "1000"],
                  stderr_has=["--radix 1000", "use --radix <= 144"]))
CASES.append(Case(id="numbers/plan-tiers-past-three", argv=[*_PLAN8, "--tiers", "9"],
                  stderr_has=["--tiers 9", "1 <= --tiers <= 3"]))
CASES.append(Case(id="numbers/plan-oversubscription-nan", argv=[*_PLAN8, "--oversubscription", "nan"],
                  stderr_has=["--oversubscription"]))
CASES.append(Case(id="numbers/goodput-topology-unknown",
                  argv=["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64",
                        "--topology", "hypercube"], stderr_has=["--topology 'hypercube'", "fat-tree"]))
CASES.append(Case(id="numbers/design-fabric-unknown",
                  argv=["design", "--model", "llama3.1-8b", "--gpus", "64", "--fabric", "myrinet"],
                  stderr_has=["--fabric 'myrinet'", "ib, roce"]))
CASES.append(Case(id="numbers/plan-radix-too-small-for-a-million",
                  argv=["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "1048576",
                        "--global-batch", "16384", "--radix", "64"],
                  stderr_has=["1,048,576 NICs", "use --radix >= 82"]))
