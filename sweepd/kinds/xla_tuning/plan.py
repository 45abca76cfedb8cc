"""The engine's side of the wave planner: `search.plan` on the store's results, as the
engine's `NewRun` list (each run's params from `run_params.py`, its label from `labels.py`),
`Finished` or `Stop` (the checks before each wave: `plan_checks.py`); the SKILL.md's stop
message. Every decision carries its rule and its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sweepd.kinds.api import Finished, NewRun, Plan, SweepContext
from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning import search as wave_search
from sweepd.kinds.xla_tuning.catalog.catalog import Evidence, Layer, Profile
from sweepd.kinds.xla_tuning.catalog.collectives import collective_only
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, Entry
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.runs import gather, progress
from sweepd.kinds.xla_tuning.runs.plan_checks import not_applied_stop, preflight
from sweepd.kinds.xla_tuning.runs.run_params import DUMP_DIR, Batch, batch_of, run_params
from sweepd.kinds.xla_tuning.search import Planned, Verdict
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.kinds.xla_tuning.verdict import render
from sweepd.kinds.xla_tuning.verdict.structure import Decided
from sweepd.kinds.xla_tuning.waves.in_effect import without_in_effect
from sweepd.kinds.xla_tuning.waves.labels import label, roles
from sweepd.store.rows import Job, Run, Sweep
from sweepd.store.states import RunState


def plan(spec: XlaTuningSpec, ctx: SweepContext[XlaFacts]) -> Plan:
    stop = preflight(spec, ctx) or not_applied_stop(ctx)
    if stop is not None:
        return stop
    results = roles(gather.results(ctx.runs, ctx.jobs, deployed=ctx.facts.deployed),
                    ctx.runs, ctx.jobs)
    inp = with_devices(without_in_effect(changeable(spec.inputs(ctx.facts.deployed),
                                                    ctx.facts.fixed_flags()), results),
                       spec, ctx.gpus_per_node)
    evidence = evidence_of(ctx)
    decided = wave_search.plan(inp, results, evidence)
    if isinstance(decided, Verdict):
        # Every verdict is made by `make_verdict`, with its structure.
        assert isinstance(decided, Decided), decided
        board = build(results, inp.noise, inp.max_flakes, inp.drift)
        return finished(spec, decided, board, ctx)
    batch = batch_of(spec, ctx.facts)
    taken = {r.label for r in ctx.runs}
    out = []
    for p in _dump_ready(spec, ctx, decided):
        name = label(p, next(iter(spec.config_tags)), taken)
        taken.add(name)
        out.append(NewRun(name, run_params(spec, p, batch, _dump_dir(ctx.facts, name)),
                          spec.node_list,
                          f"wave {p.wave}: {p.reason}" + _batch_note(p, batch, ctx.facts)
                          + _evidence_note(p, evidence) + _one_device_note(p, inp),
                          p.rule))
    first = None if ctx.runs else progress.kickoff(
        spec.model, spec.nodes, inp, _batch_text(batch))
    said = progress.lines(inp, results, decided, first)
    if out and said:
        out[0] = replace(out[0], progress=said)
    return out


def devices(spec: XlaTuningSpec, gpus_per_node: int) -> tuple[int, str]:
    """The devices one job runs on, and how that was read: the slot's nodes x the cluster's
    devices per node, or more where a parallelism override asks for more (MaxText's
    `ici_*` / `dcn_*_parallelism`: their product is the devices the mesh needs)."""
    par = spec.parsed_parallelism()
    asked = 1
    for key, value in spec.overrides.items():
        if key.endswith("_parallelism") and isinstance(value, int) and value > 1:
            asked *= value
    n = max(spec.count * gpus_per_node, asked, par.ranks)
    how = (f"{spec.count} node(s) x {gpus_per_node} device(s) per node "
           f"(cluster.gpus_per_node), {par.text}")
    return n, how + (f"; the parallelism overrides ask for {asked}" if asked > 1 else "")


def with_devices(inp: Inputs, spec: XlaTuningSpec, gpus_per_node: int) -> Inputs:
    n, how = devices(spec, gpus_per_node)
    return replace(inp, devices=n, devices_how=how)


def _dump_ready(spec: XlaTuningSpec, ctx: SweepContext[XlaFacts], decided: Sequence[Planned]
                ) -> Sequence[Planned]:
    """A TPU evidence run names its dump's directory in its XLA_FLAGS (`_dump_dir`), under
    the sweep's output directory, which the first plan's facts (gathered at submission,
    before the sweep had an id) do not know: it waits for the next plan, after the
    baseline (on one chip the jobs run one at a time anyway)."""
    if spec.platform != "tpu" or ctx.runs or ctx.facts.outputs is not None:
        return decided
    held = [p for p in decided if p.profile.name != EVIDENCE]
    return held or decided


def _dump_dir(facts: XlaFacts, name: str) -> str:
    """Where a TPU evidence run dumps its HLO: the sweep's output directory, beside its
    jobs' logs (relative, under the trainer's directory, where it is not known: validate)."""
    sub = f"{DUMP_DIR}-{name}"
    return str(facts.outputs / sub) if facts.outputs is not None else sub


def _one_device_note(p: Planned, inp: Inputs) -> str:
    """The evidence run says ahead what one device means for the catalog."""
    if p.rule != rule_book.EVIDENCE.id or inp.devices != 1:
        return ""
    left = [q.name for q in inp.catalog if q.family and collective_only(q)]
    if not left:
        return ""
    return (f"; 1 device ({inp.devices_how}): no collectives, so {', '.join(left)} will not "
            f"run ({rule_book.NO_COLLECTIVES.id})")


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
    if p.rule != rule_book.CATALOG.id:
        return ""
    if evidence is None:
        return "; no HLO evidence: ordered by the parallelism's dominant costs"
    return f"; evidence: {evidence.describe()}"


def _batch_note(p: Planned, batch: Batch, facts: XlaFacts) -> str:
    """Wave 1's baselines say where the batch size came from and what the model's env file
    sets (the Inventory restore_default puts back): recorded once, not on every run."""
    if p.profile.name != BASELINE or p.wave != 1:
        return ""
    return (f"; per_device_batch_size from {batch.source}; {facts.inventory_line()}"
            + _fixed_note(facts))


def evidence_of(ctx: SweepContext[XlaFacts]) -> Evidence | None:
    """The Wave 1.5 evidence: the evidence run's HLO dump (`logread.hlo_evidence`); None
    until it has finished (the catalog is then ordered by the parallelism's costs)."""
    return gather.evidence(ctx.runs, ctx.jobs)


def finished(spec: XlaTuningSpec, v: Decided, board: Board,
             ctx: SweepContext[XlaFacts]) -> Finished:
    primary = next(iter(spec.config_tags))
    top = _ranked(board, primary)
    # One figure up front (the confirmation's, with its interval) and the recipe's flags;
    # the reason after it, its other figures each said for what they are, terms explained.
    sent = next((r.params for r in ctx.runs if r.params.profile == v.recipe), None)
    flags = "" if sent is None else " ".join(
        [*sent.xla_flags, *(f"{k}={x}" for k, x in sent.env.items() if spec.env.get(k) != x)])
    said = v.said if v.said.recipe is None else replace(
        v.said, recipe=replace(v.said.recipe, flags=flags, flags_var=spec.flags_var))
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
        **said.as_dict(),   # the structure beside the prose (`structure.from_stored`)
    }
    # The rule that decided (winner, bounded, timebox, ...) is the transition's, not a generic one.
    return Finished(True, render.summary(said), verdict, rule=v.rule)


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
    board = build(roles(gather.results(runs, jobs), runs, jobs), t.noise, t.max_flakes,
                  DriftRead(t.drift))
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
