"""The engine's side of the wave planner: `search.plan` on the store's results, as the
engine's `NewRun` list, `Finished` or `Stop`; the pre-flight checks the planner can make;
the SKILL.md's stop message. Every decision carries its rule and its reason.

Nodes are frozen for this kind: a sweep whose usable nodes differ from the pinned ones (an
exclusion, a person's `resume --exclude`) stops with the SKILL.md's stop message rather
than running on fewer or other nodes (the engine's own fault path: `Kind.frozen_nodes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sweepd.core.states import RunState
from sweepd.kinds.api import Finished, NewRun, Plan, Stop, SweepContext
from sweepd.kinds.xla_tuning import applied, gather, progress
from sweepd.kinds.xla_tuning import search as wave_search
from sweepd.kinds.xla_tuning.board import (
    BASELINE,
    CLAIM_MARK,
    CLAIM_RULES,
    EVIDENCE,
    Board,
    Entry,
    Inputs,
    Result,
    build,
    with_roles,
)
from sweepd.kinds.xla_tuning.catalog import Axis, Evidence, Layer, Profile
from sweepd.kinds.xla_tuning.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.search import Planned, Verdict
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import Job, Run, RunParams, Scalar, Sweep
from sweepd.util.hostlists import collect_nodes

# Every tuning job (SKILL.md, "Submission template"): 15 steps (steady window 5-14, 9-14
# with the profiler) on synthetic data, and a heartbeat timeout long enough that a slow
# compile or a profiler dump is never taken for a dead rank.
JOB_OVERRIDES: dict[str, Scalar] = {"steps": 15, "dataset_type": "synthetic",
                                    "jax_distributed_heartbeat_timeout_seconds": 99999}
# sbatch --time per job (the template's 45:00; the evidence run, with the profiler and the
# HLO dump, 50:00): a hung job ends on its own even if nobody is watching.
JOB_TIME = "45:00"
EVIDENCE_TIME = "50:00"
# The MaxText override each axis is passed as (SKILL.md, "Submission template").
AXIS_OVERRIDES: dict[Axis, str] = {Axis.FSDP: "dcn_fsdp_parallelism",
                                   Axis.PP: "dcn_pipeline_parallelism",
                                   Axis.TP: "ici_tensor_parallelism"}


@dataclass(frozen=True)
class Batch:
    """The per_device_batch_size the jobs run with, and where it came from."""

    value: int | None
    source: str


def batch_of(spec: XlaTuningSpec, facts: XlaFacts) -> Batch:
    if spec.per_device_batch_size is not None:
        return Batch(spec.per_device_batch_size, "the spec")
    prior = facts.model_perf
    if prior is not None:
        return Batch(prior.best, f"model-perf sweep {prior.sweep}'s optimum")
    return Batch(None, "the config's value (no finished model-perf sweep of this model on "
                       f"{spec.count} nodes)")


def parallelism_overrides(spec: XlaTuningSpec) -> dict[str, Scalar]:
    """The MaxText overrides that set the cell's parallelism: each axis the parallelism
    uses (degree > 1). Axes at 1 are left to the config, as every override lengthens the
    job name submit.sh builds (<= 243 bytes); a config that sets another axis > 1 needs
    that axis at 1 in the spec's `overrides`."""
    par = spec.parsed_parallelism()
    return {key: par.degree(axis) for axis, key in AXIS_OVERRIDES.items()
            if par.degree(axis) > 1}


def run_params(spec: XlaTuningSpec, planned: Planned, batch: Batch) -> RunParams:
    """The one place a planned run becomes a run's params: its XLA flags appended to the
    job's inherited XLA_FLAGS (never a replacement), its env vars on top of the spec's, and
    the overrides every tuning job carries (spec, parallelism, config tag, the profile's
    MaxText settings, then steps=15 dataset_type=synthetic and the heartbeat timeout:
    SKILL.md, always), and the template's time limit."""
    settings = planned.profile.settings
    maxtext: dict[str, Scalar] = {s.key: s.value for s in settings if s.layer is Layer.MAXTEXT}
    overrides: dict[str, Scalar] = {
        **spec.overrides, **parallelism_overrides(spec), **spec.config_tags[planned.tag],
        **maxtext, **JOB_OVERRIDES}
    overrides["steps"] = max(spec.steps, JOB_OVERRIDES["steps"])
    if batch.value is not None:
        overrides["per_device_batch_size"] = batch.value
    return RunParams(
        profile=planned.profile.name, wave=str(planned.wave), tag=planned.tag,
        xla_flags=[s.text for s in settings if s.layer is Layer.XLA],
        env={s.key: s.value for s in settings if s.layer is Layer.ENV},
        overrides=overrides,
        time_limit=EVIDENCE_TIME if planned.profile.name == EVIDENCE else JOB_TIME)


def plan(spec: XlaTuningSpec, ctx: SweepContext[XlaFacts]) -> Plan:
    stop = preflight(spec, ctx) or not_applied_stop(ctx)
    if stop is not None:
        return stop
    results = roles(gather.results(ctx.runs, ctx.jobs, deployed=ctx.facts.deployed),
                    ctx.runs, ctx.jobs)
    inp = changeable(spec.inputs(ctx.facts.deployed), ctx.facts.fixed_flags())
    evidence = evidence_of(ctx)
    decided = wave_search.plan(inp, results, evidence)
    if isinstance(decided, Verdict):
        return finished(spec, decided, build(results, inp.noise, inp.max_flakes), ctx)
    batch = batch_of(spec, ctx.facts)
    taken = {r.label for r in ctx.runs}
    out = []
    for p in decided:
        name = label(p, next(iter(spec.config_tags)), taken)
        taken.add(name)
        out.append(NewRun(name, run_params(spec, p, batch), spec.node_list,
                          f"wave {p.wave}: {p.reason}" + _batch_note(p, batch, ctx.facts)
                          + _evidence_note(p, evidence), p.rule))
    first = None if ctx.runs else progress.kickoff(
        spec.model, spec.nodes, inp, _batch_text(batch))
    said = progress.lines(inp, results, decided, first)
    if out and said:
        out[0] = replace(out[0], progress=said)
    return out


def changeable(inp: Inputs, fixed: frozenset[str]) -> Inputs:
    """submit.sh mode: the model's env file, sourced after train_env.sh, wins over any arm
    for the XLA flags it sets; a profile of such a flag would measure nothing (and its
    submission is refused), so the catalog and restore_default leave those flags out."""
    if not fixed:
        return inp
    return replace(inp, catalog=tuple(p for p in inp.catalog if not _touches(p, fixed)),
                   deployed=tuple(s for s in inp.deployed if s.key not in fixed))


def _touches(profile: Profile, fixed: frozenset[str]) -> bool:
    return any(s.layer is Layer.XLA and s.key in fixed for s in profile.settings)


def _fixed_note(facts: XlaFacts) -> str:
    fixed = facts.fixed_flags()
    if not fixed:
        return ""
    return (f"; not tuned: {', '.join(sorted(fixed))} (set by {facts.env_file}, which the "
            "toolkit sources after train_env.sh: a profile's arm cannot change them; edit "
            "the env file to test them)")


def _batch_text(batch: Batch) -> str:
    shown = batch.value if batch.value is not None else "as configured"
    return f"per_device_batch_size {shown} ({batch.source})"


def _evidence_note(p: Planned, evidence: Evidence | None) -> str:
    """A catalog run says what ordered it: the evidence run's shares, or their absence."""
    if p.rule != "wave.catalog":
        return ""
    if evidence is None:
        return "; no HLO evidence: ordered by the parallelism's dominant costs"
    return f"; evidence: {evidence.describe()}"


def label(p: Planned, primary: str, taken: set[str]) -> str:
    """A run's label, unique in the sweep: the profile (and its tag when not the primary);
    a repeat is numbered (`fast #2`); a run made to measure a recipe's claim ends in
    CLAIM_MARK (`fast #3 (claim)`: the store keeps its role so). The params, not the
    label, say what ran."""
    base = p.profile.name if p.tag == primary else f"{p.profile.name}@{p.tag}"
    mark = CLAIM_MARK if p.rule in CLAIM_RULES else ""
    n = 1
    name = base
    while name in taken or name + CLAIM_MARK in taken:
        n += 1
        name = f"{base} #{n}"
    return name + mark


def roles(results: Sequence[Result], runs: Sequence[Run], jobs: Sequence[Job]
          ) -> list[Result]:
    """The results with their role (claim run or not) from their run's label."""
    claim_runs = {r.id for r in runs if r.label.endswith(CLAIM_MARK)}
    keys = {j.backend_id or f"#{j.id}" for j in jobs if j.run_id in claim_runs}
    return with_roles(results, keys)


def _batch_note(p: Planned, batch: Batch, facts: XlaFacts) -> str:
    """Wave 1's baselines say where the batch size came from and what the model's env file
    sets (the Inventory restore_default puts back): recorded once, not on every run."""
    if p.profile.name != BASELINE or p.wave != 1:
        return ""
    return (f"; per_device_batch_size from {batch.source}; {facts.inventory_line()}"
            + _fixed_note(facts))


def preflight(spec: XlaTuningSpec, ctx: SweepContext[XlaFacts]) -> Stop | None:
    """What the planner itself can check before each wave: the slot resolved to nodes, and
    the nodelist still the pinned one (frozen: never fewer nor other nodes)."""
    if not spec.node_list:
        return Stop("the cluster slot names no nodes yet (partition / node_count are not "
                    "resolved to nodes)", "preflight.slot_unresolved")
    if list(ctx.nodes) != spec.node_list:
        gone = sorted(set(spec.node_list) - set(ctx.nodes))
        return Stop(f"{collect_nodes(gone)} out of use: the nodelist is frozen for xla-tuning "
                    "(never excluded or substituted); readmit it to go on", "nodes.frozen",
                    evidence=", ".join(gone))
    return None


# Distinct profiles not applied for one cause before the sweep stops and asks: one is a
# profile's own conflict; three the same way is the toolkit not applying profiles at all.
NOT_APPLIED_LIMIT = 3
NOT_APPLIED_RULE = "xla.not_applied"


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


def evidence_of(ctx: SweepContext[XlaFacts]) -> Evidence | None:
    """The Wave 1.5 evidence: the evidence run's HLO dump (`logread.hlo_evidence`); None
    until it has finished (the catalog is then ordered by the parallelism's costs)."""
    return gather.evidence(ctx.runs, ctx.jobs)


def finished(spec: XlaTuningSpec, v: Verdict, board: Board,
             ctx: SweepContext[XlaFacts]) -> Finished:
    primary = next(iter(spec.config_tags))
    top = _ranked(board, primary)
    summary = f"{v.kind}: {v.reason}"
    if v.recipe:
        summary = f"{v.kind}: {v.recipe} {v.gain or 0:+.2%} vs baseline-deployed ({v.reason})"
    verdict: dict[str, Any] = {
        "kind": str(v.kind), "rule": v.rule, "reason": v.reason, "recipe": v.recipe,
        "gain": v.gain, "conditional": v.conditional,
        "conditional_reason": v.conditional_reason, "regressed": list(v.regressed),
        "interval": list(v.interval) if v.interval else None, "gain_runs": v.n,
        "left_out": list(v.left_out), "profiles": v.profiles, "win": v.win,
        "model": spec.model,
        "parallelism": spec.parsed_parallelism().text, "tag": primary,
        "noise": board.noise, "runs": board.runs,
        "batch_source": batch_of(spec, ctx.facts).source,
        "inventory": ctx.facts.inventory_line(),
        "top": [{"profile": e.profile, "tgs": e.mean, "n": e.n,
                 "delta": board.delta(e.profile, primary)} for e in top[:8]],
    }
    return Finished(True, summary, verdict)


def _ranked(board: Board, tag: str) -> list[Entry]:
    measured = [e for e in board.entries.values() if e.tag == tag and e.n
                and e.profile != EVIDENCE]
    return sorted(measured, key=lambda e: -e.mean)


def stop_state(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]
               ) -> tuple[str, list[str]] | None:
    """Kind.stops.state: xla-tuning.SKILL.md's stop title `[xla-tuning STOP] <MODEL_TAG>
    <PARALLELISM> sweep halted`, best so far (Δ vs baseline-deployed), top 3 and the
    pending profiles. None (the generic message) for a spec this version cannot read."""
    try:
        spec = XlaTuningSpec.from_stored(sweep.spec)
        assert isinstance(spec, XlaTuningSpec)
        par = spec.parsed_parallelism().text
    except (ValueError, KeyError, AssertionError):
        return None
    t = spec.thresholds
    board = build(roles(gather.results(runs, jobs), runs, jobs), t.noise, t.max_flakes)
    primary = next(iter(spec.config_tags))
    ranked = [e for e in _ranked(board, primary) if e.profile != BASELINE]
    lines = [f"  - Profiles tested so far: {len(ranked)} (top 3 below)"]
    for i, e in enumerate(ranked[:3]):
        d = board.delta(e.profile, primary)
        shown = f"{e.profile} @ {e.mean:.1f}" + (f" (Δ {d:+.2%} vs baseline-deployed)"
                                                 if d is not None else "")
        lines.append(f"  - {'Best so far: ' if i == 0 else ''}{shown}")
    if not ranked:
        lines.append("  - Best so far: none measured")
    pending = sorted({r.params.profile or r.label for r in runs
                      if r.state in (RunState.PENDING, RunState.ACTIVE)})
    lines.append(f"  - Pending profiles in queue: {', '.join(pending) or 'none'}"
                 + (" (held: they run on resume)" if pending else ""))
    return f"[xla-tuning STOP] {spec.model} {par} sweep halted", lines
