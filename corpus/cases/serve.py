"""serve / serve-plan / validate --serving: numbers, choices and files of the serving commands (issue 16)."""

from __future__ import annotations

from corpus.harness import Case

CASES: list[Case] = []

_BASE = ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"]
_PLAN = ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"]

for option, values in (("--input-len", ("0", "-1", "nan", "abc", str(2**63))),
                       ("--output-len", ("0", "-5", str(2**64))),
                       ("--rate", ("0", "-1", "nan", "inf", "1e400")),
                       ("--ttft-slo", ("0", "-1", "nan", "inf")),
                       ("--tpot-slo", ("0", "nan")),
                       ("--batch", ("0", "-3", "abc", "nan")),
                       ("--tp", ("0", "3", "-1")),
                       ("--gpus", ("0", str(2**31))),
                       ("--beams", ("0", "65")),
                       ("--max-batch", ("0", "-2")),
                       ("--kv-cache-fraction", ("0", "1.5", "nan", "-1"))):
    for v in values:
        argv = [*_BASE, option, v] if option != "--gpus" else ["serve", "--model", "llama3.1-8b", "--cluster",
                                                                 "dgx-h100", "--gpus", v]
        if option in ("--rate", "--ttft-slo", "--tpot-slo"):
            argv += ["--scenario", "server"]
        CASES.append(Case(id=f"serve/{option.lstrip('-')}-{v[:12]}", argv=argv, stderr_has=[option.lstrip("-")[:5]]))

for option, value in (("--precision", "fp16"), ("--kv-precision", "fp4"), ("--scenario", "batch"),
                      ("--kv-link", "carrier-pigeon"), ("--batching", "dynamic"), ("--kv-reservation", "half"),
                      ("--kv-cache-of", "most"), ("--attention-kernel", "flash9")):
    CASES.append(Case(id=f"serve/choice-{option.lstrip('-')}", argv=[*_BASE, option, value], stderr_has=[value]))

CASES += [
    Case(id="serve/fp4-on-hopper", argv=[*_BASE, "--precision", "fp4"], stderr_has=["fp4"]),
    Case(id="serve/ep-on-dense", argv=[*_BASE, "--tp", "8", "--ep", "2"], stderr_has=["--ep"]),
    Case(id="serve/prefill-without-decode", argv=["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100",
                                                  "--prefill-gpus", "4"], stderr_has=["--decode-gpus"]),
    Case(id="serve/prefill-tp-not-dividing", argv=["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100",
                                                   "--prefill-gpus", "6", "--decode-gpus", "2", "--prefill-tp", "4"],
         stderr_has=["--prefill-tp"]),
    Case(id="serve/no-gpus", argv=["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100"],
         stderr_has=["--gpus"]),
    Case(id="serve/unknown-model", argv=["serve", "--model", "llama9-1t", "--cluster", "dgx-h100", "--gpus", "8"],
         stderr_has=["llama9-1t"]),
    Case(id="serve/scenario-unknown-key", argv=["serve", "s.yaml"],
         files={"s.yaml": "model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 8\ninput_lne: 5\n"},
         stderr_has=["input_lne"]),
    Case(id="serve/scenario-list", argv=["serve", "s.yaml"], files={"s.yaml": "- a\n- b\n"}, stderr_has=["s.yaml"]),
    Case(id="serve/scenario-missing", argv=["serve", "nope.yaml"], stderr_has=["nope.yaml"]),
    Case(id="serve/html-bad-dir", argv=[*_BASE, "--html", "no/such/dir/x.html"], stderr_has=["--html"]),
    Case(id="serve-plan/no-gpus", argv=["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100"],
         stderr_has=["--gpus"]),
    Case(id="serve-plan/modes", argv=[*_PLAN, "--modes", "all"], stderr_has=["--modes"]),
    Case(id="serve-plan/max-tp-zero", argv=[*_PLAN, "--max-tp", "0"], stderr_has=["--max-tp"]),
    Case(id="serve-plan/top-zero", argv=[*_PLAN, "--top", "0"], stderr_has=["--top"]),
    Case(id="validate-serving/fit", argv=["validate", "--serving", "--fit"], stderr_has=["--serving"]),
    Case(id="validate-serving/source", argv=["validate", "--serving", "--source", "S99"], stderr_has=["S99"]),
    Case(id="validate-serving/bad-csv", argv=["validate", "--serving", "x.csv"], files={"x.csv": "a,b\n1,2\n"},
         stderr_has=["x.csv"]),
]

# ---- issue 32, hangs: a serving search at absurd sizes refuses at once (serve/plan.py MAX_DISAGGREGATED_GPUS)
for _gpus, _modes in (("1048576", "both"), ("1048576", "disaggregated"), ("65537", "both")):
    CASES.append(Case(id=f"serve/plan-{_gpus}-gpus-{_modes}",
                      argv=[*_PLAN[:-1], _gpus, "--modes", _modes], stderr_has=["65,536", "--modes aggregated"],
                      max_lines=1, timeout_s=10.0))
CASES.append(Case(id="serve/plan-1048576-gpus-aggregated-answers", argv=[*_PLAN[:-1], "1048576", "--modes",
                  "aggregated"], exit_code=0, timeout_s=15.0))

# MTP speculative decoding (issue 30): a model without MTP layers, out-of-range depths and acceptances, the
# acceptance without --mtp, bad values from a scenario file
_V3 = ["serve", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "16", "--precision", "fp8"]
CASES += [
    Case(id="serve/mtp-without-mtp-layers", argv=[*_BASE, "--mtp", "1"], stderr_has=["no MTP module"]),
    Case(id="serve-plan/mtp-without-mtp-layers", argv=[*_PLAN, "--mtp", "2"], stderr_has=["no MTP module"]),
    Case(id="serve/mtp-acceptance-without-mtp", argv=[*_V3, "--mtp-acceptance", "0.9"], stderr_has=["--mtp N"]),
]
for v in ("-1", "17", str(2**63), "abc"):
    CASES.append(Case(id=f"serve/mtp-{v[:12]}", argv=[*_V3, "--mtp", v], stderr_has=["mtp"]))
for v in ("nan", "inf", "-0.1", "1.5", "abc"):
    CASES.append(Case(id=f"serve/mtp-acceptance-{v}", argv=[*_V3, "--mtp", "1", "--mtp-acceptance", v],
                      stderr_has=["mtp-acceptance"]))
for key, value in (("mtp", "two"), ("mtp", "true"), ("mtp", "1.5"), ("mtp_acceptance", "'high'")):
    extra = "mtp: 1\n" if key == "mtp_acceptance" else ""
    CASES.append(Case(id=f"serve/scenario-{key}-{value.strip(chr(39))}", argv=["serve", "s.yaml"],
                      files={"s.yaml": f"model: deepseek-v3\ncluster: dgx-h100\nnum_gpus: 16\nprecision: fp8\n"
                                       f"{extra}{key}: {value}\n"},
                      stderr_has=["mtp"]))
