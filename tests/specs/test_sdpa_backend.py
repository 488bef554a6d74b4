"""`attention_kernel: sdpa` with a plan's `torch_version`: the backend torch picks per release and generation
(compute.yaml sdpa_backends, issue 29), listed under `assumed`; bad versions are one-line errors."""

import pytest

from tierwise.errors import SpecError
from tierwise.specs.compute import sdpa_backend
from tierwise.specs.plan_mapping import plan_from_mapping


@pytest.mark.parametrize("version, generation, family", [
    ("2.4.1", "hopper", "sdpa"),  # FlashAttention-2 first
    ("2.5.0", "hopper", "cudnn"),  # the 2.5 release: cuDNN by default on H100 and newer
    ("2.5.0", "ampere", "sdpa"),
    ("2.5.1", "hopper", "sdpa"),  # cuDNN made opt-in (pytorch#138522, cherry-picked into 2.5.1)
    ("2.10.0+cu128", "blackwell", "sdpa"),
    ("2.11.0", "hopper", "cudnn"),  # bundled cuDNN past 9.15: cuDNN first on sm90 / sm100
    ("2.13", "blackwell", "cudnn"),
    ("2.13", "ampere", "sdpa"),
])
def test_sdpa_backend_by_release_and_generation(version, generation, family):
    assert sdpa_backend(generation, version)[0] == family


def test_without_a_version_sdpa_is_the_flash_backend():
    family, why = sdpa_backend("hopper")
    assert family == "sdpa" and "2.5.1-2.10.x" in why


def _plan(**extra):
    return plan_from_mapping({"global_batch_size": 64, "seq_length": 4096, "attention_kernel": "sdpa", **extra},
                             num_gpus=8, generation="hopper")


def test_plan_resolves_sdpa_under_its_torch_version_and_says_so():
    plan = _plan(torch_version="2.11.0")
    assert plan.attention_kernel == "cudnn"
    assert any(a.startswith("attention_kernel=sdpa runs cudnn (torch 2.11.0 and later on hopper") for a in plan.assumed)
    assert _plan(torch_version="2.6.0").attention_kernel == "sdpa"
    assert _plan().attention_kernel == "sdpa"
    kept = plan_from_mapping({"global_batch_size": 64, "seq_length": 4096, "attention_kernel": "flash2",
                              "torch_version": "2.11.0"}, num_gpus=8, generation="hopper")
    assert kept.attention_kernel == "flash2"  # a named kernel is what runs


@pytest.mark.parametrize("version, needle", [(2.1, "quoted"), ("1.13", "no torch release before 2.0.0"),
                                             ("latest", "not a torch release")])
def test_bad_torch_versions_are_one_line(version, needle):
    with pytest.raises(SpecError, match=needle):
        _plan(torch_version=version)
