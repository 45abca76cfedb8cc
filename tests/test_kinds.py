"""Every sweep kind is one folder under sweepd/kinds/, found through the registry: its spec,
planner, report, plot and demo live in that folder, and `sweepd demo --kind K` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

import sweepd.kinds
from sweepd.kinds.api import NodeFaults
from sweepd.kinds.registry import Kind, kinds
from sweepd.kinds.spec import SweepSpec
from tests.test_demo import DEMO_EXPECTS

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
    for part in (kind.spec, kind.plan, kind.table, kind.rows, kind.plot):
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
    assert {kind.table.__module__, kind.rows.__module__} == {f"{folder}report"}


def test_the_node_fault_policy_is_one_choice_each_kind_makes() -> None:
    """Multi-node sweeps exclude a faulty node, per-node sweeps record it as the node's own
    result, a frozen nodelist stops; the engine's two facts follow from the one policy."""
    policy = {name: kind.node_faults for name, kind in kinds().items()}
    assert policy == {"model-perf": NodeFaults.EXCLUDE, "model-sweep": NodeFaults.EXCLUDE,
                      "network": NodeFaults.RECORD, "node-perf": NodeFaults.RECORD,
                      "xla-tuning": NodeFaults.STOP} | {
        n: p for n, p in policy.items()
        if n not in ("model-perf", "model-sweep", "network", "node-perf", "xla-tuning")}
    facts = {name: (k.exclude_on_fault, k.frozen_nodes) for name, k in kinds().items()}
    assert facts["model-perf"] == (True, False)
    assert facts["node-perf"] == facts["network"] == (False, False)
    assert facts["xla-tuning"] == (True, True)   # as the two flags were before the policy
