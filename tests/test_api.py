"""The Python API exported from ``tierwise`` (issue 13, part 5): every name resolves, lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tierwise


@pytest.mark.parametrize("name", [n for n in tierwise.__all__ if n != "__version__"])
def test_every_exported_name_resolves_to_its_module(name):
    value = getattr(tierwise, name)
    module, attr = tierwise._API[name] if isinstance(tierwise._API[name], tuple) else (tierwise._API[name], name)
    assert getattr(__import__(module, fromlist=[attr]), attr) is getattr(value, "__wrapped__", value)
    assert not isinstance(value, type(tierwise))  # a function or class, never a module of the same name


def test_import_tierwise_loads_no_model_code():
    # tierwise._version (one constant) is the only submodule the package root imports
    code = ("import sys, tierwise; print(any(m.startswith('tierwise.') and m != 'tierwise._version' "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'estimate_everything'"):
        tierwise.estimate_everything  # noqa: B018


def test_public_namespace_holds_only_the_api():
    # issue 32, item 9: the helper modules the package root uses (importlib, __future__'s annotations) are
    # not public names; dir() and __all__ list the API and nothing else
    public = {n for n in dir(tierwise) if not n.startswith("_")}
    assert public == set(tierwise.__all__) - {"__version__"}
    assert "__version__" in dir(tierwise)
    for helper in ("importlib", "annotations"):
        assert helper not in dir(tierwise)
        assert not hasattr(tierwise, helper)


def test_collective_cost_names_its_algorithm_and_protocol():
    # issue 32, item 6: names, not int8 codes, in the API; the codes stay available for vectorized use
    import numpy as np

    cluster = tierwise.load_cluster("dgx-h100")
    one = tierwise.collective_cost("all-reduce", 2**30, tierwise.group_span(cluster, 8, 1), cluster)
    assert isinstance(one.algorithm, str) and isinstance(one.protocol, str)
    from tierwise.collectives.model import ALGORITHMS, PROTOCOLS

    assert one.algorithm in ALGORITHMS and one.protocol in PROTOCOLS
    from tierwise.collectives.model import collective_cost  # the unchecked function takes arrays of sizes

    many = collective_cost("all-reduce", np.array([2.0**10, 2.0**30]), tierwise.group_span(cluster, 64, 8), cluster)
    assert many.algorithm.shape == (2,) and all(isinstance(a, str) for a in many.algorithm.tolist())
    assert [ALGORITHMS[c] for c in many.algorithm_code] == many.algorithm.tolist()
    assert [PROTOCOLS[c] for c in many.protocol_code] == many.protocol.tolist()
