"""Class 1, usage errors, through the real entry point: unknown commands and options, values of the wrong
type, options missing their value, flags given a value, extra arguments, missing required parameters, and
paths given to options that do not exist or are directories.

The option cases are generated from the command tree itself, so a new option is covered the day it lands.
"""

from __future__ import annotations

import typer

from corpus.harness import Case
from tierwise.cli import app


def _leaves(command, path):
    sub = getattr(command, "commands", None)
    if sub:
        yield path, command
        for name, child in sorted(sub.items()):
            yield from _leaves(child, [*path, name])
    else:
        yield path, command


def _annotation(param):
    """The Python type behind an option (typer >= 0.29 keeps it in type_descriptor; older: click's type)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        ann = desc.annotation
        args = [a for a in getattr(ann, "__args__", ()) if a is not type(None)]
        return args[0] if args else ann
    name = getattr(getattr(param, "type", None), "name", "")
    return {"integer": int, "float": float}.get(name, str)


CASES: list[Case] = [
    Case(id="usage/no-such-command", argv=["estimat"], stderr_has=["estimat", "estimate"]),
    Case(id="usage/no-such-command-upper", argv=["PLAN"], stderr_has=["PLAN"]),
    Case(id="usage/no-such-top-option", argv=["--modle"], stderr_has=["--modle"]),
    Case(id="usage/double-dash-only", argv=["--"], exit_code=2),
]

_ROOT = typer.main.get_command(app)
for _path, _cmd in _leaves(_ROOT, []):
    _name = "-".join(_path) or "root"
    if getattr(_cmd, "commands", None):  # a group
        if _path:
            CASES.append(Case(id=f"usage/{_name}-no-such-subcommand", argv=[*_path, "nosuch"],
                              stderr_has=["nosuch"]))
        continue
    CASES.append(Case(id=f"usage/{_name}-unknown-option", argv=[*_path, "--no-such-flag"],
                      stderr_has=["--no-such-flag"]))
    CASES.append(Case(id=f"usage/{_name}-misspelt-json", argv=[*_path, "--jsn"], stderr_has=["--jsn", "--json"]))
    required = [p for p in _cmd.params if p.required]
    if required:
        CASES.append(Case(id=f"usage/{_name}-nothing-given", argv=[*_path], exit_code=2))
    for _p in _cmd.params:
        if not _p.opts or not _p.opts[0].startswith("--") or _p.opts[0] == "--help":
            continue
        _opt = _p.opts[0]
        _kind = _annotation(_p)
        _slug = f"{_name}{_opt}"
        if getattr(_p, "is_flag", False):
            CASES.append(Case(id=f"usage/{_slug}-flag-given-value", argv=[*_path, f"{_opt}=yes"],
                              stderr_has=[_opt]))
            continue
        CASES.append(Case(id=f"usage/{_slug}-missing-value", argv=[*_path, _opt], stderr_has=[_opt]))
        if _kind is int:
            for _bad, _tag in (("abc", "word"), ("1.5", "fraction"), ("", "empty"), ("0x10", "hex")):
                CASES.append(Case(id=f"usage/{_slug}-int-{_tag}", argv=[*_path, _opt, _bad], stderr_has=[_opt]))
        elif _kind is float:
            for _bad, _tag in (("abc", "word"), ("", "empty"), ("1,5", "comma")):
                CASES.append(Case(id=f"usage/{_slug}-float-{_tag}", argv=[*_path, _opt, _bad],
                                  stderr_has=[_opt]))

# extra positional arguments
CASES += [
    Case(id="usage/tiers-extra-argument", argv=["tiers", "dgx-h100", "surplus"], stderr_has=["surplus"]),
    Case(id="usage/catalog-show-extra-argument", argv=["catalog", "show", "h100-sxm", "surplus"],
         stderr_has=["surplus"]),
    Case(id="usage/collective-extra-argument", argv=["collective", "all-reduce", "surplus", "--size", "1GB",
                                                     "--ranks", "8"], stderr_has=["surplus"]),
]

# paths given to commands and options that do not exist, or are directories
_MISSING = "{tmp}/does-not-exist.yaml"
_PATHS = {
    "estimate": ["estimate", "PATH"],
    "estimate-json": ["estimate", "PATH", "--json"],
    "plan-model": ["plan", "--model", "PATH", "--cluster", "dgx-h100", "--gpus", "8"],
    "plan-cluster": ["plan", "--model", "llama3.1-8b", "--cluster", "PATH", "--gpus", "8"],
    "scale-model": ["scale", "--model", "PATH", "--cluster", "dgx-h100", "--gpus", "8:16"],
    "tiers": ["tiers", "PATH"],
    "collective-cluster": ["collective", "all-reduce", "--size", "1GB", "--ranks", "8", "--cluster", "PATH"],
    "topo-family": ["topo", "PATH"],
    "topo-prices": ["topo", "fat-tree", "--gpus", "128", "--prices", "PATH"],
    "validate-dataset": ["validate", "PATH"],
    "calibrate": ["calibrate", "PATH", "--out", "{tmp}/cal.yaml"],
    "measure-ddp-calibration": ["measure", "ddp", "--calibration", "PATH"],
}
for _tag, _argv in _PATHS.items():
    CASES.append(Case(id=f"usage/{_tag}-missing-path", argv=[a.replace("PATH", _MISSING) for a in _argv],
                      stderr_has=["does-not-exist"], timeout_s=60))
    CASES.append(Case(id=f"usage/{_tag}-directory", argv=[a.replace("PATH", "{tmp}/adir.yaml") for a in _argv],
                      files={"adir.yaml/": ""}, stderr_has=["adir.yaml"], timeout_s=60))
