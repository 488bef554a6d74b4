"""Leaf incast on real packets (issue 34): N senders to one receiver through its shaped link take N S / C.

The testbed's links queue and drop like TCP over lossy Ethernet (tbf), with no PFC pause, so PFC's victim
flows cannot appear here; the incast's own time, the flow-level model's bandwidth term (netsim/incast.py,
``simulate incast``'s ``incast_time_s``), can be checked. Run by .ci/testbed (root + iproute2), not by the unit
suite; the testbed is taken down in a ``finally``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tierwise.testbed import net

NAME = "inc"
RATE = 200e6 / 8  # --link 200Mbit/s, bytes/s on the wire
SIZE = 4 << 20



def _incast(senders: int, port: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    recv = subprocess.Popen(net.ns_python(f"twtb-{NAME}-n0", "tierwise.testbed.probe", "incast-recv", "0.0.0.0",
                                          str(port), str(SIZE), str(senders)),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    sends = [subprocess.Popen(net.ns_python(f"twtb-{NAME}-n{i}", "tierwise.testbed.probe", "incast-send",
                                            "10.213.0.1", str(port), str(SIZE)), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(1, senders + 1)]
    for s in sends:
        assert s.wait(timeout=120) == 0, s.stderr.read()
    out, err = recv.communicate(timeout=120)
    assert recv.returncode == 0, err
    return float(out)


def test_incast_takes_fan_in_times_size_over_the_receiver_link(tmp_path):
    """Measured 2026-12-05 (3 runs each, load ~6): N = 1, 2, 4 senders of 4 MiB: 0.171-0.174 s, 0.348-0.359 s,
    0.692-0.714 s against N S / C = 0.175, 0.351, 0.702 s (C the 200 Mbit/s link's TCP payload rate)."""
    try:
        up = subprocess.run([sys.executable, "-m", "tierwise", "testbed", "up", "--nodes", "5", "--ranks-per-node",
                             "1", "--link", "200Mbit/s", "--name", NAME, "--dir", str(tmp_path / "tb"), "--json"],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert up.returncode == 0, up.stderr
        payload = RATE * net.PAYLOAD_FRACTION
        times = {n: min(_incast(n, 7400 + 10 * n + r) for r in range(2)) for n in (1, 4)}
        for n, t in times.items():
            assert t == pytest.approx(n * SIZE / payload, rel=0.2)
        assert 3.2 < times[4] / times[1] < 4.8
    finally:
        net.down(NAME)
    assert net.list_namespaces(NAME) == []
