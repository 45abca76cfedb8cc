"""xla-tuning.SKILL.md's pre-flight, made at submission and again at each resume
(Kind.preflight) and recorded as decisions: the pinned nodes' states, other users' jobs on
the partition, what a model sweepd has no shape for leaves unavailable, and (submit.sh
mode) `train_env.sh` free of a TUNE_PROFILE block. Only the last refuses: a drained or down
node is the engine's to handle before each job (`core/node_check.py`: RESUME where allowed,
else the sweep stops, rule `node.unusable`); other users' jobs are noted, not a stop.

At a resume the arms of the sweep's own profiles are expected in `train_env.sh` (it wrote
them); any other arm, or a block sweepd did not write, refuses the resume as it would a
submission.
"""

from __future__ import annotations

from pathlib import Path

from sweepd.clusters import train_env
from sweepd.clusters.base import UNUSABLE, ControllerUnreachable
from sweepd.kinds.registry import Check, PreflightContext
from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.util.text import compact_nodes

TUNE_CASE = "TUNE_PROFILE"
SHOWN_JOBS = 10  # the evidence lists this many of the other users' jobs


async def checks(spec: XlaTuningSpec, ctx: PreflightContext) -> list[Check]:
    out = [await nodes(spec, ctx), await other_users(ctx)]
    unknown = spec.unknown_shape()
    if unknown is not None:
        out.append(Check(rule_book.PREFLIGHT_MODEL.id, unknown, f"model {spec.model}"))
    if ctx.where.repo is not None:
        own = None if ctx.resumed is None else frozenset(
            r.params.profile for r in ctx.resumed if r.params.profile)
        out.append(leftover(ctx.where.repo / "train_env.sh", own))
    return out


async def nodes(spec: XlaTuningSpec, ctx: PreflightContext) -> Check:
    """The pinned nodes' states now (a note). One not usable is said here; the engine tries
    RESUME before the first job and stops the sweep if it stays so."""
    try:
        states = await ctx.backend.node_states(spec.node_list)
    except (ControllerUnreachable, RuntimeError) as e:
        return Check(rule_book.PREFLIGHT_NODES.id, "node states unknown now (the scheduler did not "
                     "answer); checked again before each job", str(e))
    by_state: dict[str, list[str]] = {}
    for node in spec.node_list:
        by_state.setdefault(states.get(node, "unknown"), []).append(node)
    evidence = "; ".join(f"{s}: {compact_nodes(ns)}" for s, ns in sorted(by_state.items()))
    bad = sorted(n for s, ns in by_state.items() if s in UNUSABLE for n in ns)
    if bad:
        text = (f"{compact_nodes(bad)} not usable now: before the first job the engine "
                "tries RESUME where allowed, else stops the sweep (node.unusable)")
    else:
        text = f"all {len(spec.node_list)} pinned nodes usable"
    return Check(rule_book.PREFLIGHT_NODES.id, text, f"node states: {evidence}")


async def other_users(ctx: PreflightContext) -> Check:
    """Other users' jobs on the partition: they may queue before or beside the sweep's jobs
    (the 8 h timebox counts queue time). Noted, never a stop."""
    where = f"partition {ctx.partition}" if ctx.partition else "the cluster"
    try:
        found = await ctx.backend.others_jobs(ctx.partition)
    except (ControllerUnreachable, RuntimeError) as e:
        return Check(rule_book.PREFLIGHT_OTHER_USERS.id,
                     f"other users' jobs on {where} unknown (the "
                     "scheduler did not answer)", str(e))
    jobs = found.items
    shown = "; ".join(jobs[:SHOWN_JOBS]) + (f"; +{len(jobs) - SHOWN_JOBS} more"
                                            if len(jobs) > SHOWN_JOBS else "")
    text = (f"{len(jobs)} job(s) of other users on {where}: the sweep's jobs may queue "
            "behind them (noted, not a stop)" if jobs else f"no other users' jobs on {where}")
    return Check(rule_book.PREFLIGHT_OTHER_USERS.id, text, f"{found.evidence}: {shown or 'none'}")


def leftover(path: Path, own: frozenset[str] | None = None) -> Check:
    """submit.sh mode: `train_env.sh` must hold no TUNE_PROFILE block at a sweep's start (a
    leftover arm would change what a job of the same profile name runs). `own`: at a resume,
    the sweep's own profiles, whose arms it wrote itself."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Check(rule_book.PREFLIGHT_TRAIN_ENV.id, f"{path} absent: nothing left in it",
                     str(path))
    except OSError as e:
        return Check(rule_book.PREFLIGHT_TRAIN_ENV.id, f"cannot read {path}: {e.strerror}",
                     str(path),
                     ok=False)
    try:
        left = train_env.arms(text)
    except train_env.TrainEnvError as e:
        return Check(rule_book.PREFLIGHT_TRAIN_ENV.id, f"{path}: {e}", str(path), ok=False)
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if TUNE_CASE in line
             and line.lstrip().startswith("case")]
    if not lines:
        return Check(rule_book.PREFLIGHT_TRAIN_ENV.id, f"{path} holds no TUNE_PROFILE block",
                     str(path))
    if own is not None and left and all(a.name in own for a in left):
        return Check(rule_book.PREFLIGHT_TRAIN_ENV.id, f"{path} holds this sweep's own arms only "
                     f"({', '.join(a.name for a in left)})", f"{path} lines "
                     + ", ".join(map(str, lines)))
    what = (train_env.describe(text, str(path)) if left else
            f"{path} has a TUNE_PROFILE block sweepd did not write")
    again = "submit again" if own is None else "resume"
    return Check(rule_book.PREFLIGHT_TRAIN_ENV.id, f"{what}; remove it first (the earlier sweep's "
                 f"report offers the command), then {again}", f"{path} lines "
                 + ", ".join(map(str, lines)), ok=False)
