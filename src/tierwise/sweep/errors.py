"""The sweep's error type, in a module of its own so that every sweep module can raise it without importing
another (``grid`` and ``kinds`` use each other's work; neither imports the other for the error)."""

from __future__ import annotations

from tierwise.errors import TierwiseError

__all__ = ["SweepError"]


class SweepError(TierwiseError, ValueError):
    """A bad grid, shard or results directory."""
