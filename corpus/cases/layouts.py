"""Pipeline layouts and the framework field (issue 14): a layout that does not hold the model's layers, a
negative count, a layout of the wrong length, an unknown framework (in the scenario or as ``--framework``)
are one line naming the value, exit 2."""

from __future__ import annotations

from corpus.harness import Case


def _scenario(plan: str, extra: str = "") -> str:
    return ("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 32\n"
            f"plan: {{tp: 2, pp: 4, global_batch_size: 64, seq_length: 4096{plan}}}\n{extra}")


CASES: list[Case] = [
    Case(id="layouts/layout-wrong-sum", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: [8, 8, 8, 9]")}, stderr_has=["pipeline_layout", "33"]),
    Case(id="layouts/layout-negative", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: [9, -1, 12, 12]")}, stderr_has=["pipeline_layout[1]", "-1"]),
    Case(id="layouts/layout-wrong-length", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: [16, 16]")}, stderr_has=["pipeline_layout", "2 entries"]),
    Case(id="layouts/layout-not-a-list", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: {t: 8}")}, stderr_has=["pipeline_layout", "list"]),
    Case(id="layouts/layout-string-short", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: Et|tt")}, stderr_has=["pipeline_layout", "2 entries"]),
    Case(id="layouts/layout-string-symbol", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: 'Et*7|t*8|q*8|t*8L'")}, stderr_has=["pipeline_layout", "'q'"]),
    Case(id="layouts/layout-string-parens", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: 'E(t*8|*4L'")}, stderr_has=["pipeline_layout", "parentheses"]),
    Case(id="layouts/layout-string-huge", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: '(t|)*99999999999'")}, stderr_has=["pipeline_layout", "expands"]),
    Case(id="layouts/layout-string-mtp", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pipeline_layout: 'Et*8|t*8|t*8|t*8mL'")}, stderr_has=["pipeline_layout", "MTP"]),
    Case(id="layouts/first-last-too-many", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", decoder_first_pipeline_num_layers: 20, last_stage_layers: 20")},
         stderr_has=["first_stage_layers=20"]),
    Case(id="layouts/first-negative", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", first_stage_layers: -2")}, stderr_has=["first_stage_layers", "-2"]),
    Case(id="layouts/framework-unknown", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario("", "framework: megatorn\n")}, stderr_has=["framework", "megatorn"]),
    Case(id="layouts/framework-flag-unknown", argv=["estimate", "s.yaml", "--framework", "jax"],
         files={"s.yaml": _scenario("")}, stderr_has=["--framework", "jax"]),
    Case(id="layouts/framework-disagree", argv=["estimate", "s.yaml", "--framework", "nemo"],
         files={"s.yaml": _scenario("", "framework: torchtitan\n")}, stderr_has=["nemo", "torchtitan"]),
    Case(id="layouts/plan-framework-unknown",
         argv=["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--framework", "jax"],
         stderr_has=["--framework", "jax"]),
    # activation offload (issue 29): Megatron-Core's cpu_offloading_num_layers rules
    Case(id="layouts/offload-with-pp", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", activation_offload_layers: 4")},
         stderr_has=["activation_offload_layers", "pp=4"]),
    Case(id="layouts/offload-negative", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", pp: 1, cpu_offloading_num_layers: -3").replace("pp: 4, ", "")},
         stderr_has=["activation_offload_layers", "-3"]),
    Case(id="layouts/offload-all-layers", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", activation_offload_layers: 32").replace("pp: 4, ", "")},
         stderr_has=["activation_offload_layers=32", "num_layers=32"]),
    Case(id="layouts/attention-kernel-unknown", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", attention_kernel: flash9")}, stderr_has=["attention_kernel", "flash9"]),
    # FlashAttention-3 is Hopper-only (issue 29 item 2: compute.yaml attention_kernel_generations)
    Case(id="layouts/attention-kernel-flash3-on-a100", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(", attention_kernel: flash3").replace("dgx-h100", "dgx-a100")},
         stderr_has=["attention_kernel='flash3'", "ampere", "flash2 or cudnn"]),
]
