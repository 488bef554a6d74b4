"""Shared test setup."""

import pytest

from tierwise.cli import main


@pytest.fixture(autouse=True)
def _tables_at_natural_width(monkeypatch):
    """The CLI fits tables to ``COLUMNS`` when it is set, and pytest-xdist workers set it to 80; captured
    output is not a terminal, so without it tables print whole and tests can look for a cell's text."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def cli_error(capsys):
    """``cli_error(args)`` runs the CLI on ``args`` and returns its error line, asserting the house rule for bad
    input: exit status 2 and exactly one line on stderr, no traceback."""

    def run(args) -> str:
        capsys.readouterr()  # what earlier calls printed is not this call's output
        rc = main(list(args))
        err = capsys.readouterr().err
        assert rc == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert "Traceback" not in err
        return lines[0]

    return run
