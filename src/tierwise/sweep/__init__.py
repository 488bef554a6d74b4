"""``tierwise sweep``: many scenarios (grid points) run on one machine or many, resumable, stored as Parquet.

* :mod:`tierwise.sweep.grid`: the grid YAML, its expansion into points with stable ids, shards.
* :mod:`tierwise.sweep.kinds`: what a point runs (``estimate``, ``plan``, ``simulate``; :func:`register_kind`).
* :mod:`tierwise.sweep.store`: the results directory of atomically written Parquet part files.
* :mod:`tierwise.sweep.run`: skip what is finished, run the rest (local processes or Ray), write as it goes.
* :mod:`tierwise.sweep.query`: DuckDB over the results (view ``results``).

See docs/sweep.md.
"""

from tierwise.sweep.grid import Point, SweepError, grid_from_mapping, load_grid, parse_shard, shard_points
from tierwise.sweep.kinds import KINDS, PointKind, register_kind
from tierwise.sweep.run import run_point, run_sweep

__all__ = ["Point", "SweepError", "load_grid", "grid_from_mapping", "parse_shard", "shard_points", "KINDS",
           "PointKind", "register_kind", "run_point", "run_sweep"]
