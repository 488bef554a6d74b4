"""Usage errors through the real entry point: unknown options and commands, wrong types, missing options."""

from corpus.harness import Case

_COMMANDS = {
    "estimate": ["examples/none.yaml"],
    "plan": ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "scale": ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16"],
    "collective": ["all-reduce", "--size", "1GB", "--ranks", "8"],
    "tiers": ["dgx-h100"],
    "validate": [],
    "catalog list": [],
    "topo fat-tree": ["--gpus", "128", "--radix", "64"],
    "simulate all-reduce": ["--topology", "fat-tree", "--gpus", "64", "--radix", "16", "--size", "1MB"],
    "measure collective": [],
    "calibrate": ["x.log"],
}

CASES = [Case(id="usage/typo-top-level", argv=["estimat"], stderr_has=["estimat"])]
for _cmd, _args in _COMMANDS.items():
    _name = _cmd.replace(" ", "-")
    CASES.append(Case(id=f"usage/{_name}-unknown-option", argv=[*_cmd.split(), *_args, "--modle", "x"],
                      stderr_has=["--modle"]))
