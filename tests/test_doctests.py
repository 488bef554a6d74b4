"""Every docstring example in src/tierwise runs (issue 13, part 6: doctests run in CI with the unit suite)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tierwise


def _modules_with_examples() -> list[str]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    names = ["tierwise"] + [m.name for m in pkgutil.walk_packages(tierwise.__path__, "tierwise.")
                            if m.name != "tierwise.__main__"]
    return [n for n in names if any(t.examples for t in finder.find(importlib.import_module(n)))]


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    assert {"tierwise", "tierwise.hierarchy", "tierwise.collectives.fitted", "tierwise.workload.traffic"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
