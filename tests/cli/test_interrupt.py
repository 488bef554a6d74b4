"""Ctrl-C (issue 32): a real SIGINT to a running command prints exactly one line on stderr saying what was
kept, no traceback (also none from pool workers, which a terminal's Ctrl-C reaches too), and exits 130."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# prints a line once the CLI is imported and main is called, so the signal reaches a command, not an import
STARTER = ("import sys; from tierwise.cli import main; print('started', file=sys.stderr, flush=True); "
           "sys.exit(main(sys.argv[1:]))")


def _has_children(pid: int) -> bool:
    """Whether the process has started child processes (a pool's workers); Linux's /proc."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return path.exists() and bool(path.read_text().split())


def _interrupt(argv: list[str], after_s: float, ready=None) -> tuple[int, str, str]:
    """Run ``tierwise ARGV``, wait until it started (and ``ready(pid)`` holds), then ``after_s``, and send SIGINT
    to its whole process group, as a terminal's Ctrl-C does; return (exit code, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1", TIERWISE_PROGRESS="0")
    proc = subprocess.Popen([sys.executable, "-c", STARTER, *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            # a runner started without job control inherits SIGINT ignored; a user's is default
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr.readline() == "started\n"
        deadline = time.time() + 120
        while ready is not None and not ready(proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(after_s)
        assert proc.poll() is None, "the command finished before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, out, err


def _one_line(code: int, out: str, err: str) -> str:
    assert code == 130, err
    assert out == ""
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert len(err.splitlines()) == 1 and err.startswith("interrupted: "), err
    return err.strip()


def test_a_command_that_keeps_nothing_says_so():
    got = _interrupt(["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1", "--simulate",
                      "--rate", "50", "--requests", "1000000", "--json"], after_s=1.0)
    assert _one_line(*got) == "interrupted: nothing written"


@pytest.mark.slow
def test_an_interrupted_sweep_says_how_many_points_were_saved_and_workers_stay_quiet(tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "r"
    got = _interrupt(["sweep", "run", str(EXAMPLES / "sweep" / "grid-1000.yaml"), "--out", str(out),
                      "--workers", "2", "--batch-size", "8"],
                     after_s=0.5, ready=lambda _: any(out.glob("**/*.parquet")))
    line = _one_line(*got)
    saved, total = line.removeprefix("interrupted: ").split(" points saved in ")[0].split(" of ")
    assert total == "1,000" and line.endswith(f"points saved in {out}; rerun to resume")
    rows = sum(pq.read_metadata(p).num_rows for p in out.glob("**/*.parquet"))
    assert 0 < rows == int(saved.replace(",", "")) < 1000, (line, rows)


@pytest.mark.slow
def test_cross_validation_workers_print_no_traceback():
    got = _interrupt(["validate", "--cross-validate"], after_s=0.5,  # the folds' pool is running
                     ready=_has_children if Path("/proc/self/task").exists() else None)
    assert _one_line(*got) == "interrupted: nothing written"


def test_a_keyboard_interrupt_inside_any_command_is_one_line(capsys, monkeypatch):
    """In process: the interrupt raised deep in a command (here the estimator) reaches main as one line."""
    import tierwise.cli.tiers as tiers
    from tierwise.cli import main

    def stop(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tiers, "emit", stop)
    assert main(["tiers", "dgx-h100"]) == 130
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "interrupted: nothing written\n"
