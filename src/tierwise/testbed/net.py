"""Build and remove a testbed with iproute2: namespaces, veths, bridges, tbf; and measure it.

Layout (``N`` nodes, every object inside a namespace the testbed owns, nothing in the root namespace):

* node ``i`` is the namespace ``twtb-<name>-n<i>``: ``lo`` (the fast tier: its ranks talk over loopback)
  and ``eth0`` with 10.213.0.<i+1>/24;
* the switch namespace ``twtb-<name>-sw`` holds bridge ``br0`` (and ``br1`` with an uplink); node ``i``'s
  ``eth0`` is a veth whose peer ``n<i>`` is a port of its leaf bridge;
* ``tc tbf`` on both ends of each node's veth (``eth0`` shapes node -> switch, ``n<i>`` switch -> node);
* with ``--oversubscription o``: nodes ``0 .. N/2-1`` on ``br0``, the rest on ``br1``, the bridges joined by
  the veth pair ``up0``/``up1``, tbf on both ends at ``(N/2) x rate / o``.

tbf parameters: ``rate`` as given; ``burst`` (the bucket) ``max(64 KiB, rate x 1 ms)`` so one 64 KiB GSO
segment passes without being split and the shaper's timer need not fire more than about once a
millisecond; ``limit`` (the queue, bytes) ``max(4 MiB, rate x 0.5 s)``: deep enough that the flows of a
collective converging on one link queue instead of being dropped, as on a lossless (IB, RoCE with PFC)
fabric, which is what the fluid models assume. With a 20 ms queue an all-to-all through a 4:1 uplink lost
3-5% of its packets and TCP's recovery made it 1.4-3x slower than predicted (docs/testbed.md). tbf's ``latency`` parameter is the same queue limit expressed in time, never a delay: no
delay is added. Added delay needs ``netem``; where the kernel lacks it the requested latency is reported
``not emulated`` and every prediction uses the latency measured on the link.

Deleting a namespace deletes the veth ends and bridges in it (a veth pair dies with either end), so
:func:`down` removes everything by deleting the testbed's namespaces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time

from tierwise.testbed.spec import PREFIX, TestbedError, TestbedSpec

__all__ = ["require_privileges", "up", "down", "list_namespaces", "netem_available", "probe", "ns_python",
           "tbf_args", "PAYLOAD_FRACTION", "MTU"]

MTU = 1500
PAYLOAD_FRACTION = (MTU - 20 - 20 - 12) / (MTU + 14)
"""TCP payload bytes per byte tbf counts: MSS 1448 (MTU - IPv4 20 - TCP 20 - timestamp option 12) over the
frame tbf sees (MTU + 14 B Ethernet header): 0.9564. A 1 Gbit/s tbf carries 119.6 MB/s of payload."""
_PORT = 29400


def require_privileges() -> None:
    """Root and iproute2 (``ip``, ``tc``) or one :class:`TestbedError` line saying what is missing."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces and tc); run as root or skip it")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            raise TestbedError(f"the testbed needs iproute2 ('{tool}' not found); install iproute2")


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([_tool(args[0]), *args[1:]], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise TestbedError(f"'{' '.join(args)}' failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    return proc


def list_namespaces(name: str | None = None) -> list[str]:
    """Namespaces of testbed ``name`` (every testbed's with None) that exist now."""
    out = _sh("ip", "netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    want = PREFIX if name is None else f"{PREFIX}{name}-"
    return sorted(n for n in names if n.startswith(want))


def down(name: str) -> list[str]:
    """Delete testbed ``name``'s namespaces (and with them its veths, bridges and qdiscs); return them."""
    removed: list[str] = []
    for _ in range(2):  # a second pass for one made while the first ran (an up interrupted part way)
        left = [ns for ns in list_namespaces(name) if ns not in removed]
        for ns in left:
            pids = _sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:  # processes still inside (a rank left by a killed run): only those, by id
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), 9)
            _sh("ip", "netns", "del", ns, check=False)
            _unlink_half_made(ns)
            removed.append(ns)
        if not left:
            break
    return removed


def _unlink_half_made(ns: str) -> None:
    """A namespace whose ``ip netns add`` was killed part way (Ctrl-C under load) is a file in /run/netns
    that is not a mount; ``ip netns del`` refuses it (it cannot unmount it), so unlink it (ours only)."""
    path = os.path.join("/run/netns", ns)
    if ns.startswith(PREFIX) and os.path.lexists(path) and not os.path.ismount(path):
        with contextlib.suppress(OSError):
            os.unlink(path)


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (tried on a dummy device inside a scratch namespace)."""
    ns = f"{PREFIX}netem-probe-{os.getpid()}"
    try:
        if _sh("ip", "netns", "add", ns, check=False).returncode:
            return False
        _sh("ip", "-n", ns, "link", "add", "d0", "type", "dummy", check=False)
        return _sh("tc", "-n", ns, "qdisc", "add", "dev", "d0", "root", "netem", "delay", "1ms",
                   check=False).returncode == 0
    finally:
        _sh("ip", "netns", "del", ns, check=False)


def tbf_args(rate_bytes_per_s: float) -> list[str]:
    """``tc qdisc ... tbf`` arguments for one end of a link (module docstring: why these sizes)."""
    burst = max(64 * 1024, int(rate_bytes_per_s * 1e-3))
    limit = max(4 << 20, int(rate_bytes_per_s * 0.5))
    return ["tbf", "rate", f"{int(rate_bytes_per_s * 8)}bit", "burst", str(burst), "limit", str(limit)]


def _shape(ns: str, dev: str, rate: float, delay_s: float | None) -> None:
    _sh("tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", *tbf_args(rate))
    if delay_s:  # netem below tbf: the delay is added after shaping, never through tbf's latency (not run
        # on this project's machines, whose kernel has no netem)
        _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "netem",
            "delay", f"{delay_s * 1e6:.0f}us")


def up(spec: TestbedSpec) -> dict:
    """Create the testbed (removing leftovers of one with the same name first); return what was created.

    Any failure or Ctrl-C part way removes what was created so far before the error propagates.
    """
    require_privileges()
    leftovers = down(spec.name)
    emulated = spec.latency_s is not None and spec.latency_s > 0 and netem_available()
    delay = spec.latency_s / 2 if emulated else None  # one-way latency, half on each end of the veth
    try:
        created = _create(spec, delay)
    except BaseException:
        down(spec.name)
        raise
    return {"namespaces": created["namespaces"], "links": created["links"], "repaired": leftovers,
            "latency_emulated": emulated}


def _create(spec: TestbedSpec, delay_s: float | None) -> dict:
    sw = spec.namespaces[-1]
    links = []
    for ns in spec.namespaces:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
    leaves = sorted(set(spec.leaf_of_node))
    for leaf in leaves:
        _sh("ip", "-n", sw, "link", "add", f"br{leaf}", "type", "bridge")
        _sh("ip", "-n", sw, "link", "set", f"br{leaf}", "up")
    for i, ns in enumerate(spec.namespaces[:-1]):
        _sh("ip", "-n", ns, "link", "add", "eth0", "mtu", str(MTU), "type", "veth", "peer", "name", f"n{i}",
            "netns", sw)
        _sh("ip", "-n", ns, "addr", "add", f"{spec.node_ip(i)}/24", "dev", "eth0")
        _sh("ip", "-n", sw, "link", "set", f"n{i}", "master", f"br{spec.leaf_of_node[i]}")
        _sh("ip", "-n", ns, "link", "set", "eth0", "up")
        _sh("ip", "-n", sw, "link", "set", f"n{i}", "up")
        _shape(ns, "eth0", spec.link_bytes_per_s, delay_s)
        _shape(sw, f"n{i}", spec.link_bytes_per_s, delay_s)
        links.append({"link": f"{ns}:eth0 <-> {sw}:n{i}", "rate_bytes_per_s": spec.link_bytes_per_s,
                      "tbf": " ".join(tbf_args(spec.link_bytes_per_s))})
    if spec.oversubscription is not None:
        rate = spec.uplink_bytes_per_s
        _sh("ip", "-n", sw, "link", "add", "up0", "mtu", str(MTU), "type", "veth", "peer", "name", "up1")
        for end, leaf in (("up0", 0), ("up1", 1)):
            _sh("ip", "-n", sw, "link", "set", end, "master", f"br{leaf}")
            _sh("ip", "-n", sw, "link", "set", end, "up")
            _shape(sw, end, rate, None)
        links.append({"link": f"{sw}:br0/up0 <-> {sw}:br1/up1 (uplink)", "rate_bytes_per_s": rate,
                      "tbf": " ".join(tbf_args(rate))})
    return {"namespaces": list(spec.namespaces), "links": links}


def ns_python(ns: str, module: str, *args: str, env: dict | None = None) -> list[str]:
    """argv running ``python -m module args`` inside namespace ``ns`` with this interpreter."""
    return [_tool("ip"), "netns", "exec", ns, sys.executable, "-m", module, *args]


def _pair(server: tuple[str, list[str]], client: tuple[str, list[str]]) -> tuple[float, float]:
    """Run a probe server and client in two namespaces; return (server value, client value)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    srv = subprocess.Popen(ns_python(server[0], "tierwise.testbed.probe", *server[1]), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        cli = subprocess.run(ns_python(client[0], "tierwise.testbed.probe", *client[1]), env=env,
                             capture_output=True, text=True, timeout=120)
        out, err = srv.communicate(timeout=120)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    if cli.returncode or srv.returncode:
        raise TestbedError(f"probe {server[1][0]} failed: {(err or cli.stderr).strip().splitlines()[-1:]}")
    return float(out.strip()), float(cli.stdout.strip())


def probe(spec: TestbedSpec, repeats: int = 3) -> dict:
    """Measure what the cluster file records: loopback rate and latency inside node 0, the link's latency
    (and its payload rate, for the report) between nodes 0 and 1, the host memory copy rate; medians of
    ``repeats`` (each a fresh connection), except the loopback rate: the best of them."""
    n0 = spec.namespaces[0]
    ip0 = spec.node_ip(0)
    lo_rate, lo_rtt, link_rtt, link_rate = [], [], [], []
    port = _PORT
    for _ in range(repeats):
        port += 4
        lo_rate.append(_pair((n0, ["stream-recv", "127.0.0.1", str(port), str(256 << 20)]),
                             (n0, ["stream-send", "127.0.0.1", str(port), str(256 << 20)]))[0])
        lo_rtt.append(_pair((n0, ["pong", "127.0.0.1", str(port + 1), "300"]),
                            (n0, ["ping", "127.0.0.1", str(port + 1), "300"]))[1])
        if spec.num_nodes > 1:
            n1 = spec.namespaces[1]
            link_rtt.append(_pair((n0, ["pong", ip0, str(port + 2), "300"]),
                                  (n1, ["ping", ip0, str(port + 2), "300"]))[1])
            nbytes = int(max(4 << 20, spec.link_bytes_per_s * 0.25))
            link_rate.append(_pair((n0, ["stream-recv", ip0, str(port + 3), str(nbytes)]),
                                   (n1, ["stream-send", ip0, str(port + 3), str(nbytes)]))[0])
    mem = subprocess.run(ns_python(n0, "tierwise.testbed.probe", "memcopy", str(64 << 20)), capture_output=True,
                         text=True, timeout=120)
    if mem.returncode != 0:
        raise TestbedError(f"memory probe failed: {mem.stderr.strip().splitlines()[-1:]}")
    med = statistics.median
    # the loopback rate is the best of the repeats: a shared host's other work only ever lowers it
    out = {"loopback_bytes_per_s": max(lo_rate), "loopback_latency_s": med(lo_rtt) / 2,
           "memory_bytes_per_s": float(mem.stdout.strip()),
           "link_latency_s": med(link_rtt) / 2 if link_rtt else None,
           "link_payload_bytes_per_s_measured": med(link_rate) if link_rate else None,
           "link_payload_bytes_per_s_expected": spec.link_bytes_per_s * PAYLOAD_FRACTION}
    return out
