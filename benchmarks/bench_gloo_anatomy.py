"""Anatomy of gloo collectives on one host: what an all-gather and a broadcast cost beside an all-reduce.

Run: ``python benchmarks/bench_gloo_anatomy.py [--sizes 1MiB:16MiB] [--iters 30] [--rounds 5]``
(2 local ranks, gloo over TCP loopback, ``OMP_NUM_THREADS=1``; needs torch). Prints one table and the
ratios the shared-host model (:mod:`tierwise.measure.hostcopy`) depends on; the figures, not a pass/fail.

Why. ``tierwise calibrate`` on a gloo all-reduce sweep fits one cost per byte of work and predicts the
other ops from their counted work. Whether that transfers depends on how the all-reduce's time splits
between kernel socket copies, gloo's reduction and user-space copies, which an all-reduce sweep alone
cannot tell apart. This script times the parts separately, in the same processes and interleaved rounds
(every part of one size runs back to back, so they see the same host load), at n = 2:

* ``AR``  ``all_reduce`` of S (gloo ring, in place: two exchange phases + a reduction of S/2 per rank);
* ``AG``  ``all_gather_single`` into S (torch's flat output + gloo's ring: one exchange + copies);
* ``BC``  ``broadcast`` of S from rank 0 (gloo binomial tree: at n = 2 one whole-buffer send);
* ``XCH`` ``batch_isend_irecv``: each rank sends S/2 and receives S/2 (one ring step: the exchange that
  the all-gather runs once and the all-reduce twice);
* ``ONE`` ``send``/``recv`` of S, rank 0 to rank 1 (the broadcast's stream without gloo's tree);
* ``CPY`` ``copy_`` of S/2 and of S on every rank at once (the all-gather's two user-space copies: own
  block into the flat output, flat output into the result), timed alone.

Derived, per size: ``R = AR - 2 XCH`` (what the all-reduce spends beyond its two exchanges: the reduction
and the segment pipeline), ``C = AG - XCH`` (what the all-gather spends beyond its one exchange: its
copies), ``C / CPY`` (those copies inside the collective against the same copies timed alone) and
``BC / XCH``, ``BC / ONE``. Medians over ``--rounds`` of the per-round medians over ``--iters`` timed
operations (each timed alone after a barrier, as ``tierwise measure collective`` does).
"""

from __future__ import annotations

import argparse
import statistics
import time

PARTS = ("AR", "AG", "BC", "XCH", "ONE", "CPY")


def _parts(rank: int, size: int) -> dict:
    """The six timed parts for one size on this rank (module docstring), buffers allocated once."""
    import torch
    import torch.distributed as dist

    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    peer = 1 - rank
    n = size // 4 // 2 * 2
    full, out, half, recv_half = torch.ones(n), torch.empty(n), torch.ones(n // 2), torch.empty(n // 2)
    flat, copy_src = torch.empty(n), torch.ones(n)

    def exchange():
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, half, peer), dist.P2POp(dist.irecv, recv_half, peer)])
        for req in reqs:
            req.wait()

    def one_way():
        if rank == 0:
            dist.send(full, 1)
        else:
            dist.recv(full, 0)

    def copies():
        flat[: n // 2].copy_(half)
        out.copy_(copy_src)

    return {"AR": lambda: dist.all_reduce(full), "AG": lambda: gather(out, half),
            "BC": lambda: dist.broadcast(full, src=0), "XCH": exchange, "ONE": one_way, "CPY": copies}


def _worker(rank: int, world: int, sizes: list[int], iters: int, rounds: int) -> dict:
    import torch.distributed as dist

    samples: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):
        for size in sizes:
            for name, run in _parts(rank, size).items():
                for _ in range(3):
                    run()
                times = []
                for _ in range(iters):
                    dist.barrier()
                    start = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - start)
                samples.setdefault((name, size), []).append(statistics.median(times))
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> None:
    from tierwise.measure.bench import launch, parse_sizes

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1MiB:16MiB")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = parse_sizes(args.sizes)
    result = launch(_worker, (sizes, args.iters, args.rounds), 2, "gloo")
    ms = {key: value * 1e3 for key, value in result.items()}
    print(f"gloo, 2 local ranks; medians of {args.rounds} rounds x {args.iters} iterations; times in ms")
    print(f"{'size':>9} " + " ".join(f"{p:>7}" for p in PARTS)
          + f" {'R=AR-2XCH':>10} {'C=AG-XCH':>9} {'C/CPY':>6} {'BC/XCH':>7} {'BC/ONE':>7} {'AG/AR':>6} {'BC/AR':>6}")
    ratios: dict[str, list[float]] = {}
    for size in sizes:
        t = {p: ms[(p, size)] for p in PARTS}
        r, c = t["AR"] - 2 * t["XCH"], t["AG"] - t["XCH"]
        row = {"C/CPY": c / t["CPY"], "BC/XCH": t["BC"] / t["XCH"], "BC/ONE": t["BC"] / t["ONE"],
               "AG/AR": t["AG"] / t["AR"], "BC/AR": t["BC"] / t["AR"]}
        for key, value in row.items():
            ratios.setdefault(key, []).append(value)
        print(f"{size / 2**20:7.2f}Mi " + " ".join(f"{t[p]:7.2f}" for p in PARTS)
              + f" {r:10.2f} {c:9.2f} " + " ".join(f"{v:{len(k) if len(k) > 6 else 6}.2f}" for k, v in row.items()))
    print("medians over sizes: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
