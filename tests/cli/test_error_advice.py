"""Advice that works (issue 28): every ``--flag`` an error message suggests is an option of the command that printed
it. The test walks the error paths of every command: the command with nothing, then a working command line with
each of its options given a bad value (``-7``, and ``bogus`` for a text option), in-process; every exit-2 message
is read for ``--flags`` and each is looked up in that command's options (a message may name another command's
flag only after naming that command, ``tierwise simulate --topology``)."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest
import typer

from tierwise.cli import app, main

BASE = {
    "tiers": ["dgx-h100"],
    "collective": ["all-reduce", "--size", "1MB", "--ranks", "16"],
    "estimate": ["{scenario}"],
    "plan": ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--seq",
             "2048", "--max-mbs", "1", "--max-vpp", "1"],
    "scale": ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--seq",
              "2048"],
    "validate": [],
    "topo": ["fat-tree", "--gpus", "64"],
    "simulate": ["all-reduce", "--gpus", "64", "--size", "1MB"],
    "calibrate": ["{missing}", "--out", "{tmp}/out.yaml"],
    "design": ["--model", "llama3.1-8b", "--gpus", "64", "--global-batch", "64", "--seq", "2048"],
    "trend": ["--model", "llama3.1-8b", "--gpus", "64"],
    "bandwidth": ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "16",
                  "--seq", "2048"],
    "goodput": ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "64", "--seq",
                "2048"],
    "serve": ["--model", "llama3.1-8b", "--cluster", "dgx-h100"],
    "serve-plan": ["--model", "llama3.1-8b", "--cluster", "dgx-h100"],
    "catalog list": [],
    "catalog show": ["dgx-h100"],
    "measure collective": ["--ranks", "2", "--sizes", "1KB"],
    "measure ddp": ["--ranks", "2"],
    "measure gemm": [],
    "measure hbm": [],
    "measure compute": ["--cpu", "--iters", "1", "--warmup", "0"],
    "sweep run": ["{missing}", "--out", "{tmp}/sweep"],
    "sweep show": ["{tmp}/nothing-here"],
    "testbed up": ["--nodes", "2"],
    "testbed down": [],
    "testbed run": [],
    "testbed ddp": [],
    "testbed check": [],
}
"""A command line per command that the walk makes bad one option at a time (not all of them run: the walk only
needs each option's error path)."""
EXTRA = {
    "tiers": [["tiers", "bogus"]],
    "catalog list": [["catalog", "list", "bogus"]],
    "catalog show": [["catalog", "show", "bogus"]],
    "topo": [["topo", "bogus"], ["topo", "fat-tree", "--gpus", "100", "--radix", "8", "--tiers", "1"]],
    "simulate": [["simulate", "bogus"]],
    "plan": [["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "2048", "--global-batch", "7"]],
}
"""Error paths the option walk does not reach (positional arguments, rules between values)."""
_WRITES_OR_RUNS = {"--html", "--out", "--emit-cluster", "--json", "--help"}
"""Options not given a bad value: output paths (a bad one is an error about the path, tested in the corpus)."""
_FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]*")
_OTHER_COMMAND = re.compile(r"tierwise ([a-z-]+(?: [a-z]+)?)(?: [a-z0-9-]+)* (--[a-z][a-z0-9-]*)")


def _commands():
    root = typer.main.get_command(app)
    out = {}

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            out[" ".join(path)] = cmd

    walk(root, [])
    return out


COMMANDS = _commands()


def _options(cmd) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("--")}


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow


def _run(argv: list[str], capsys, seconds: int = 20) -> tuple[int, str]:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        rc = main(argv)
    except _Slow:  # a bad value that was accepted and started real work: no error path here
        rc = -1
    except SystemExit as exc:
        rc = int(exc.code or 0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    _, err = capsys.readouterr()
    return rc, err


def _bad_flags(err: str, command: str, argv: list[str]) -> list[str]:
    """``--flags`` in ``err`` that ``command`` (or the command the message names before them) does not have; the
    flags the user typed are echoed, not suggested, and are left out."""
    bad = []
    named = {flag: other for other, flag in _OTHER_COMMAND.findall(err)}
    for flag in sorted(set(_FLAG.findall(err)) - set(argv)):
        cmd = COMMANDS.get(named.get(flag, command), COMMANDS[command])
        if flag not in _options(cmd) and flag not in ("--help",):
            bad.append(flag)
    return bad


def _testbed_namespaces() -> set[str]:
    """The ``twtb-*`` network namespaces on this machine (none without iproute2)."""
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {line.split()[0] for line in out.splitlines() if line.startswith("twtb-")}


def _tear_down_testbeds(before: set[str], capsys) -> None:
    """Bring down what the walk brought up: ``testbed down`` for each state folder and name it may have used, then
    delete any ``twtb-*`` namespace still left that was not there before (CI checks none is left behind)."""
    for folder in ("tierwise-testbed", "bogus", "-7"):
        for name in ("tb", "bogus", "-7"):
            _run(["testbed", "down", "--dir", folder, "--name", name], capsys)
    for ns in sorted(_testbed_namespaces() - before):
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=10, check=False)


def test_every_command_has_a_base_line():
    assert set(COMMANDS) == set(BASE), set(COMMANDS) ^ set(BASE)


SLOW = {"measure collective", "measure ddp", "measure compute", "testbed up"}
"""Commands whose walk starts real measurements for the values they accept (10-20 s each): marked slow."""


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(BASE)])
def test_suggested_flags_exist(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 8\nplan: {tp: 8, global_batch_size: 8, "
                        "seq_length: 2048}\n")
    subs = {"{scenario}": str(scenario), "{tmp}": str(tmp_path), "{missing}": str(tmp_path / "missing.yaml")}
    base = [subs.get(a, a.replace("{tmp}", str(tmp_path))) for a in BASE[command]]
    cmd = COMMANDS[command]
    runs = [command.split(), *EXTRA.get(command, [])]  # nothing given: the missing arguments
    for p in cmd.params:
        if p.param_type_name != "option" or p.is_flag or p.opts[0] in _WRITES_OR_RUNS:
            continue
        values = ["-7"] + (["bogus"] if getattr(p, "bare_type", None) in (str, None) else [])
        runs += [[*command.split(), *base, p.opts[0], v] for v in values]
    errors, problems = 0, []
    before = _testbed_namespaces()
    try:
        for argv in runs:
            rc, err = _run(argv, capsys)
            if rc != 2:
                continue
            errors += 1
            bad = _bad_flags(err, command, argv)
            if bad:
                problems.append(f"tierwise {' '.join(argv)}: suggests {bad}: {err.strip()[:300]}")
    finally:
        if command == "testbed up":  # a value the walk gave may have been accepted and brought a testbed up
            _tear_down_testbeds(before, capsys)
    assert errors >= 1, f"no error path of {command} was walked"
    assert not problems, "\n".join(problems)
