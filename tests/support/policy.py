"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from sweepd.config import PolicyConfig
from sweepd.core.policy import Case, SweepFacts
from sweepd.monitor.facts import FailureClass as F
from sweepd.monitor.facts import Verdict

# --- from test_policy ---

NODES = ["n1", "n2", "n3", "n4"]


LIMITS = PolicyConfig()


def case(klass: F | None, node: str | None = None, prior: tuple[Verdict, ...] = (),
         excluded: tuple[str, ...] = (), history: tuple[Verdict, ...] = (), min_nodes: int = 1,
         exclude_on_fault: bool = True, limits: PolicyConfig = LIMITS,
         by_person: tuple[str, ...] = ()) -> Case:
    return Case(Verdict(klass, node=node, evidence="line"), prior,
                SweepFacts(NODES, excluded, min_nodes, history, exclude_on_fault,
                           by_person=by_person), limits)

