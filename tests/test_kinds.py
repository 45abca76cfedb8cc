"""Every sweep kind is one folder under sweepd/kinds/, found through the registry: its spec,
planner, report, plot and demo live in that folder, and `sweepd demo --kind K` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

import sweepd.kinds
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
