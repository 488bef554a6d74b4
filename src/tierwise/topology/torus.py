"""2D/3D torus (k-ary n-cube) of GPUs with direct links, as in TPU pods (no switches).

GPU ``g`` has coordinates ``unravel_index(g, dims)`` and a cable to its + neighbour in each dimension
(wrap-around), so 2n links per GPU. Routing is dimension-order with the shorter direction per dimension
(Dally & Towles, *Principles and Practices of Interconnection Networks*, 2004, section 14.2).

Bisection (one-way): cutting the largest dimension K (even) in half cuts two planes of ``N / K`` cables
(the wrap-around doubles it): ``B = 2 N / K x b`` (Dally & Towles section 3.3).
"""

from __future__ import annotations

import numpy as np

from tierwise.errors import TopologyError
from tierwise.topology.graph import GraphBuilder

__all__ = ["parse_dims", "add_torus", "torus_bisection"]


def parse_dims(text: str, num_gpus: int) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise TopologyError(f"torus dims {text!r} do not parse; write e.g. 8x8 or 4x4x4") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1 or max(dims) > num_gpus:
        raise TopologyError(f"torus dims {text!r} must be 1 to 3 positive sizes, e.g. 8x8 or 4x4x4")
    if int(np.prod(dims)) != num_gpus:
        raise TopologyError(f"torus dims {text} hold {int(np.prod(dims))} GPUs, not --gpus {num_gpus}; "
                            f"make the product equal")
    hops = sum(k // 2 for k in dims)
    if num_gpus * hops > MAX_PATH_ENTRIES:
        raise TopologyError(f"torus dims {text}: {num_gpus} GPUs with paths of up to {hops} hops are more than the "
                            f"simulator holds ({num_gpus} x {hops} > 2^25); use more dimensions, e.g. --dims "
                            f"with 2 or 3 sizes")
    return dims


MAX_PATH_ENTRIES = 2**25
"""GPUs x diameter of a torus: every route is a row of that many link ids (2^25 of them are 256 MiB)."""


def torus_bisection(dims: tuple[int, ...], b: float) -> float:
    n = int(np.prod(dims))
    big = max(dims)
    if big < 2:
        return 0.0
    # for K = 2 the + and - neighbours coincide and add_torus lays two parallel cables: still 2 N / K
    return 2.0 * n / big * b


def add_torus(gb: GraphBuilder, dims: tuple[int, ...], cap: float, lat: float) -> dict:
    n = int(np.prod(dims))
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    plus = np.full((n, len(dims)), -1, dtype=np.int64)
    minus = np.full((n, len(dims)), -1, dtype=np.int64)
    for d, k in enumerate(dims):
        if k < 2:
            continue
        nb = coords.copy()
        nb[:, d] = (nb[:, d] + 1) % k
        other = np.ravel_multi_index(tuple(nb.T), dims)
        fwd, back = gb.add_cables(np.arange(n), other, cap, lat, tier=2)
        plus[:, d] = fwd
        minus[other, d] = back
    return {"dims": dims, "coords": coords, "plus": plus, "minus": minus, "switches_per_tier": []}
