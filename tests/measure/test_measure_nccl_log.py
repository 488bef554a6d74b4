"""The nccl-tests parser on the shared logs (copied to tests/data/nccl-logs) and on synthetic variants."""

from pathlib import Path

import pytest

from tierwise.errors import MeasureError
from tierwise.measure.nccl_log import parse_nccl_log, parse_nccl_text

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-logs"
H100X32 = DATA / "h100x32_4node_ib_allreduce_nccl2.24.3_voltagepark.log"
H100X8 = DATA / "h100x8_1node_nvswitch_allreduce_nccl2.24.3_voltagepark.log"
A100X8 = DATA / "a100x8_1node_nvswitch_allreduce_stas00_reformatted.txt"
AZURE = DATA / "azure_nd_a100v4_h100v5_h200v5_x8_1node_allreduce_busbw.tsv"

AG_LOG = """\
# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_gather_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  11 on nodeA device  0 [0000:19:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12 on nodeA device  1 [0000:3b:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  13 on nodeB device  0 [0000:19:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  14 on nodeB device  1 [0000:3b:00] NVIDIA H100 80GB HBM3
nodeA:11:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB
NCCL version 2.27.3+cuda12.4
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
        1024            64     float    none      -1    20.00    0.05    0.04       0    19.00    0.05    0.04       0
nodeB:13:13 [0] NCCL WARN some transient warning
        2048           128     float    none      -1    21.00    0.10    0.07       0    20.00    0.10    0.08       1
        4096           256     float    none      -1    22.00    0.19    0.14       0    21.00    0.20    0.15       0
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : 0.08
"""


def test_parses_the_32_gpu_log():
    (sweep,) = parse_nccl_log(H100X32)
    assert sweep.op == "all-reduce"
    assert sweep.num_ranks == 32
    assert sweep.ranks_per_node == 8 and sweep.num_nodes == 4
    assert sweep.nccl_version.startswith("2.24.3")
    assert len(sweep.rows) == 31
    last = sweep.rows[-1]
    assert last.size_bytes == 8589934592
    assert last.time_s == pytest.approx(50291.8e-6)
    assert last.busbw_bytes_per_s == pytest.approx(330.93e9)
    assert last.in_place_time_s == pytest.approx(50415.3e-6)
    assert last.wrong == 0 and last.in_place_wrong == 0


def test_single_process_log_counts_ranks_and_reads_version_from_library_code():
    (sweep,) = parse_nccl_log(H100X8)
    assert sweep.num_ranks == 8 and sweep.ranks_per_node == 8
    assert sweep.nccl_version == "2.24.3"  # nccl-library=22403


def test_reformatted_digit_groups_and_ranks_inferred_from_busbw_ratio():
    (sweep,) = parse_nccl_log(A100X8)
    assert sweep.op == "all-reduce"  # from the file name
    assert sweep.num_ranks == 8  # busbw/algbw = 1.75 = 2(n-1)/n
    assert sweep.rows[0].size_bytes == 32768
    assert sweep.rows[5].size_bytes == 1048576  # written "1048_576"
    assert sweep.rows[-1].size_bytes == 17179869184
    assert sweep.nccl_version is None  # the header says it is not stated


def test_azure_busbw_table_gives_one_sweep_per_system_with_derived_times():
    sweeps = parse_nccl_log(AZURE)
    assert [s.label for s in sweeps] == ["ndv4_a100x8_busbw", "ndv5_h100x8_busbw", "ndv5_h200x8_busbw"]
    h100 = sweeps[1]
    assert h100.num_ranks == 8
    row = next(r for r in h100.rows if r.size_bytes == 2**33)
    assert row.busbw_bytes_per_s == pytest.approx(478.87e9)
    assert row.time_s == pytest.approx(2**33 * 1.75 / 478.87e9)
    assert next(r for r in h100.rows if r.size_bytes == 65536)  # label "65K"


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "0: ", "12: "])
def test_launcher_prefixes_warnings_and_duplicate_rank_output(prefix):
    text = "\n".join(prefix + line for line in AG_LOG.splitlines())
    text += "\n" + "\n".join("[1,1]<stdout>:" + line for line in AG_LOG.splitlines())  # second rank echoes
    (sweep,) = parse_nccl_text(text, "job.out")
    assert sweep.op == "all-gather"
    assert sweep.num_ranks == 4 and sweep.ranks_per_node == 2
    assert sweep.nccl_version == "2.27.3+cuda12.4"
    assert [r.size_bytes for r in sweep.rows] == [1024, 2048, 4096]
    assert sweep.rows[1].in_place_wrong == 1


def test_op_flag_overrides_and_names_unknown_collectives():
    (sweep,) = parse_nccl_text(AG_LOG.replace("# Collective test starting: all_gather_perf\n", ""), "x.log",
                               op="alltoall")
    assert sweep.op == "all-to-all"
    with pytest.raises(MeasureError, match="cannot tell which collective"):
        parse_nccl_text(AG_LOG.replace("# Collective test starting: all_gather_perf\n", ""), "x.log")


def test_not_an_nccl_tests_log_is_one_clear_error(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello\nthis is not a benchmark\n42 is a number\n")
    with pytest.raises(MeasureError, match="no nccl-tests result rows"):
        parse_nccl_log(bogus)
    with pytest.raises(MeasureError, match="does not exist"):
        parse_nccl_log(tmp_path / "missing.log")
