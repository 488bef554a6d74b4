"""Shared test setup."""

import pytest


@pytest.fixture(autouse=True)
def _tables_at_natural_width(monkeypatch):
    """The CLI fits tables to ``COLUMNS`` when it is set, and pytest-xdist workers set it to 80; captured
    output is not a terminal, so without it tables print whole and tests can look for a cell's text."""
    monkeypatch.delenv("COLUMNS", raising=False)
