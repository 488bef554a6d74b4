"""The testbed for real (root + iproute2): 2 nodes x 2 ranks, run by .ci/testbed, not by the unit suite.

Each test takes its testbed down in a ``finally`` (fixture), so a failing test leaves no namespace; the
last test checks that none of this module's namespaces is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tierwise.testbed import net
from tierwise.testbed.spec import parse_spec

NAME = "ci"


def _tierwise(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tierwise", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture
def testbed(tmp_path):
    folder = str(tmp_path / "tb")
    try:
        up = _tierwise("testbed", "up", "--nodes", "2", "--ranks-per-node", "2", "--link", "1Gbit/s",
                       "--latency", "50us", "--name", NAME, "--dir", folder, "--json")
        assert up.returncode == 0, up.stderr
        yield folder, json.loads(up.stdout)
    finally:
        net.down(NAME)


def test_up_creates_only_its_namespaces_and_a_loadable_cluster(testbed):
    folder, state = testbed
    assert net.list_namespaces(NAME) == sorted(["twtb-ci-n0", "twtb-ci-n1", "twtb-ci-sw"])
    assert "not emulated" in state["latency"] or "netem" in state["latency"]
    from tierwise.specs.cluster import load_cluster

    cluster = load_cluster(os.path.join(folder, "cluster.yaml"))
    assert cluster.gpus_per_node == 2 and cluster.nics_per_node == 1
    # loopback well above the link (else the CPU, not the shaper, is what a run measures)
    assert cluster.scale_up_bytes_per_s > 2 * cluster.nic_bytes_per_s
    # tbf on both ends of each node's veth
    for ns, dev in (("twtb-ci-n0", "eth0"), ("twtb-ci-sw", "n0"), ("twtb-ci-n1", "eth0"), ("twtb-ci-sw", "n1")):
        out = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev], capture_output=True,
                             text=True).stdout
        assert "tbf" in out and "rate 1Gbit" in out
    measured = state["probes"]["link_payload_bytes_per_s_measured"]
    assert 0.8 < measured / state["probes"]["link_payload_bytes_per_s_expected"] < 1.1


def test_run_and_check_rows(testbed):
    folder, _ = testbed
    run = _tierwise("testbed", "run", "--op", "all-reduce", "--op", "all-gather", "--op", "reduce-scatter",
                    "--op", "broadcast", "--op", "all-to-all", "--sizes", "4MiB", "--iters", "3", "--dir", folder,
                    "--json")
    assert run.returncode == 0, run.stderr
    for alg in ("ring", "tree", "hierarchical"):
        own = _tierwise("testbed", "run", "--algorithm", alg, "--sizes", "4MiB", "--iters", "3", "--dir", folder,
                        "--json")
        assert own.returncode == 0, own.stderr
        assert all(r["wrong"] == 0 for r in json.loads(own.stdout)["rows"])  # the sum is right on every rank
    check = _tierwise("testbed", "check", "--dir", folder, "--json")
    assert check.returncode == 0, check.stderr
    doc = json.loads(check.stdout)
    assert doc["document"] == "testbed-check"
    rows = doc["rows"]
    assert len(rows) == 8
    for row in rows:
        assert set(row) >= {"op", "algorithm", "size_bytes", "measured_s", "analytic_s", "simulated_s"}
        # a shaped link cannot be beaten: measured time at least 80% of the analytic (bandwidth-bound)
        # floor; the upper bound is loose on a shared 2-core host (docs/testbed.md has the figures)
        assert 0.8 < row["measured_s"] / row["analytic_s"] < 4.0, row


def test_second_up_repairs_leftovers(tmp_path):
    folder = str(tmp_path / "tb")
    try:
        spec = parse_spec(nodes=2, ranks_per_node=1, link="100Mbit/s", name=NAME)
        net.up(spec)
        up = _tierwise("testbed", "up", "--nodes", "2", "--ranks-per-node", "1", "--link", "100Mbit/s",
                       "--name", NAME, "--dir", folder, "--json")
        assert up.returncode == 0, up.stderr
        assert sorted(json.loads(up.stdout)["repaired"]) == sorted(spec.namespaces)
    finally:
        net.down(NAME)


def test_ctrl_c_during_up_leaves_nothing(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "tierwise", "testbed", "up", "--nodes", "2", "--link",
                             "1Gbit/s", "--name", NAME, "--dir", str(tmp_path / "tb")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # Ctrl-C at a terminal finds SIGINT at its default; a runner started as a background
                            # job without job control inherits it ignored, and Python keeps it ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not net.list_namespaces(NAME) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        assert net.list_namespaces(NAME) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        net.down(NAME)


def test_down_removes_everything_and_nothing_else(tmp_path):
    other = parse_spec(nodes=2, ranks_per_node=1, link="100Mbit/s", name="ciother")
    try:
        net.up(other)
        net.up(parse_spec(nodes=2, ranks_per_node=1, link="100Mbit/s", name=NAME))
        down = _tierwise("testbed", "down", "--name", NAME, "--dir", str(tmp_path), "--json")
        assert down.returncode == 0, down.stderr
        assert net.list_namespaces(NAME) == []
        assert net.list_namespaces("ciother") == sorted(other.namespaces)  # another testbed is untouched
    finally:
        net.down("ciother")
        net.down(NAME)
