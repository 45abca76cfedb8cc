"""The engine's rule book: the failure-class rules of `policy.py` (its `RULES` table maps a
class to the function that decides; the ids below are those the functions record), and the
engine's own decisions (recovery after a restart, the controller's outage, a person's word).
Their thresholds are the `[policy]` config section's (`PolicyConfig`), read from there.
tests/test_rule_registry.py holds every id the engine records to this book."""

from __future__ import annotations

from sweepd.core.policy import RULES
from sweepd.kinds.api import GENERIC_VERDICT
from sweepd.monitor.facts import FailureClass
from sweepd.util.rulebook import Rule, RuleBook, Threshold

_POLICY = "sweepd.config:PolicyConfig."
_STEADY = "sweepd.monitor.steady:"

THRESHOLDS = (
    Threshold("max_retries", _POLICY + "max_retries", "retries per run; the next failure is final"),
    Threshold("max_exclusions", _POLICY + "max_exclusions",
              "nodes excluded for faults per sweep before a stop"),
    Threshold("coord_timeout_limit", _POLICY + "coord_timeout_limit",
              "consecutive coordination timeouts that stop the sweep"),
    Threshold("checkout_retry_s", _POLICY + "checkout_retry_s",
              "retry period on a checkout outage (s)"),
    Threshold("controller_down_limit_s", _POLICY + "controller_down_limit_s",
              "how long the controller may be down before the sweep stops (s)"),
    Threshold("hang_timeout_s", _POLICY + "hang_timeout_s",
              "no new output for this long while RUNNING: hung (s)"),
    # What a passed run measures (`monitor/steady.py`): every kind compares these readings.
    Threshold("steady_first", _STEADY + "STEADY_FIRST",
              "the steady window's first step (0-4: compilation, warm-up)"),
    Threshold("steady_first_profiler", _STEADY + "STEADY_FIRST_PROFILER",
              "its first step with the profiler on (the SKILL.md: it perturbs 5-8)"),
    Threshold("steady_last", _STEADY + "STEADY_LAST", "the steady window's last step"),
    Threshold("profiler_artefact", _STEADY + "PROFILER_ARTEFACT",
              "a profiled run's window step this many times off the median of its steps 5-14 "
              "is the profiler's start or stop, left out (upstream MaxText perturbs 10-14)"),
)


def _r(rule_id: str, decides: str, *thresholds: str) -> Rule:
    return Rule(rule_id, decides, tuple(thresholds))


# A failure class with no rule of its own in the table is retried up to max_retries under
# `<class>.retry` (policy.decide); the image pull and the controller's refusal likewise
# (policy._service) before their stop.
_CLASS_RETRIES = tuple(
    _r(f"{k}.retry", f"a {k} failure: retried up to max_retries", "max_retries")
    for k in FailureClass
    if k not in RULES or k in (FailureClass.PULL, FailureClass.CONTROLLER_DOWN))

POLICY_RULES = (
    _r("success", "the job completed: its run passed, measured over the steady window",
       "steady_first", "steady_first_profiler", "steady_last", "profiler_artefact"),
    _r("oom.never_retry", "out of memory: recorded as the value's result, never retried"),
    _r("fault.frozen_nodelist", "a node fault in a sweep whose nodelist is frozen: stop"),
    _r("fault.node_unhealthy", "a node fault in a per-node sweep: the node's own result"),
    _r("fault.retry", "a node fault on an unknown node: retry", "max_retries"),
    _r("fault.same_error_other_nodes",
       "the same node fault on a second node: a config issue, stop"),
    _r("fault.exclude_node", "a node fault: exclude the node and retry on the rest",
       "max_retries", "max_exclusions"),
    _r("exclusions.max", "one exclusion over the limit: the cluster is unhealthy, stop",
       "max_exclusions"),
    _r("nodes.below_minimum", "an exclusion would leave fewer nodes than min_nodes: stop"),
    _r("retries.max", "the run failed max_retries + 1 times: recorded as failed",
       "max_retries"),
    _r("nic.retry", "a NIC fault without a reset: retried as a transient", "max_retries"),
    _r("nic.reset_active", "after a NIC reset every port is Active: run again on the nodes",
       "max_retries"),
    _r("node.unusable", "a queued job waits for nodes the scheduler cannot use in a sweep "
       "that never excludes: stop"),
    _r("queued.exclude_node", "a queued job waits for unusable nodes: exclude them, submit "
       "again", "max_exclusions"),
    _r("hang.retry_once", "a hang before Memstats or after step 0: retry once"),
    _r("hang.retried_still_hangs", "hung again after its one retry: recorded as failed"),
    _r("coord.retry", "a JAX coordination timeout: retried", "max_retries"),
    _r("coord.consecutive", "consecutive coordination timeouts: stop", "coord_timeout_limit"),
    _r("config.run_failed", "a config error in a sweep that judges each run: the run's result"),
    _r("config.stop", "a config error (every node fails alike): stop"),
    _r("environment.stop", "the trainer cannot start (an import, a missing script or file, "
       "a syntax error): stop after its first job, in every kind, quoting the line"),
    _r("checkout.retry_hourly", "a checkout outage: retried without a cap", "checkout_retry_s"),
    _r("service.retries_exhausted", "an image pull or the controller failing past "
       "max_retries: stop for a person", "max_retries"),
    _r("cancelled.rerun", "cancelled outside sweepd: run again"),
    _r("cancelled.again", "cancelled outside sweepd a second time: stop"),
    _r("cancelled.whole_sweep", "every running job cancelled outside sweepd: stop"),
    _r("cancelled.measured", "cancelled after its steady window was complete: the "
       "measurement stands"),
    _r("log.lost_rerun", "completed but its log could not be read: run again", "max_retries"),
    _r("unknown.retry_bounded", "an unrecognised failure: retried up to max_retries",
       "max_retries"),
    *_CLASS_RETRIES,
)

ENGINE_RULES = (
    _r(GENERIC_VERDICT, "a kind's verdict that names no rule of its own"),
    _r("engine.start", "the daemon started"),
    _r("engine.submit", "a run's job submitted"),
    _r("engine.plan_failed", "the kind's planner raised: the sweep stops"),
    _r("scheduler.running", "the scheduler reports the job running"),
    _r("log.first_output", "the job's log printed its first line"),
    _r("log.detached", "the job's log stopped being followed"),
    _r("log.lost", "the job's log cannot be read"),
    _r("hang.no_output", "no new output while RUNNING for the hang timeout: hung",
       "hang_timeout_s"),
    _r("node.evidence", "a node fault's evidence gathered on the node"),
    _r("nic.reset_not_active", "after a NIC reset a port is not Active"),
    _r("nic.reset_skipped", "no NIC reset made (not allowed, or a job ran on the node)"),
    _r("node.resume", "a person readmitted an excluded node"),
    _r("controller.wait", "the controller is down: wait", "controller_down_limit_s"),
    _r("controller.back", "the controller answers again"),
    _r("controller.down_limit", "the controller down past its limit: stop",
       "controller_down_limit_s"),
    _r("recovery.adopt", "after a restart, a job found on the cluster is adopted"),
    _r("recovery.submitter_ended", "after a restart, a submission that ended is recorded"),
    _r("recovery.wait_submitter", "after a restart, a submission still running is awaited"),
    _r("recovery.duplicate_cancelled", "a second job of one attempt is cancelled"),
    _r("submit.late_cancel", "a job submitted after its sweep ended is cancelled"),
    _r("worktree.failed", "the run's checkout could not be made: the run fails"),
    _r("submit.adopted", "a submission found its job already on the cluster: adopted"),
    _r("submit.prepared", "what the submission prepared for the job (said once)"),
    _r("submit.name_fit", "the job name shortened to fit the scheduler"),
    _r("submit.refused", "the scheduler refused the submission: the attempt fails"),
    _r("submit.spec_refused", "a submission the spec makes impossible: stop"),
    _r("checkouts.released", "a sweep's checkouts removed at its end"),
    _r("checkouts.release_failed", "a sweep's checkouts could not be removed"),
    _r("cluster.leftover_removed", "what a sweep left on the cluster removed at its end"),
    _r("cluster.leftover", "what a sweep left on the cluster, said at a stop"),
    _r("cluster.leftover_kept", "what a sweep left on the cluster, kept at its end"),
    _r("budget.node_hours", "a sweep's node-hours reached its cap: stop"),
    _r("slot.resolved", "a cluster slot resolved to its nodes"),
    _r("person.resume", "a person resumed the sweep"),
    _r("person.abort", "a person aborted the sweep"),
    _r("campaign.stage_started", "a campaign's next stage started as a sweep"),
    _r("campaign.child", "a sweep linked to the campaign stage that started it"),
    _r("campaign.stage_refused", "a campaign stage's spec was refused: the campaign stops"),
)

BOOK = RuleBook("engine", (*POLICY_RULES, *ENGINE_RULES), THRESHOLDS)
