"""Bring a testbed up (network, probes, cluster file), run ranks inside it, take it down.

``bring_up`` writes into the testbed directory: ``testbed.json`` (the spec, what was created, the probes)
and ``cluster.yaml`` (a cluster file :func:`tierwise.specs.cluster.load_cluster` reads: scale-up = a node's
loopback as measured in the same run, scale-out = the link's TCP payload rate as set, latencies as
measured). ``run_sweep`` launches one process per rank with ``ip netns exec`` and appends its rows to
``results.json``; ``run_ddp`` runs ``tierwise measure ddp`` the same way (torchrun's environment).

Bounds (issue 32, hangs): every rank runs on this one machine, so before any rank starts

* a sweep whose bytes on the wire at the link's rate would take longer than its time limit (30 minutes by
  default: ``(warmup + iters) x 2 x size / link rate`` summed over the cases, a lower bound on the real
  time) is refused with that estimate, and a buffer over :data:`MAX_TESTBED_BUFFER_BYTES` is refused
  (every rank holds its buffers in this machine's memory);
* a ``ddp`` model whose weights, gradients and optimizer state on all ranks
  (``16 B x width^2 x layers x ranks``) pass half this machine's memory is refused.

A run that passes these checks and still runs past its time limit is stopped (every rank killed) and
reported as timed out.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from tierwise.atomic import check_writable, write_atomic
from tierwise.files import load_json, read_user_text
from tierwise.specs.cluster import cluster_from_mapping
from tierwise.testbed import net
from tierwise.testbed.spec import (
    CLUSTER_FILE,
    RESULTS_FILE,
    STATE_FILE,
    TestbedError,
    TestbedSpec,
    dumps,
    load_state,
    node_of_rank,
    spec_from_state,
)

__all__ = ["bring_up", "take_down", "cluster_mapping", "run_sweep", "run_ddp", "launch_ranks", "check_sweep_budget",
           "check_ddp_memory", "MAX_TESTBED_BUFFER_BYTES"]

MAX_TESTBED_BUFFER_BYTES = 2**30
"""The largest collective buffer a testbed rank allocates (1 GiB; all ranks share this machine's memory)."""

ACCELERATOR = "h100-sxm"
"""A cluster file needs an accelerator; collectives never read it (listed under ``assumed``)."""


def cluster_mapping(spec: TestbedSpec, probes: dict) -> dict:
    """The cluster file's mapping (module docstring); every figure is the set rate or one measured now."""
    link = spec.link_bytes_per_s * net.PAYLOAD_FRACTION
    lat_link = probes["link_latency_s"] if probes["link_latency_s"] is not None else probes["loopback_latency_s"]
    data = {
        "name": f"twtb-{spec.name}",
        "accelerator": ACCELERATOR,
        "gpus_per_node": spec.ranks_per_node,
        "scale_up_domain": spec.ranks_per_node,
        "nics_per_node": 1,
        "nic_bandwidth": f"{link!r} B/s",
        "scale_up_bandwidth": f"{probes['loopback_bytes_per_s']!r} B/s",
        "scale_up_p2p_bandwidth": f"{probes['loopback_bytes_per_s']!r} B/s",
        "host_bandwidth": f"{probes['memory_bytes_per_s']!r} B/s",
        "scale_up_latency": f"{probes['loopback_latency_s']!r} s",
        "host_latency": f"{probes['loopback_latency_s']!r} s",
        "scale_out_latency": f"{lat_link!r} s",
        "source": "tierwise testbed up: loopback rate, latencies and memory rate measured in this run; "
                  f"link = tbf rate {spec.link_text} x TCP payload fraction {net.PAYLOAD_FRACTION:.4f}",
        "notes": f"{spec.num_nodes} nodes x {spec.ranks_per_node} ranks; accelerator is a placeholder",
    }
    if spec.oversubscription is not None:
        data["scale_out_levels"] = [{"name": "leaf", "domain_size": spec.num_nodes // 2 * spec.ranks_per_node,
                                     "oversubscription": spec.oversubscription}]
    return data


def bring_up(spec: TestbedSpec, directory: str) -> dict:
    """Create the network, probe it, write the state and cluster files; return the ``up`` document."""
    import yaml

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    for name in (STATE_FILE, CLUSTER_FILE):
        check_writable(folder / name, "--dir")
    try:  # from the first namespace on: a Ctrl-C anywhere in up, the probes or the writes removes all of it
        created = net.up(spec)
        probes = net.probe(spec)
        mapping = cluster_mapping(spec, probes)

        cluster_from_mapping(mapping, origin="testbed cluster")  # the loader accepts what is written
        write_atomic(folder / CLUSTER_FILE, yaml.safe_dump(mapping, sort_keys=False), "--dir")
        latency = ("not emulated (no netem on this kernel); predictions use the measured link latency"
                   if spec.latency_s and not created["latency_emulated"] else
                   ("emulated with netem" if spec.latency_s else "none requested"))
        state = {"spec": spec.to_dict(), **created, "probes": probes, "latency": latency,
                 "cluster_file": str(folder / CLUSTER_FILE),
                 "assumed": [f"accelerator: {ACCELERATOR} (placeholder; collectives do not read it)",
                             f"MTU {net.MTU}: TCP payload fraction {net.PAYLOAD_FRACTION:.4f} of the tbf rate"]}
        write_atomic(folder / STATE_FILE, dumps(state), "--dir")
        results = folder / RESULTS_FILE
        if results.exists():
            results.unlink()  # results of an earlier testbed do not belong to this one
    except BaseException:
        net.down(spec.name)
        raise
    return state


def take_down(name: str, directory: str | None = None) -> dict:
    removed = net.down(name)
    if directory is not None:
        state = Path(directory) / STATE_FILE
        if state.exists():
            state.unlink()
    return {"removed": removed, "left": net.list_namespaces(name)}


def launch_ranks(spec: TestbedSpec, layout: str, module_args: list[str], timeout_s: float,
                 capture_rank0: bool = False) -> str:
    """Start one ``python -m ...`` per rank in its node's namespace; wait; kill all on error or Ctrl-C.

    Returns rank 0's stdout when ``capture_rank0``. A failed rank raises :class:`TestbedError` with its
    last stderr line.
    """
    net.require_privileges()
    if net.list_namespaces(spec.name) != sorted(spec.namespaces):
        raise TestbedError(f"testbed {spec.name!r} is not up (namespaces missing); run tierwise testbed up")
    world = spec.num_ranks
    master = spec.node_ip(node_of_rank(0, spec, layout))
    port = str(random.randint(20000, 28000))
    procs = []
    logs = []
    try:
        for rank in range(world):
            ns = spec.namespaces[node_of_rank(rank, spec, layout)]
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0",
                   "MASTER_ADDR": master, "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "eth0",
                   "OMP_NUM_THREADS": "1"}
            err = tempfile.TemporaryFile()  # noqa: SIM115 (closed in the finally below)
            out = tempfile.TemporaryFile()  # noqa: SIM115
            logs.append((out, err))
            procs.append(subprocess.Popen(net.ns_python(ns, module_args[0], *module_args[1:]), env=env,
                                          stdout=out, stderr=err))
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs):
            failed = [i for i, p in enumerate(procs) if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        bad = [i for i, p in enumerate(procs) if p.poll() != 0]
        if bad:
            logs[bad[0]][1].seek(0)
            lines = logs[bad[0]][1].read().decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else ("timed out" if procs[bad[0]].poll() is None else "no output")
            raise TestbedError(f"rank {bad[0]} failed: {why[:300]}")
        logs[0][0].seek(0)
        return logs[0][0].read().decode(errors="replace") if capture_rank0 else ""
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for out, err in logs:
            out.close()
            err.close()


def run_sweep(directory: str, cases: list[dict], *, layout: str = "contiguous", iters: int = 5, warmup: int = 1,
              timeout_s: float = 1800.0) -> list[dict]:
    """Measure ``cases`` ({op, algorithm, size_bytes}) on the testbed in ``directory``; the rows (with the
    layout) are appended to its results file and returned."""

    state = load_state(directory)
    spec = spec_from_state(state)
    check_sweep_budget(spec, cases, iters=iters, warmup=warmup, timeout_s=timeout_s)
    folder = Path(directory)
    placement = [node_of_rank(r, spec, layout) for r in range(spec.num_ranks)]
    with tempfile.TemporaryDirectory(prefix="twtb-") as tmp:
        job = {"cases": cases, "iters": iters, "warmup": warmup, "node_of_rank": placement,
               "out": os.path.join(tmp, "rows.json")}
        Path(tmp, "job.json").write_text(json.dumps(job))
        os.chmod(tmp, 0o755)
        launch_ranks(spec, layout, ["tierwise.testbed.worker", os.path.join(tmp, "job.json")], timeout_s)
        rows = json.loads(Path(job["out"]).read_text())
    for row in rows:
        row["layout"] = layout
    results = folder / RESULTS_FILE
    old = load_json(read_user_text(str(results), what="testbed results"), str(results), TestbedError) \
        if results.exists() else []
    write_atomic(results, dumps(old + rows), "--dir")
    return rows


def _duration(seconds: float) -> str:
    for unit, scale in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= scale:
            return f"{seconds / scale:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{seconds:.0f} s"


def check_sweep_budget(spec: TestbedSpec, cases: list[dict], *, iters: int, warmup: int, timeout_s: float) -> None:
    """Refuse a sweep that cannot finish in ``timeout_s`` on the link, or a buffer past the memory bound."""
    largest = max((int(c["size_bytes"]) for c in cases), default=0)
    if largest > MAX_TESTBED_BUFFER_BYTES:
        raise TestbedError(f"--sizes up to {largest:,} B: each of the {spec.num_ranks} ranks would hold buffers of "
                           f"that size in this machine's memory; use sizes <= {MAX_TESTBED_BUFFER_BYTES:,} B (1 GiB)")
    wire = sum(2.0 * int(c["size_bytes"]) for c in cases) * (iters + warmup)
    seconds = wire / spec.link_bytes_per_s
    if seconds > timeout_s:
        raise TestbedError(f"this sweep moves at least {wire:,.0f} B over the {spec.link_text} link: about "
                           f"{_duration(seconds)}, past the {_duration(timeout_s)} limit; give fewer or smaller "
                           "--sizes, fewer --iters, or bring the testbed up with a faster --link")


def _physical_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 8 GiB
        return 8.0 * 2**30


def check_ddp_memory(spec: TestbedSpec, ddp_args: list[str]) -> None:
    """Refuse a ``ddp`` model whose state on every rank passes half this machine's memory."""
    args = dict(zip(ddp_args[::2], ddp_args[1::2], strict=False))
    try:
        width, layers = int(args.get("--width", 1024)), int(args.get("--layers", 6))
    except ValueError:
        return  # measure ddp names the bad value itself
    need = 16.0 * width * width * layers * spec.num_ranks
    have = _physical_memory() / 2
    if need > have:
        raise TestbedError(f"--width {width} x --layers {layers} on {spec.num_ranks} ranks needs about "
                           f"{need / 2**30:,.1f} GiB (weights, gradients and Adam state, 16 B a parameter per rank), "
                           f"past half this machine's {2 * have / 2**30:,.1f} GiB; use a smaller --width or --layers")


def run_ddp(directory: str, ddp_args: list[str], layout: str = "contiguous", timeout_s: float = 1800.0) -> dict:
    """``tierwise measure ddp --json ARGS`` with every rank in its node's namespace (torchrun's variables)."""
    state = load_state(directory)
    spec = spec_from_state(state)
    check_ddp_memory(spec, ddp_args)
    out = launch_ranks(spec, layout, ["tierwise", "measure", "ddp", "--json", *ddp_args], timeout_s,
                       capture_rank0=True)
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        raise TestbedError(f"measure ddp printed no JSON on rank 0: {out.strip()[-200:]!r}") from None
