"""Run every hostile-input case through the installed entry point (see ``corpus/harness.py``).

Run: ``python -m pytest corpus -q -n 2`` (its own step of ``.ci/run``, outside the unit suite).
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from corpus import cases as _cases_pkg
from corpus.harness import Case, run_case


def _all_cases() -> list[Case]:
    out: list[Case] = []
    for info in sorted(pkgutil.iter_modules(_cases_pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"corpus.cases.{info.name}")
        out.extend(module.CASES)
    return out


CASES = _all_cases()


def test_ids_unique():
    ids = [c.id for c in CASES]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, dupes


def test_corpus_is_large_enough():
    assert len(CASES) >= 300, f"only {len(CASES)} hostile cases; issue 12 asks for at least 300"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, tmp_path):
    run_case(case, tmp_path)
