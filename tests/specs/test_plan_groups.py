"""The grouped plan (issue 27 "plan/ grouped"): each flat key is declared once, in one group; the flat API
(``Plan.of``, ``plan.replace``, read-only flat attributes, ``as_dict``, ``PlanBatch`` columns) is generated
from the groups."""

import dataclasses
import random

import numpy as np
import pytest

from tierwise.errors import TierwiseError
from tierwise.specs import plan as plan_mod
from tierwise.specs.plan import Plan, PlanBatch
from tierwise.specs.plan_groups import BOOL_FIELDS, CODE_FIELDS, FLAT_GROUP, GROUPS, INT_FIELDS
from tierwise.specs.plan_mapping import plan_from_mapping

_DERIVED = {"middle_stage_layers", "layout_explicit", "embedding_in_split", "loss_in_split"}
"""Fields the plan file does not name: set from its ``pipeline_layout`` / ``account_for_*`` keys."""
_FILE_ONLY = {"pipeline_layout", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
              "torch_version"}


def _group_fields() -> list[tuple[str, str]]:
    return [(g, f.name) for g, cls in GROUPS.items() for f in dataclasses.fields(cls)]


def test_each_flat_key_lands_in_exactly_one_group():
    names = [name for _, name in _group_fields()]
    assert len(names) == len(set(names)), "a field is declared in two groups"
    assert set(FLAT_GROUP) == set(names)
    assert [f.name for f in dataclasses.fields(Plan)] == [*GROUPS, "framework", "assumed", "inferred"]
    for group, name in _group_fields():
        assert FLAT_GROUP[name] == group
        plan = Plan.of(**{name: _other_value(name)})
        changed = [g for g in GROUPS if getattr(plan, g) != getattr(Plan(), g)]
        assert changed == [group], (name, changed)


def _other_value(name: str):
    default = getattr(Plan(), name)
    if name in CODE_FIELDS:
        return next(c for c in CODE_FIELDS[name] if c != default)
    if name in BOOL_FIELDS:
        return not default
    return default + 3


def test_kind_tables_partition_the_fields():
    names = {name for _, name in _group_fields()}
    kinds = [set(INT_FIELDS), set(BOOL_FIELDS), set(CODE_FIELDS)]
    assert set.union(*kinds) == names
    assert sum(len(k) for k in kinds) == len(names)
    assert {"tp", "dp_shard", "seq_length", "zero_stage", "moe_node_limit"} <= set(INT_FIELDS)
    assert CODE_FIELDS["recompute"] == plan_mod.RECOMPUTE and CODE_FIELDS["order"] == plan_mod.ORDERS


def test_plan_batch_columns_are_the_union_of_group_fields():
    columns = [f.name for f in dataclasses.fields(PlanBatch)]
    assert columns == [name for _, name in _group_fields()]
    b = PlanBatch.from_plans([Plan(), Plan.of(tp=4, recompute="full", schedule="interleaved", vpp=2)])
    for name in columns:
        col = getattr(b, name)
        want = np.int8 if name in CODE_FIELDS else np.bool_ if name in BOOL_FIELDS else np.int64
        assert col.dtype == want and col.shape == (2,), name
    assert b.plan(1) == Plan.of(tp=4, recompute="full", schedule="interleaved", vpp=2)
    assert dataclasses.fields(PlanBatch.from_arrays(tp=[1, 2])) == dataclasses.fields(PlanBatch)


def test_plan_file_keys_are_the_fields_it_states():
    assert set(plan_mod._KEYS) == (set(FLAT_GROUP) - _DERIVED) | _FILE_ONLY
    assert len(plan_mod._KEYS) == len(set(plan_mod._KEYS))


def test_as_dict_names_every_field_once_and_round_trips():
    plan = Plan.of(tp=8, dp=2, activation_offload_layers=3, framework="megatron")
    out = plan.as_dict()
    assert list(out) == [*plan_mod._DOCUMENT_ORDER, "framework"]
    assert sorted(plan_mod._DOCUMENT_ORDER) == sorted(FLAT_GROUP)
    assert Plan.of(**out) == plan
    assert "activation_offload_layers" not in Plan.of(tp=8).as_dict()  # the off switch stays out of documents


def test_random_mappings_round_trip_through_plan_of():
    """Plans read from random mappings: ``Plan.of(**as_dict)`` gives the same plan, ``PlanBatch`` holds it."""
    rng = random.Random(27)
    seen = 0
    for _ in range(300):
        data = {"global_batch_size": rng.choice([64, 256]), "seq_length": rng.choice([2048, 4096]),
                "tp": rng.choice([1, 2, 8]), "pp": rng.choice([1, 2]), "recompute": rng.choice(plan_mod.RECOMPUTE),
                "zero_stage": rng.choice([0, 1, 2, 3]), "precision": rng.choice(plan_mod.PRECISION),
                "fused_cross_entropy": rng.random() < 0.5}
        if rng.random() < 0.3:
            data["framework"] = rng.choice(["megatron", "torchtitan", "deepspeed"])
        try:
            plan = plan_from_mapping(data, num_gpus=rng.choice([16, 64]), num_layers=32, generation="hopper")
        except TierwiseError:
            continue
        seen += 1
        again = Plan.of(**plan.as_dict(), assumed=plan.assumed, inferred=plan.inferred)
        assert again == plan
        back = PlanBatch.from_plans([plan]).plan(0)  # a batch holds the groups, not framework / notes
        assert all(getattr(back, g) == getattr(plan, g) for g in GROUPS)
    assert seen > 100


def test_flat_aliases_read_the_groups_and_cannot_be_set():
    plan = Plan.of(tp=8, pp=2, dp=4, recompute="full", order="tp-dp-cp-pp", global_batch_size=64)
    assert (plan.tp, plan.degrees.tp) == (8, 8)
    assert plan.recompute == plan.memory.recompute == "full"
    assert plan.order == plan.layout.order == "tp-dp-cp-pp"
    assert plan.num_gpus == plan.degrees.num_gpus == 64
    assert plan.num_microbatches == 16
    for name in ("tp", "recompute", "order", "degrees"):
        with pytest.raises(AttributeError):
            setattr(plan, name, getattr(plan, name))
    with pytest.raises(AttributeError):
        plan.degrees.tp = 2


def test_of_and_replace_refuse_unknown_keys_by_name():
    with pytest.raises(TypeError, match="'tensor_parallel'"):
        Plan.of(tensor_parallel=8)
    with pytest.raises(TypeError, match="'bogus'"):
        Plan().replace(bogus=1)


def test_replace_changes_only_what_it_names():
    plan = Plan.of(tp=8, dp=4, recompute="full", framework="megatron", assumed=("x",))
    changed = plan.replace(recompute="none", dp=2)
    assert (changed.recompute, changed.dp, changed.tp, changed.framework, changed.assumed) == (
        "none", 2, 8, "megatron", ("x",))
    assert plan.recompute == "full"  # the original is untouched
    assert changed.software is plan.software and changed.layout is plan.layout
    assert plan.replace(degrees=plan.degrees.__class__(tp=2)).tp == 2
