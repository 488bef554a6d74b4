"""Every test here brings a testbed up (network namespaces, veth, tc): all of them are skipped, with the reason,
where the process lacks the privileges or tools (``net.require_privileges``)."""

from __future__ import annotations

import pytest

from tierwise.testbed import net
from tierwise.testbed.spec import TestbedError


def _why_not() -> str | None:
    try:
        net.require_privileges()
    except TestbedError as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    why = _why_not()
    if why is None:
        return
    for item in items:
        if "testbed_tests" in str(item.path):
            item.add_marker(pytest.mark.skip(reason=why))
