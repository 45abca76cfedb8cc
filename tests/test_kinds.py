"""Every sweep kind is one folder under sweepd/kinds/, found through the registry: its spec,
planner, report, plot and demo live in that folder, and `sweepd demo --kind K` runs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sweepd.kinds
from sweepd.kinds.api import NodeFaults
from sweepd.kinds.registry import (
    Budget,
    ClientHooks,
    Kind,
    Report,
    Stops,
    Workspace,
    kinds,
    no_facts,
)
from sweepd.kinds.spec import SweepSpec
from tests.support.service import DEMO_EXPECTS

KINDS_DIR = Path(sweepd.kinds.__file__).parent


def _folder(kind: Kind) -> str:
    return f"sweepd.kinds.{kind.spec.__module__.split('.')[2]}."


def test_every_kind_folder_with_a_kind_module_is_found_and_no_other() -> None:
    with_kind = {p.parent.name for p in KINDS_DIR.glob("*/kind.py")}
    found = {k.spec.__module__.split(".")[2] for k in kinds().values()}
    assert found == with_kind
    assert {"model-perf", "node-perf", "network", "model-sweep", "xla-tuning"} <= set(kinds())


@pytest.mark.parametrize("name", sorted(kinds()))
def test_a_kind_keeps_its_spec_planner_report_plot_and_demo_in_its_folder(name: str) -> None:
    kind = kinds()[name]
    folder = _folder(kind)
    assert issubclass(kind.spec, SweepSpec)
    assert kind.spec.model_fields["kind"].annotation is not None
    for part in (kind.spec, kind.plan, kind.report.table, kind.report.rows, kind.plot):
        assert part is not None and part.__module__.startswith(folder), (name, part)
    assert kind.demo is not None, f"{name} has no demo"
    assert kind.demo.scenario.is_file()
    assert str(kind.demo.scenario).startswith(str(KINDS_DIR / folder.split(".")[2]))
    assert any(spec["kind"] == name for spec in kind.demo.specs)


def test_the_demo_test_covers_every_kind() -> None:
    """`sweepd demo --kind K` is run for every K (tests/test_demo.py): a new kind must add
    what its demo proves there."""
    assert set(DEMO_EXPECTS) == set(kinds())


# Every kind folder has the same shape: what the registry reads (`kind.py`), the spec, the
# planner, the report and chart, the demo and its scenario.
SHAPE = ("kind.py", "spec.py", "plan.py", "report.py", "plot.py", "demo.py", "demo.yaml")


@pytest.mark.parametrize("name", sorted(kinds()))
def test_every_kind_folder_has_the_same_files_and_the_kind_takes_its_parts_from_them(
        name: str) -> None:
    kind = kinds()[name]
    folder = _folder(kind)
    assert [f for f in SHAPE if not (KINDS_DIR / folder.split(".")[2] / f).is_file()] == []
    assert kind.spec.__module__ == f"{folder}spec"
    # The planner is plan.py's, or a planner beside it that plan.py's search feeds
    # (model perf's two-parameter `plan_two`).
    assert kind.plan.__module__.startswith(f"{folder}plan"), kind.plan.__module__
    assert {kind.report.table.__module__, kind.report.rows.__module__} == {f"{folder}report"}


def test_the_node_fault_policy_is_one_choice_each_kind_makes() -> None:
    """Multi-node sweeps exclude a faulty node, per-node sweeps record it as the node's own
    result, a frozen nodelist stops; the engine's two facts follow from the one policy."""
    policy = {name: kind.node_faults for name, kind in kinds().items()}
    assert policy == {"model-perf": NodeFaults.EXCLUDE, "model-sweep": NodeFaults.EXCLUDE,
                      "network": NodeFaults.RECORD, "node-perf": NodeFaults.RECORD,
                      "xla-tuning": NodeFaults.STOP, "campaign": NodeFaults.STOP} | {
        n: p for n, p in policy.items()
        if n not in ("model-perf", "model-sweep", "network", "node-perf", "xla-tuning")}
    facts = {name: (k.exclude_on_fault, k.frozen_nodes) for name, k in kinds().items()}
    assert facts["model-perf"] == (True, False)
    assert facts["node-perf"] == facts["network"] == (False, False)
    assert facts["xla-tuning"] == (True, True)   # as the two flags were before the policy


# The Kind record: what every kind must give, and its optional hooks in a few groups, each
# read by one part of sweepd (progress, the engine's stops, its submit and end, the CLI's
# report), with the node-fault policy one choice. A hook outside them is a new field here.
REQUIRED = ("name", "spec", "plan", "report", "gather")
GROUPS: dict[str, type] = {"node_faults": NodeFaults, "budget": Budget, "stops": Stops,
                           "workspace": Workspace, "client": ClientHooks}
SINGLE_HOOKS = ("preflight", "plot", "demo", "job_facts")


def test_the_kind_record_is_its_required_parts_and_groups_of_optional_hooks() -> None:
    fields = dataclasses.fields(Kind)
    required = [f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert required == list(REQUIRED)
    assert {f.name for f in fields if f.name not in REQUIRED} == {*GROUPS, *SINGLE_HOOKS}
    # Each group is small: a few hooks read together (a budget's `unbounded` is its words
    # for why it has no bound, no hook).
    assert all(len([f for f in dataclasses.fields(g) if f.name != "unbounded"]) <= 3
               for g in GROUPS.values() if dataclasses.is_dataclass(g))


def _hooks(group: Any) -> list[Callable[..., Any]]:
    return [v for f in dataclasses.fields(group) if callable(v := getattr(group, f.name))]


@pytest.mark.parametrize("name", sorted(kinds()))
def test_each_kind_gives_the_required_parts_and_its_hooks_in_their_groups(name: str) -> None:
    kind = kinds()[name]
    folder = _folder(kind)
    assert kind.name == name and isinstance(kind.report, Report)
    assert callable(kind.plan) and callable(kind.report.table) and callable(kind.report.rows)
    assert kind.gather is no_facts or kind.gather.__module__.startswith(folder), kind.gather
    for group, record in GROUPS.items():
        value = getattr(kind, group)
        assert isinstance(value, record), (name, group, value)
        if dataclasses.is_dataclass(value):
            # A group's hooks are the kind's own, from its folder.
            assert [h for h in _hooks(value) if not h.__module__.startswith(folder)] == []


def test_the_groups_hold_what_each_kind_set_before_the_record_was_grouped() -> None:
    """The kinds' hooks moved into the groups unchanged: the budgets, the stops, the
    checkouts and the client actions are where the readers now look for them."""
    k = kinds()
    # xla-tuning's: the spec's max_runs, when it sets one.
    assert [n for n in sorted(k) if k[n].budget.runs is not None] == [
        "model-perf", "model-sweep", "node-perf", "xla-tuning"]
    assert [n for n in sorted(k) if k[n].budget.node_runs is not None] == [
        "model-sweep", "node-perf"]
    assert {n: k[n].stops.on_config_error for n in k} == {
        "campaign": True, "model-perf": True, "model-sweep": False, "network": True,
        "node-perf": True, "xla-tuning": False}
    assert [n for n in sorted(k) if k[n].stops.state or k[n].stops.files] == [
        "campaign", "xla-tuning"]
    assert [n for n in sorted(k) if k[n].workspace.workdir or k[n].workspace.release] == [
        "model-sweep"]
    assert [n for n in sorted(k) if not k[n].report.one_model] == ["model-sweep"]
    # campaign: each stage's pre-flight before its first job.
    assert [n for n in sorted(k) if k[n].preflight] == ["campaign", "xla-tuning"]
    assert {n: k[n].client.flags for n in k if k[n].client.flags} == {
        "model-perf": frozenset({"apply"}), "xla-tuning": frozenset({"apply", "tuning_md"}),
        "campaign": frozenset({"apply", "tuning_md"})}
