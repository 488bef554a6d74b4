"""Bytes on the wire for each collective, and the nccl-tests size and bus-bandwidth conventions.

Every function works on floats or numpy arrays alike.

Sizes follow nccl-tests (``doc/PERFORMANCE.md`` and ``src/*.cu`` of NVIDIA/nccl-tests, see
``collectives-notes.md`` section 2): ``size_bytes`` is the whole buffer, i.e. for all-gather the gathered
output, for reduce-scatter the input, for all-to-all each rank's full send buffer.

The *ring-equivalent* volume a rank sends, ``bytes_per_rank``, is the busbw factor times the size:

=============== ======================= ============================================================
collective      bytes each rank sends    derivation
=============== ======================= ============================================================
all-reduce      2 (n-1)/n x S            reduce-scatter then all-gather, each (n-1) chunks of S/n
reduce-scatter  (n-1)/n x S              (n-1) chunks of S/n
all-gather      (n-1)/n x S              (n-1) chunks of S/n
all-to-all      (n-1)/n x S              S/n to each of the n-1 peers
broadcast       S                        a pipelined chain forwards the whole buffer once
send/recv       S                        one transfer
=============== ======================= ============================================================

nccl-tests defines busbw = algbw x factor with exactly these factors, whatever algorithm ran, so that a
flat point-to-point algorithm at link rate B shows busbw = B (Rabenseifner; nccl-tests PERFORMANCE.md).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from tierwise.errors import SpecError, did_you_mean

__all__ = [
    "KINDS",
    "Kind",
    "normalize_kind",
    "bus_factor",
    "bytes_per_rank",
]

Kind = Literal["all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send-recv"]
KINDS: tuple[str, ...] = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send-recv")

_ALIASES = {
    "allreduce": "all-reduce",
    "all_reduce": "all-reduce",
    "reducescatter": "reduce-scatter",
    "reduce_scatter": "reduce-scatter",
    "allgather": "all-gather",
    "all_gather": "all-gather",
    "alltoall": "all-to-all",
    "all_to_all": "all-to-all",
    "bcast": "broadcast",
    "sendrecv": "send-recv",
    "send_recv": "send-recv",
    "p2p": "send-recv",
    "send/recv": "send-recv",
}


def normalize_kind(kind: str) -> str:
    """Canonical collective name; accepts nccl-tests spellings (``all_reduce``, ``alltoall``, ``sendrecv``)."""

    text = kind.strip().lower()
    text = _ALIASES.get(text, text)
    if text not in KINDS:
        raise SpecError(f"unknown collective {kind!r}; choose one of {', '.join(KINDS)}{did_you_mean(text, KINDS)}")
    return text


def bus_factor(kind: str, num_ranks):
    """busbw / algbw for ``kind`` on ``num_ranks`` ranks (nccl-tests ``*GetBw``)."""
    n = np.asarray(num_ranks, dtype=float)
    if kind == "all-reduce":
        return 2.0 * (n - 1.0) / n
    if kind in ("reduce-scatter", "all-gather", "all-to-all"):
        return (n - 1.0) / n
    if kind in ("broadcast", "send-recv"):
        return np.ones_like(n)
    raise ValueError(kind)


def bytes_per_rank(kind: str, size_bytes, num_ranks):
    """Ring-equivalent bytes each rank sends: ``bus_factor x size`` (the table above; 0 for one rank).

    >>> float(bytes_per_rank("all-reduce", 16e9, 1024)) / 1e9  # the seeds' 8B-parameter BF16 gradients
    31.96875
    """
    n = np.asarray(num_ranks)
    return np.where(n > 1, bus_factor(kind, n) * np.asarray(size_bytes, dtype=float), 0.0)
