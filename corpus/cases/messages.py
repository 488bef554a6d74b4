"""Messages (issue 32): a value of 100 KB given to any option is refused in one line that echoes at most a
clipped part of it (``errors.one_line``: a word past 160 characters keeps its head and tail around "...").

Generated over every option that takes a value of the commands below (read from the CLI itself, so a new
option is covered): the option gets 100,000 characters, letters or digits in turn.
"""

from __future__ import annotations

from corpus.harness import Case

_BASE = {
    "plan": ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "scale": ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16"],
    "simulate": ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"],
    "topo": ["topo", "fat-tree", "--gpus", "64", "--radix", "16"],
    "design": ["design", "--model", "llama3.1-8b", "--gpus", "64"],
    "trend": ["trend", "--model", "llama3.1-8b", "--gpus", "64"],
    "goodput": ["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "serve": ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "serve-plan": ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "collective": ["collective", "all-reduce", "--size", "1GB", "--ranks", "8"],
}
_HUGE = ("x" * 100_000, "9" * 100_000)


def _options(command: str) -> list[str]:
    import typer

    from tierwise.cli import app

    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return [p.opts[0] for p in cmd.params
            if p.param_type_name == "option" and p.opts[0].startswith("--") and not p.is_flag]


def _with(argv: list[str], option: str, value: str) -> list[str]:
    if option in argv:
        i = argv.index(option)
        return [*argv[: i + 1], value, *argv[i + 2:]]
    return [*argv, option, value]


def _short_stderr(result) -> None:
    assert max((len(w) for w in result.stderr.split()), default=0) <= 160, "a word of stderr past 160 characters"


CASES: list[Case] = []
_n = 0
for _cmd, _argv in _BASE.items():
    for _opt in _options(_cmd):
        _value = _HUGE[_n % 2]
        _n += 1
        CASES.append(Case(id=f"messages/{_cmd}{_opt}-100kb-{'letters' if _value[0] == 'x' else 'digits'}",
                          argv=_with(_argv, _opt, _value), max_lines=1, timeout_s=20.0, check=_short_stderr))


# ---- a bound the message suggests is one the command accepts -----------------------------------------------
def _suggestion_accepted(argv: list[str], flag: str):
    """Rerun with the largest value the message suggests; that value must not be refused for ``flag``."""
    def check(result) -> None:
        import os
        import re
        import subprocess

        from corpus.harness import tierwise_command

        match = re.search(re.escape(flag) + r" <=? ([\d,]+)", result.stderr)
        assert match, f"no bound suggested for {flag}: {result.stderr}"
        bound = match.group(1).replace(",", "")
        i = argv.index(flag)
        again = subprocess.run(tierwise_command() + [*argv[: i + 1], bound, *argv[i + 2:]], cwd=result.cwd,
                               env={**os.environ, "COLUMNS": "100"}, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 or flag not in again.stderr, \
            f"the suggested {flag} {bound} is itself refused: {again.stderr.strip()}"
    return check


_SIM = ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"]
_TOPO = ["topo", "fat-tree", "--gpus", "64", "--radix", "16"]
_COLL = ["collective", "all-reduce", "--size", "1GB", "--ranks", "16"]
for _id, _argv, _flag in [
    ("simulate-ranks", [*_SIM, "--ranks", "0"], "--ranks"),
    ("simulate-ranks-huge", [*_SIM, "--ranks", "100000000"], "--ranks"),
    ("simulate-stages", ["simulate", "pipeline", "--gpus", "64", "--radix", "16", "--size", "1MB", "--stages", "0"],
     "--stages"),
    ("topo-gpus-per-node", [*_TOPO, "--gpus-per-node", "0"], "--gpus-per-node"),
    ("topo-nics-per-node", [*_TOPO, "--nics-per-node", "0"], "--nics-per-node"),
    ("topo-radix", [*_TOPO[:-2], "--radix", "0"], "--radix"),
    ("collective-ranks-per-node", [*_COLL, "--ranks-per-node", "0"], "--ranks-per-node"),
    ("collective-ranks-per-node-huge", [*_COLL, "--ranks-per-node", "4096"], "--ranks-per-node"),
    ("serve-plan-gpus", ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "0"], "--gpus"),
]:
    CASES.append(Case(id=f"messages/suggested-bound-accepted-{_id}", argv=_argv, max_lines=1, timeout_s=90.0,
                      stderr_has=[_flag], check=_suggestion_accepted(_argv, _flag)))

# a field named as the command names it: the flag it has, never another field's name
for _id, _argv, _needle in [
    ("scale-objective", ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16", "--objective",
                         "fastest"], "--objective 'fastest'"),
    ("scale-zero3-gather", ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16",
                            "--zero3-gather", "fsdp2"], "--zero3-gather 'fsdp2'"),
    ("plan-objective", ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--objective",
                        "fastest"], "--objective 'fastest'"),
    ("plan-zero3-gather", ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8",
                           "--zero3-gather", "fsdp2"], "--zero3-gather 'fsdp2'"),
    ("simulate-cluster", [*_SIM, "--cluster", "dgx-z900"], "dgx-z900"),
    ("simulate-dims-not-torus", [*_SIM, "--dims", "4x4"], "--dims"),
    ("topo-dims-not-torus", [*_TOPO, "--dims", "4x4"], "--dims"),
]:
    CASES.append(Case(id=f"messages/named-as-given-{_id}", argv=_argv, max_lines=1, timeout_s=30.0,
                      stderr_has=[_needle]))
