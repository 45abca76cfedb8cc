"""What the planner checks before each wave, each failure a `Stop`: the slot resolved to
nodes, the nodelist still the pinned one, and profiles not applied all the same way.

Nodes are frozen for this kind: a sweep whose usable nodes differ from the pinned ones (an
exclusion, a person's `resume --exclude`) stops with the SKILL.md's stop message rather
than running on fewer or other nodes (the engine's own fault path: `Kind.frozen_nodes`).
"""

from __future__ import annotations

from sweepd.kinds.api import Stop, SweepContext
from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.evidence import applied
from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.runs import gather
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.util.hostlists import collect_nodes


def preflight(spec: XlaTuningSpec, ctx: SweepContext[XlaFacts]) -> Stop | None:
    """What the planner itself can check before each wave: the slot resolved to nodes, and
    the nodelist still the pinned one (frozen: never fewer nor other nodes)."""
    if not spec.nodes:   # node_list of no nodes raises: the hostlist is empty
        return Stop("the cluster slot names no nodes yet (partition / node_count are not "
                    "resolved to nodes)", rule_book.SLOT_UNRESOLVED.id,
                    evidence=f"partition={spec.partition} node_count={spec.node_count}")
    if list(ctx.nodes) != spec.node_list:
        gone = sorted(set(spec.node_list) - set(ctx.nodes))
        return Stop(f"{collect_nodes(gone)} out of use: the nodelist is frozen for xla-tuning "
                    "(never excluded or substituted); readmit it to go on",
                    rule_book.NODES_FROZEN.id,
                    evidence=", ".join(gone))
    return None


# Distinct profiles not applied for one cause before the sweep stops and asks: one is a
# profile's own conflict; three the same way is the toolkit not applying profiles at all.
NOT_APPLIED_LIMIT = 3
NOT_APPLIED_RULE = rule_book.NOT_APPLIED.id


def not_applied_stop(ctx: SweepContext[XlaFacts]) -> Stop | None:
    """Issue 23: a toolkit that never applies a profile (its `_train.sh` does not pre-export
    `_env_` values) had every profile dropped as "not applied" and the sweep ended on an
    exhausted catalog. After NOT_APPLIED_LIMIT distinct profiles not applied with one cause,
    the sweep stops and asks, naming the mechanism that failed. Once a person resumed from
    this stop, it is not raised again (they chose to go on)."""
    if NOT_APPLIED_RULE in ctx.acknowledged_stops:
        return None
    by_cause: dict[str, dict[str, gather.Unapplied]] = {}
    for u in gather.unapplied(ctx.runs, ctx.jobs, ctx.facts.deployed):
        by_cause.setdefault(u.miss.cause, {}).setdefault(u.profile, u)
    for cause, found in by_cause.items():
        if len(found) < NOT_APPLIED_LIMIT:
            continue
        listed = "; ".join(f"{u.profile} (job {u.job_id}): {u.miss.culprit}"
                           for u in found.values())
        return Stop(f"{len(found)} profiles not applied, all the same way: "
                    f"{mechanism(cause, ctx.facts)}. Fix that, then resume (the profiles "
                    "dropped so far stay dropped; the rest run); or abort",
                    NOT_APPLIED_RULE, evidence=listed)
    return None


def mechanism(cause: str, facts: XlaFacts) -> str:
    """What failed between the sweep and its jobs, for each cause `applied.Miss` knows."""
    submit_sh = facts.sourced_last
    if cause == applied.UNREACHED:
        if submit_sh:
            return ("`_env_TUNE_PROFILE` did not reach `train_env.sh`: the profiles' arms "
                    "never ran (the toolkit's `_train.sh` must export the `_env_` "
                    "passthrough, or fill EXTRACTED_ENV_MAP, before it sources "
                    "train_env.sh)")
        return ("the profiles' XLA_FLAGS and env vars, exported by sweepd's batch script, "
                "did not reach the trainer (the train command must keep the environment "
                "it is started with, appending to XLA_FLAGS, never replacing it)")
    if cause == applied.ENV_FILE:
        where = facts.env_file or "configs/<MODEL>.env.sh"
        if submit_sh:
            return (f"the model's env file ({where}) sets these after train_env.sh, and the "
                    "`_env_K=V` passthrough that wins them back did not win (the toolkit's "
                    "`_train.sh` must re-export the `_env_` values after the env file)")
        return f"the model's env file ({where}) sets these later, and its values won"
    if cause == applied.NO_FLAGS:
        return ("the jobs' logs never printed XLA_FLAGS, so no profile can be checked (the "
                "train command must print its environment, as the toolkit's `_train.sh` "
                "does)")
    return "a later setting won over each profile's value (see each culprit)"
