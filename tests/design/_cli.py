"""The in-process CLI runner the design tests share."""

import json

from typer.testing import CliRunner

from tierwise.cli import app

runner = CliRunner()


def cli_json(args):
    """The ``--json`` document of ``tierwise ARGS`` run in-process, asserting exit status 0."""
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)
