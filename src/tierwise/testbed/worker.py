"""One rank of a testbed run (``python -m tierwise.testbed.worker JOB.json``, started inside its node's namespace).

The environment carries ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` (rank 0's node address on the bridge),
``MASTER_PORT`` and ``GLOO_SOCKET_IFNAME=eth0`` (gloo binds to the node's veth; two ranks of one node reach
each other's address through the namespace's loopback). The job file lists ``cases`` ({op, algorithm,
size_bytes}), ``iters``, ``warmup``, the rank -> node map and ``out``.

Timing: each operation is timed alone after a barrier (every rank starts together), each rank's time is
its own, the operation's time is the *slowest* rank's (the collective is done when the last rank is), and
the row's ``measured_s`` is the median over ``iters`` (``min_s`` kept too). Rank 0 writes the rows.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from tierwise.testbed import algorithms

_ELEMENT = 4  # float32


def _buffers(op: str, size: int, world: int):
    import torch

    elements = max(world, size // _ELEMENT // world * world)
    if op == "all-gather":
        return torch.ones(elements // world), torch.zeros(elements)
    if op == "reduce-scatter":
        return torch.ones(elements), torch.zeros(elements // world)
    return torch.ones(elements), torch.zeros(elements)


def _operation(case: dict, inp, out, rank: int, world: int, nodes: list[list[int]]):
    import torch.distributed as dist

    op, algorithm = case["op"], case["algorithm"]
    ranks = list(range(world))
    if algorithm == "ring":
        return lambda: algorithms.ring_all_reduce(inp, ranks, rank)
    if algorithm == "tree":
        return lambda: algorithms.tree_all_reduce(inp, ranks, rank)
    if algorithm == "hierarchical":
        return lambda: algorithms.hierarchical_all_reduce(inp, nodes, rank)
    return {
        "all-reduce": lambda: dist.all_reduce(inp),
        "all-gather": lambda: dist.all_gather_into_tensor(out, inp),
        "reduce-scatter": lambda: dist.reduce_scatter_tensor(out, inp),
        "broadcast": lambda: dist.broadcast(inp, 0),
        "all-to-all": lambda: dist.all_to_all_single(out, inp),
    }[op]


def _wrong(case: dict, inp, rank: int, world: int) -> int:
    """Elements that differ from the known sum (all-reduce of rank + 1 everywhere); 0 for other ops."""
    if case["op"] != "all-reduce":
        return 0
    return int((inp != world * (world + 1) / 2).sum())


def run_case(case: dict, job: dict, rank: int, world: int, nodes: list[list[int]]) -> dict:
    import torch
    import torch.distributed as dist

    inp, out = _buffers(case["op"], case["size_bytes"], world)
    inp.fill_(rank + 1)
    fn = _operation(case, inp, out, rank, world, nodes)
    fn()
    wrong = torch.tensor([_wrong(case, inp, rank, world)], dtype=torch.float64)
    dist.all_reduce(wrong)
    for _ in range(job["warmup"]):
        fn()
    times = torch.zeros(job["iters"], dtype=torch.float64)
    for i in range(job["iters"]):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    values = times.tolist()
    return {**case, "measured_s": statistics.median(values), "min_s": min(values), "times_s": values,
            "wrong": int(wrong.item()), "num_ranks": world, "iters": job["iters"],
            "load_average": os.getloadavg()[0]}  # the host's 1-minute load: other work shares the cores


def main(path: str) -> None:
    import torch
    import torch.distributed as dist

    with open(path) as f:
        job = json.load(f)
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    node_of = job["node_of_rank"]
    nodes = [[r for r in range(world) if node_of[r] == node] for node in sorted(set(node_of))]
    rows = []
    try:
        for case in job["cases"]:
            rows.append(run_case(case, job, rank, world, nodes))
            if rank == 0:
                tmp = job["out"] + ".part"
                with open(tmp, "w") as f:
                    json.dump(rows, f)
                os.replace(tmp, job["out"])
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
