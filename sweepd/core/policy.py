"""Retry, node-exclusion, bail-out and stop rules as pure functions over recorded facts.

Each decision names the rule that fired (`Action.rule`) so `sweepd explain` can show it.
Numbers come from PolicyConfig (defaults: the SKILL.md's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from sweepd.config import PolicyConfig
from sweepd.monitor.classify_tables import PREEMPTED
from sweepd.monitor.facts import FailureClass as F
from sweepd.monitor.facts import Verdict


class Act(StrEnum):
    ACCEPT = "accept"    # the run passed
    RECORD = "record"    # the run's result is this failure; no retry
    RETRY = "retry"      # another attempt (after `delay_s`, without `exclude`)
    STOP = "stop"        # the sweep waits for a person


@dataclass(frozen=True)
class Action:
    act: Act
    rule: str
    reason: str
    outcome: str = "fail"       # pass | oom | fail | hang | cancelled
    exclude: str | None = None
    delay_s: float = 0.0


@dataclass(frozen=True)
class SweepFacts:
    pinned: Sequence[str]
    excluded: Sequence[str]     # by faults: these count toward the exclusion limit
    min_nodes: int
    # Verdicts of earlier failed attempts across the sweep, oldest first.
    history: Sequence[Verdict] = ()
    # False for sweeps that judge nodes one by one: the fault is that node's result.
    exclude_on_fault: bool = True
    # False for sweeps where a config error is one run's result, not the whole sweep's.
    config_stops: bool = True
    # Nodes a person excluded: out of use, but no sign that the cluster is unhealthy.
    by_person: Sequence[str] = ()
    # Every other job the sweep had running was cancelled outside sweepd as well.
    others_cancelled: bool = False
    # True for sweeps whose results compare only on the same nodes: a node fault stops.
    frozen_nodes: bool = False


@dataclass(frozen=True)
class OutsideCancel:
    """A job that a cancel outside sweepd ended (scancel, preemption), and how far its
    measurement had got: `window` the steps it is measured on (first, last), `measured`
    True when every one of them was printed before the cancel."""

    what: str                  # "cancelled outside sweepd" | "preempted"
    last_step: int | None
    window: tuple[int, int] | None
    measured: bool


@dataclass(frozen=True)
class Case:
    verdict: Verdict
    prior: Sequence[Verdict]      # earlier attempts of the same run, oldest first
    sweep: SweepFacts
    limits: PolicyConfig
    # A NIC fault's reset (core/node_evidence): True every port came back Active, False
    # not, None no reset was made (not allowed, or a job ran on the node).
    nic_reset: bool | None = None
    # The job was ended by a cancel outside sweepd (None: it was not).
    cancel: OutsideCancel | None = None


Rule = Callable[[Case], Action]


def _failed_before(case: Case) -> int:
    """Earlier attempts that failed: a cancelled one did not fail, it was stopped."""
    return sum(1 for p in case.prior if p.klass != F.CANCELLED)


def _retry_or_record(case: Case, rule: str, what: str, outcome: str = "fail") -> Action:
    failed = _failed_before(case)
    if failed >= case.limits.max_retries:
        return Action(Act.RECORD, "retries.max",
                      f"{what}; {failed + 1} attempts failed, max "
                      f"{case.limits.max_retries} retries per job", outcome)
    return Action(Act.RETRY, rule, f"{what}; retry {failed + 1} of "
                  f"{case.limits.max_retries}")


def _nodes(n: int) -> str:
    return f"{n} node{'' if n == 1 else 's'}"


def _consecutive(history: Sequence[Verdict], klass: F) -> int:
    n = 0
    for v in reversed(history):
        if v.klass != klass:
            break
        n += 1
    return n


def _oom(case: Case) -> Action:
    size = f" ({case.verdict.detail})" if case.verdict.detail else ""
    # The OOM line's own word for the memory: a TPU's says HBM (`Ran out of memory on HBM`).
    what = "HBM" if "hbm" in (case.verdict.evidence or "").lower() else "GPU"
    return Action(Act.RECORD, "oom.never_retry", f"{what} out of memory{size}: deterministic, "
                  "never retried at the same value", "oom")


def _node_fault(case: Case) -> Action:
    v, s = case.verdict, case.sweep
    node = v.node
    if s.frozen_nodes:
        return Action(Act.STOP, "fault.frozen_nodelist",
                      f"{v.klass}{f' on {node}' if node else ''}: this sweep's nodelist is "
                      "frozen; a node is never excluded or substituted")
    if not s.exclude_on_fault:
        return Action(Act.RECORD, "fault.node_unhealthy",
                      f"{v.klass}{f' on {node}' if node else ''}: the node is unhealthy")
    if node is None:
        return _retry_or_record(case, "fault.retry", f"{v.klass} on an unknown node")
    # A node the person already judged faulty and excluded is no second node: its error
    # was that node's, so it does not make this one a config issue.
    same_elsewhere = [p for p in s.history if p.klass == v.klass
                      and p.node not in (None, node, *s.by_person)]
    if same_elsewhere:
        return Action(Act.STOP, "fault.same_error_other_nodes",
                      f"{v.klass} on {node} after the same error on {same_elsewhere[-1].node}: "
                      "a config issue, not a node issue")
    if len(s.excluded) + 1 > case.limits.max_exclusions:
        return Action(Act.STOP, "exclusions.max",
                      f"{v.klass} on {node}: exclusion {len(s.excluded) + 1}, over the limit "
                      f"of {case.limits.max_exclusions} per sweep: the cluster is unhealthy",
                      exclude=node)
    out = {*s.excluded, *s.by_person, node}
    remaining = [n for n in s.pinned if n not in out]
    if len(remaining) < s.min_nodes:
        return Action(Act.STOP, "nodes.below_minimum",
                      f"excluding {node} leaves {_nodes(len(remaining))}; the sweep's "
                      f"min_nodes is {s.min_nodes}", exclude=node)
    if _failed_before(case) >= case.limits.max_retries:
        return Action(Act.RECORD, "retries.max", f"{v.klass} on {node}; retries exhausted",
                      exclude=node)
    return Action(Act.RETRY, "fault.exclude_node",
                  f"{v.klass} on {node}: exclude it and retry on the remaining "
                  f"{len(remaining)} nodes", exclude=node)


def _nic(case: Case) -> Action:
    """A NIC fault: retried as any transient; after a NIC reset, the node is used again
    only if every port came back Active, else it is a node fault (excluded, or a stop)."""
    node = case.verdict.node
    if case.nic_reset is None or node is None:
        return _retry_or_record(case, "nic.retry", "nic")
    if case.nic_reset:
        return _retry_or_record(case, "nic.reset_active", f"nic on {node}: after a NIC reset "
                                "every port is Active again; run again on the same nodes")
    action = _node_fault(case)
    return replace(action, reason=f"{action.reason} (its NIC did not come back Active "
                   "after a reset)")


def queued_node_fault(dead: Sequence[str], s: SweepFacts,
                      limits: PolicyConfig) -> tuple[Action, tuple[str, ...]]:
    """A queued job waits for pinned nodes the scheduler lists as down or drained (its
    reason says so, sinfo confirms): (the action, the nodes to exclude). As `_node_fault`
    for the sweep's kind, but the job never ran: no retry is used, and a node that is
    already out is not counted again."""
    named = ", ".join(dead)
    if s.frozen_nodes or not s.exclude_on_fault:
        why = ("this sweep's nodelist is frozen" if s.frozen_nodes
               else "this sweep judges nodes one by one")
        return Action(Act.STOP, "node.unusable", f"queued for {named}, which the scheduler "
                      f"cannot use: {why}; a node is never excluded or substituted"), ()
    new = tuple(n for n in dead if n not in {*s.excluded, *s.by_person})
    if len(s.excluded) + len(new) > limits.max_exclusions:
        return Action(Act.STOP, "exclusions.max",
                      f"queued for {named}, not usable: exclusion {len(s.excluded) + len(new)}"
                      f", over the limit of {limits.max_exclusions} per sweep: the cluster is "
                      "unhealthy"), new
    remaining = [n for n in s.pinned if n not in {*s.excluded, *s.by_person, *new}]
    if len(remaining) < s.min_nodes:
        return Action(Act.STOP, "nodes.below_minimum",
                      f"queued for {named}, not usable: excluding it leaves "
                      f"{_nodes(len(remaining))}; the sweep's min_nodes is {s.min_nodes}"), new
    return Action(Act.RETRY, "queued.exclude_node",
                  f"queued for {named}, which the scheduler cannot use: exclude it and "
                  f"submit again on the remaining {len(remaining)} nodes", "cancelled"), new


def _hang(case: Case) -> Action:
    """batch-sweep hang rules: before Memstats or after step 0, retry once. A hang between
    Memstats and step 0 is classified as a silent OOM and never reaches here, unless the
    compiled-memory line said the program fits: then it is retried once too, and the
    classifier's detail (which says why this departs from the seed) is the reason."""
    detail = case.verdict.detail or ""
    where = ("before Memstats (transient RCCL/IB init)" if case.verdict.klass == F.RCCL_FLAKE
             else detail.removeprefix("hang ") if "compiled-memory line" in detail
             else "after step 0 (RCCL error mid-training)")
    if any(p.klass in (F.HANG, F.RCCL_FLAKE) for p in case.prior):
        return Action(Act.RECORD, "hang.retried_still_hangs",
                      f"hung {where} again after one retry: marked failed", "hang")
    return Action(Act.RETRY, "hang.retry_once", f"hung {where}: retry once")


def _coord(case: Case) -> Action:
    n = _consecutive([*case.sweep.history, case.verdict], F.COORD_TIMEOUT)
    if n >= case.limits.coord_timeout_limit:
        return Action(Act.STOP, "coord.consecutive",
                      f"{n} consecutive coordination timeouts: stop")
    return _retry_or_record(case, "coord.retry", "JAX coordination timeout")


# How much of the failing line a reason quotes (MaxText's refusal of an override names
# every field of its config: thousands of characters).
QUOTE_CHARS = 240


def quoted(line: str | None) -> str:
    """The line that proved a failure, as a reason quotes it: ` — "…"`, or nothing."""
    if not line:
        return ""
    text = " ".join(line.split())
    if len(text) > QUOTE_CHARS:
        text = text[:QUOTE_CHARS - 1] + "\u2026"
    return f' \u2014 "{text}"'


def _config(case: Case) -> Action:
    line = quoted(case.verdict.evidence)
    if not case.sweep.config_stops:
        return Action(Act.RECORD, "config.run_failed", f"{case.verdict.klass}: this run's "
                      f"config fails on every node{line}; recorded as its result")
    return Action(Act.STOP, "config.stop", f"{case.verdict.klass}: every node fails the same "
                  f"way{line}; fix the config before continuing")


def _environment(case: Case) -> Action:
    """The trainer cannot start (an import, a missing script or file, a syntax error, a
    command not found): every value would fail alike, in every kind, so the sweep stops
    after this one job; a retry would meet it again, and a recorded failure would read as
    the value's (a model-perf search would bisect toward it)."""
    v = case.verdict
    what = f" ({v.detail})" if v.detail else ""
    return Action(Act.STOP, "environment.stop",
                  f"the trainer cannot start{quoted(v.evidence)}{what}: the same at every "
                  "value, so never retried; fix the environment or the train command, then "
                  "resume")


def _checkout(case: Case) -> Action:
    return Action(Act.RETRY, "checkout.retry_hourly", "checkout outage (HTTP 5xx): global, keep "
                  "retrying without a cap", delay_s=case.limits.checkout_retry_s)


def _service(case: Case) -> Action:
    """An image pull or the scheduler's controller failing says nothing about the value,
    the node, the link or the model: once retries are used up the sweep asks a person
    (recorded, it would read as the run's result: a node called slow, a link degraded, a
    model failed)."""
    what = {F.PULL: "the container image could not be pulled",
            F.CONTROLLER_DOWN: "the Slurm controller refused the job"}.get(
        case.verdict.klass or F.PULL, str(case.verdict.klass))
    failed = _failed_before(case)
    if failed >= case.limits.max_retries:
        return Action(Act.STOP, "service.retries_exhausted",
                      f"{what} on {failed + 1} attempts: a cluster service fails, not this "
                      "run; resume when it is fixed")
    return Action(Act.RETRY, f"{case.verdict.klass}.retry",
                  f"{what}; retry {failed + 1} of {case.limits.max_retries}")


def _cancelled(case: Case) -> Action:
    """A cancel outside sweepd (scancel, preemption) says nothing about the run's value or
    node: the run goes again. A person who cancelled everything, or this run twice, is
    asked instead: resume runs it again, abort ends the sweep."""
    what = PREEMPTED if case.verdict.detail == PREEMPTED else "cancelled outside sweepd"
    if case.sweep.others_cancelled:
        return Action(Act.STOP, "cancelled.whole_sweep",
                      f"{what}, as was every other running job of the sweep: "
                      "resume runs them again, abort ends the sweep")
    if any(p.klass == F.CANCELLED for p in case.prior):
        return Action(Act.STOP, "cancelled.again",
                      f"{what}, a second time for this run: resume runs it again, abort "
                      "ends the sweep")
    return Action(Act.RETRY, "cancelled.rerun",
                  f"{what}: says nothing about the run's value; run again", "cancelled")


def _cancelled_measured(case: Case, cancel: OutsideCancel) -> Action:
    """A cancel outside sweepd after every step the run is measured on was printed: the
    cancel cut only the job's end (its teardown, its summary), so the measurement stands.
    The job is no success: the rule and its reason say it was cancelled, and why its
    number is kept (the seed's "exit 143 after the last step" row, for a person's cancel)."""
    steps = f"steps {cancel.window[0]}-{cancel.window[1]}" if cancel.window else "its steps"
    return Action(Act.ACCEPT, "cancelled.measured",
                  f"{cancel.what} after step {cancel.last_step}: its steady window ({steps}) "
                  "was complete before the cancel, so its measurement stands", "pass")


def _log_lost(case: Case) -> Action:
    return _retry_or_record(case, "log.lost_rerun", "the job completed but its log could "
                            "not be read, so it was not measured; run again")


def _unknown(case: Case) -> Action:
    return _retry_or_record(case, "unknown.retry_bounded",
                            "unrecognised failure (see the log tail)")


RULES: dict[F, Rule] = {
    F.OOM: _oom,
    F.GPU_HARDWARE: _node_fault,
    F.ECC: _node_fault,
    F.NODE_CRASH: _node_fault,
    F.NIC: _nic,
    F.HANG: _hang,
    F.RCCL_FLAKE: _hang,
    F.COORD_TIMEOUT: _coord,
    F.CONFIG: _config,
    F.UNKNOWN_FLAG: _config,
    F.ENVIRONMENT: _environment,
    F.CHECKOUT_OUTAGE: _checkout,
    F.PULL: _service,
    F.CONTROLLER_DOWN: _service,
    F.CANCELLED: _cancelled,
    F.LOG_LOST: _log_lost,
    F.UNKNOWN: _unknown,
}


def decide(case: Case) -> Action:
    klass = case.verdict.klass
    cancel = case.cancel
    if cancel is not None and klass in (None, F.CANCELLED):
        # A cancelled job is never a success: its measurement stands by its own rule, or
        # it is a cancel as any other.
        return _cancelled_measured(case, cancel) if cancel.measured else _cancelled(case)
    if klass is None:
        return Action(Act.ACCEPT, "success", "completed", "pass")
    rule = RULES.get(klass)
    if rule is not None:
        return rule(case)
    return _retry_or_record(case, f"{klass}.retry", f"{klass}")
