"""The testbed's pricing without a testbed: schedules, analytic vs alpha-beta, simulator vs analytic, specs.

No root needed: these build no namespace (the privileged tests are in testbed_tests/, run by .ci/testbed).
"""

from __future__ import annotations

import pytest

from tierwise.collectives.alpha_beta import ring_time
from tierwise.testbed import net
from tierwise.testbed.run import cluster_mapping
from tierwise.testbed.schedule import Figures, analytic_time, figures_from_cluster, schedule, simulated_time
from tierwise.testbed.spec import TestbedError, node_of_rank, parse_spec

FIG = Figures(num_nodes=4, ranks_per_node=2, link_bytes_per_s=119.55e6, loopback_bytes_per_s=1.4e9,
              link_latency_s=20e-6, loopback_latency_s=12e-6, memory_bytes_per_s=12e9)
CONTIGUOUS = [r // 2 for r in range(8)]
INTERLEAVED = [r % 4 for r in range(8)]
S = 16 << 20


def test_ring_analytic_is_the_alpha_beta_ring():
    # contiguous layout: one ring edge per node link each way -> the ring of collectives/alpha_beta.py
    # (b_out = the node's link shared by its 2 ranks, so nl x b_out = the link)
    want = ring_time("all-reduce", S, 8, 2, FIG.loopback_bytes_per_s, FIG.link_bytes_per_s / 2,
                     FIG.loopback_latency_s, FIG.link_latency_s)
    got = analytic_time("all-reduce", "gloo", S, FIG, CONTIGUOUS)
    # the alpha-beta form charges intra-node steps the loopback latency, the levels model the slower hop's
    assert got == pytest.approx(float(want), rel=2e-3)


def test_every_transfer_moves_at_most_its_link_rate():
    # time >= bytes through the busiest node link / its rate, for every op and algorithm
    for op, alg in [("all-reduce", "gloo"), ("all-gather", "gloo"), ("broadcast", "gloo"), ("all-to-all", "gloo"),
                    ("all-reduce", "tree"), ("all-reduce", "hierarchical"), ("all-reduce", "ring")]:
        for layout in (CONTIGUOUS, INTERLEAVED):
            sched = schedule(op, alg, S, layout)
            node = [layout[r] for r in range(8)]
            out = [0.0] * 4
            for s, d, b in zip(sched.src, sched.dst, sched.nbytes, strict=True):
                if node[s] != node[d]:
                    out[node[s]] += b
            bound = max(out) / FIG.link_bytes_per_s
            assert analytic_time(op, alg, S, FIG, layout) >= bound * (1 - 1e-9)
            assert simulated_time(op, alg, S, FIG, layout) >= bound * (1 - 1e-9)


def test_simulator_agrees_with_levels_on_rings_and_all_to_all():
    for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        for layout in (CONTIGUOUS, INTERLEAVED):
            a = analytic_time(op, "gloo", S, FIG, layout)
            s = simulated_time(op, "gloo", S, FIG, layout)
            assert s == pytest.approx(a, rel=0.02), (op, layout)


def test_interleaving_halves_the_flat_ring_and_hierarchical_wins_by_over_1_4x():
    flat_c = analytic_time("all-reduce", "ring", S, FIG, CONTIGUOUS)
    flat_i = analytic_time("all-reduce", "ring", S, FIG, INTERLEAVED)
    hier_i = analytic_time("all-reduce", "hierarchical", S, FIG, INTERLEAVED)
    assert flat_i / flat_c == pytest.approx(2.0, rel=0.02)  # two ring edges per node link each way
    assert flat_i / hier_i > 1.4


def test_oversubscribed_uplink_slows_all_to_all_by_the_uplink_share():
    from dataclasses import replace

    over = replace(FIG, uplink_bytes_per_s=2 * FIG.link_bytes_per_s / 4.0)  # 2 nodes per leaf, 4:1
    base = analytic_time("all-to-all", "gloo", S, FIG, CONTIGUOUS)
    slow = analytic_time("all-to-all", "gloo", S, over, CONTIGUOUS)
    # node link: 2 x 6 x S/8 = 1.5 S at B; uplink: 4 x 4 x S/8 = 2 S at B/2 -> 4 S / B
    assert slow / base == pytest.approx(4.0 / 1.5, rel=0.01)
    assert simulated_time("all-to-all", "gloo", S, over, CONTIGUOUS) / base == pytest.approx(4.0 / 1.5, rel=0.02)


def test_cluster_file_loads_and_round_trips_the_figures():
    from tierwise.specs.cluster import cluster_from_mapping

    spec = parse_spec(nodes=4, ranks_per_node=2, link="1Gbit/s", oversubscription=2)
    probes = {"loopback_bytes_per_s": 1.4e9, "loopback_latency_s": 12e-6, "memory_bytes_per_s": 12e9,
              "link_latency_s": 20e-6}
    cluster = cluster_from_mapping(cluster_mapping(spec, probes))
    fig = figures_from_cluster(cluster, 4)
    assert fig.link_bytes_per_s == pytest.approx(125e6 * net.PAYLOAD_FRACTION)
    assert fig.uplink_bytes_per_s == pytest.approx(2 * fig.link_bytes_per_s / 2)
    assert fig.loopback_bytes_per_s == pytest.approx(1.4e9)
    assert fig.link_latency_s == pytest.approx(20e-6)


def test_tbf_never_uses_latency_as_delay():
    args = net.tbf_args(125e6)
    assert "latency" not in args and "delay" not in args
    assert int(args[args.index("burst") + 1]) >= 64 * 1024


@pytest.mark.parametrize("kwargs, needle", [
    (dict(nodes=-1), "--nodes"), (dict(nodes=0), "--nodes"), (dict(ranks_per_node=0), "--ranks-per-node"),
    (dict(link="1gbit"), "gbit"), (dict(link="0 Gb/s"), "--link"), (dict(link="100 Tb/s"), "--link"),
    (dict(oversubscription=0.5), "--oversubscription"), (dict(nodes=3, oversubscription=2), "even"),
    (dict(name="Bad_Name"), "--name"), (dict(nodes=1, ranks_per_node=1), "one rank"),
    (dict(latency="-5us"), "--latency"),
])
def test_bad_values_fail_before_anything(kwargs, needle):
    base = dict(nodes=2, ranks_per_node=2, link="1Gbit/s")
    with pytest.raises(TestbedError, match="(?i)" + needle.replace("-", r"\-")):
        parse_spec(**{**base, **kwargs})


def test_layouts():
    spec = parse_spec(nodes=4, ranks_per_node=2, link="1Gbit/s")
    assert [node_of_rank(r, spec, "contiguous") for r in range(8)] == CONTIGUOUS
    assert [node_of_rank(r, spec, "interleaved") for r in range(8)] == INTERLEAVED
