"""Pure: which pending reasons say a queued job's nodes are unavailable (not merely busy),
and what the policy does for each kind of sweep."""

from __future__ import annotations

import pytest

from sweepd.clusters.base import JobStatus, SchedulerState
from sweepd.clusters.slurm import parse_scontrol_job, parse_squeue_poll
from sweepd.config import PolicyConfig
from sweepd.core.policy import Act, SweepFacts, queued_node_fault
from sweepd.core.queued_check import nodes_unavailable

PENDING = SchedulerState.PENDING


@pytest.mark.parametrize("reason", [
    "ReqNodeNotAvail, UnavailableNodes:chi2881",
    "ReqNodeNotAvail,_UnavailableNodes:chi2881",   # scontrol's form
    "ReqNodeNotAvail",
    "NodeDown",
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority "
    "partitions",
    "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_"
    "partitions",
])
def test_unavailable_reasons(reason: str) -> None:
    assert nodes_unavailable(JobStatus(PENDING, reason=reason))


@pytest.mark.parametrize("reason", [
    "Resources", "Priority", "Dependency", "BeginTime", "JobHeldUser", "QOSMaxJobsPerUserLimit",
    None, "",
])
def test_busy_or_other_reasons_never_count(reason: str | None) -> None:
    assert not nodes_unavailable(JobStatus(PENDING, reason=reason))


def test_only_a_pending_job_counts() -> None:
    reason = "ReqNodeNotAvail, UnavailableNodes:chi2881"
    assert not nodes_unavailable(JobStatus(SchedulerState.RUNNING, reason=reason))
    assert not nodes_unavailable(None)


def test_the_poll_reads_the_reason_from_squeue_and_scontrol() -> None:
    polled = parse_squeue_poll("3|PENDING|0|ReqNodeNotAvail, UnavailableNodes:chi2881\n")
    assert nodes_unavailable(polled["3"])
    shown = parse_scontrol_job("JobId=3 JobState=PENDING Reason=ReqNodeNotAvail,"
                               "_UnavailableNodes:chi2881 Dependency=(null) ExitCode=0:0")
    assert shown is not None and nodes_unavailable(shown)
    assert not nodes_unavailable(parse_squeue_poll("4|PENDING|0|Resources\n")["4"])


PINNED = ["n1", "n2", "n3", "n4"]


def _facts(**kw: object) -> SweepFacts:
    return SweepFacts(**{"pinned": PINNED, "excluded": [], "min_nodes": 2, **kw})  # type: ignore[arg-type]


def test_an_excluding_kind_excludes_and_resubmits() -> None:
    action, out = queued_node_fault(["n2"], _facts(), PolicyConfig())
    assert (action.act, action.rule, out) == (Act.RETRY, "queued.exclude_node", ("n2",))


def test_a_node_already_excluded_is_not_counted_again() -> None:
    action, out = queued_node_fault(["n2"], _facts(excluded=["n2"]), PolicyConfig())
    assert (action.act, out) == (Act.RETRY, ())


@pytest.mark.parametrize("kw", [{"frozen_nodes": True}, {"exclude_on_fault": False}])
def test_frozen_or_one_by_one_kinds_stop(kw: dict[str, bool]) -> None:
    action, out = queued_node_fault(["n2"], _facts(**kw), PolicyConfig())
    assert (action.act, action.rule, out) == (Act.STOP, "node.unusable", ())


def test_limits_stop() -> None:
    below, _ = queued_node_fault(["n2", "n3", "n4"], _facts(), PolicyConfig(max_exclusions=8))
    assert (below.act, below.rule) == (Act.STOP, "nodes.below_minimum")
    over, _ = queued_node_fault(["n2"], _facts(excluded=["n1"]),
                                PolicyConfig(max_exclusions=1))
    assert (over.act, over.rule) == (Act.STOP, "exclusions.max")
