"""The hostile-input corpus: each case runs the installed ``tierwise`` entry point in a subprocess.

A case is a command line plus the files it needs (made fresh in an empty working directory). The contract
every case checks (issue 12): exit code 2 (or the case's ``exit_code``), at most ``max_lines`` lines on
stderr, no Python traceback anywhere, stdout empty on an error (or only the JSON document), no hang (a
per-case time limit), and no file left behind in the working directory beyond what the case allows.

Cases live in ``corpus/cases/<class>.py`` as a module-level ``CASES`` list; ``corpus/test_corpus.py`` runs
them all (``python -m pytest corpus -n 2``). Keep the corpus growing when a bug is found.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["Case", "Result", "run_case", "tierwise_command"]


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile or mistaken invocation and what must hold for it."""

    id: str
    """Unique, ``class/short-name``; shown by pytest."""
    argv: Sequence[str]
    """Arguments after ``tierwise``; ``{tmp}`` is replaced by the case's working directory."""
    files: Mapping[str, str | bytes] = dataclasses.field(default_factory=dict)
    """Files to create (relative to the working directory) before the run; a name ending in ``/`` makes a
    directory; the value ``"<fifo>"`` makes a named pipe, ``"<symlink:TARGET>"`` a symbolic link to TARGET
    (which need not exist), ``"<sparse:N>"`` a sparse file of N bytes (huge files without using the disk)."""
    modes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """``chmod`` applied after creation (e.g. a read-only directory for an ``--out`` case)."""
    exit_code: int = 2
    max_lines: int = 3
    """Lines allowed on stderr (the promise is one; a hint line or two is tolerated)."""
    timeout_s: float = 30.0
    stdin: str | None = None
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    allowed_new: Sequence[str] = ()
    """Paths (relative; shell patterns such as ``res/part-*`` allowed) that may exist after the run besides the
    created ones."""
    stderr_has: Sequence[str] = ()
    """Substrings the error message must contain (case-insensitive): the bad value, the fix."""
    check: Callable[[Result], None] | None = None
    """An extra assertion on the result."""
    stdout_ok: bool = False
    """Allow output on stdout with the error exit (a batch ``estimate`` prints the files that worked)."""


@dataclasses.dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path


def tierwise_command() -> list[str]:
    """The installed console script next to this interpreter (the real entry point)."""
    exe = Path(sys.executable).with_name("tierwise")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("tierwise")
    if found is None:  # pragma: no cover - the package is not installed
        raise RuntimeError("the tierwise entry point is not installed; run pip install -e .")
    return [found]


def _make_files(root: Path, case: Case) -> None:
    for rel, content in case.files.items():
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == "<fifo>":
            os.mkfifo(path)
        elif isinstance(content, str) and content.startswith("<symlink:") and content.endswith(">"):
            os.symlink(content[len("<symlink:"):-1], path)
        elif isinstance(content, str) and content.startswith("<sparse:") and content.endswith(">"):
            with open(path, "wb") as fh:
                fh.truncate(int(content[len("<sparse:"):-1]))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for rel, mode in case.modes.items():
        os.chmod(root / rel, mode)


def _listing(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


def run_case(case: Case, workdir: Path) -> Result:
    """Run one case in ``workdir`` (empty); assert the contract; return the result for extra checks."""
    _make_files(workdir, case)
    before = _listing(workdir)
    argv = [a.replace("{tmp}", str(workdir)) for a in case.argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({"COLUMNS": "100", "PYTHONWARNINGS": "ignore", **case.env})
    # a session of its own, so that a hang is killed with every process it spawned (torch ranks)
    proc = subprocess.Popen(tierwise_command() + argv, cwd=workdir, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(case.stdin or "", timeout=case.timeout_s)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"{case.id}: no answer within {case.timeout_s} s (a hang): {argv}") from exc
    finally:
        for rel, mode in case.modes.items():  # let the temp dir be removed
            p = workdir / rel
            if p.exists():
                os.chmod(p, mode | stat.S_IWUSR | stat.S_IRUSR | stat.S_IXUSR)
    proc = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    result = Result(proc.returncode, proc.stdout, proc.stderr, workdir)
    what = f"{case.id}: tierwise {' '.join(argv)}\n--- stdout ---\n{proc.stdout[-2000:]}\n--- stderr ---\n" \
           f"{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, f"traceback\n{what}"
    assert proc.returncode == case.exit_code, f"exit {proc.returncode}, expected {case.exit_code}\n{what}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) <= case.max_lines, f"{len(lines)} lines on stderr (at most {case.max_lines})\n{what}"
    assert len(proc.stderr) <= 2000, f"stderr of {len(proc.stderr)} characters (an echoed file?)\n{what}"
    if case.exit_code == 2:
        assert lines, f"exit 2 with nothing on stderr\n{what}"
        assert case.stdout_ok or not proc.stdout.strip(), f"an error left output on stdout\n{what}"
    for needle in case.stderr_has:
        assert needle.lower() in proc.stderr.lower(), f"stderr lacks {needle!r}\n{what}"
    left = {p for p in _listing(workdir) - before if not any(fnmatch.fnmatch(p, pat) for pat in case.allowed_new)}
    assert not left, f"files left behind: {sorted(left)}\n{what}"
    if case.check is not None:
        case.check(result)
    return result
