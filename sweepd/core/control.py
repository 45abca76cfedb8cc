"""A person's (or a stop rule's) operations on a whole sweep: stop, resume, abort, cancel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import structlog

from sweepd.core.node_evidence import stored_evidence
from sweepd.kinds.registry import kind_of, kinds
from sweepd.kinds.spec import SpecError
from sweepd.reports.stop import stop_message
from sweepd.store.rows import Job, Run, Sweep
from sweepd.store.states import JOB_ACTIVE, JobState, RunState, SweepState
from sweepd.store.store import InvalidTransition
from sweepd.util.hostlists import expand_nodes
from sweepd.util.text import compact_nodes
from sweepd.util.worktrees import GitError

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts

log = structlog.get_logger("sweepd.core.control")


async def _cancel_jobs(engine: EngineParts, sweep_id: int, reason: str, rule: str) -> None:
    """Cancel every active job of the sweep: the decision is written here; the scheduler
    is told after it commits (`Engine.flush_cancels`)."""
    for job in await engine.store.jobs.of_sweep(sweep_id):
        if job.state not in JOB_ACTIVE:
            continue
        await engine.store.jobs.transition(job.id, JobState.CANCELLED, reason, rule=rule)
        if job.backend_id:
            engine.cancel_later(job.backend_id)


async def end_open_work(engine: EngineParts, sweep_id: int, reason: str, rule: str) -> None:
    """A sweep that ends (a verdict, an abort) leaves nothing on the cluster and no run
    open: its active jobs are cancelled, its pending and active runs ended with `reason`.
    Inside the caller's transaction."""
    await _cancel_jobs(engine, sweep_id, reason, rule)
    for run in await engine.store.runs.of_sweep(sweep_id):
        if run.state in (RunState.PENDING, RunState.ACTIVE):
            await engine.store.runs.transition(run.id, RunState.CANCELLED, reason, rule=rule)


# The stop rule of a submission its spec makes impossible (clusters.base.SpecRefused).
SPEC_REFUSED = "submit.spec_refused"


@dataclass(frozen=True)
class SweepStop:
    """An effect a piece of the pass returns: halt this sweep for a person (the engine
    applies it with `stop_sweep`, the piece needing no engine)."""

    sweep: Sweep
    reason: str
    rule: str
    evidence: str | None
    failing_nodes: Sequence[str]
    recovery: str
    outcome: str


async def apply_stop(engine: EngineParts, stop: SweepStop) -> None:
    await stop_sweep(engine, stop.sweep, stop.reason, rule=stop.rule, evidence=stop.evidence,
                     failing_nodes=stop.failing_nodes, recovery=stop.recovery,
                     outcome=stop.outcome)


async def stop_sweep(engine: EngineParts, sweep: Sweep, reason: str, *, rule: str,
                     evidence: str | None, failing_nodes: Sequence[str], recovery: str,
                     outcome: str, waiting_node: str | None = None) -> None:
    """Halt the sweep for a person's decision, with a message in the TG-stop format
    (`waiting_node`: stop_message's)."""
    store = engine.store
    async with store.tx():
        await _cancel_jobs(engine, sweep.id, f"cancelled by stop: {reason}", rule)
        runs = await store.runs.of_sweep(sweep.id)
        jobs = await store.jobs.of_sweep(sweep.id)
        out = [e.node for e in await store.exclusions.of_sweep(sweep.id)]
        nodelist = str(sweep.spec.get("nodes", "?")) + (f" (excluded: {', '.join(out)})"
                                                        if out else "")
        own = kind_of(sweep.kind).stops.state
        message = stop_message(sweep, reason, failing_nodes, recovery, outcome, nodelist,
                               runs, jobs, nodes_short=_nodes_short(engine, sweep, out),
                               own=own(replace(sweep, reason=reason), runs, jobs) if own else None,
                               node_evidence=await stored_evidence(store, sweep.id,
                                                                   failing_nodes),
                               spec_refused=rule == SPEC_REFUSED, waiting_node=waiting_node)
        files = _stop_files(engine, sweep, runs, jobs)
        note = await end_note(engine, sweep)
        message += "".join(f"\n\n{n}" for n in (files, note) if n)
        await store.sweeps.transition(sweep.id, SweepState.AWAITING_DECISION, reason,
                                            rule=rule, evidence=evidence, progress=message)
    engine.notify()
    log.warning("sweep.stopped", sweep=sweep.id, rule=rule, reason=reason)


def _stop_files(engine: EngineParts, sweep: Sweep, runs: Sequence[Run],
                jobs: Sequence[Job]) -> str | None:
    """What the kind writes for the person at a stop (xla-tuning: a partial tuning.md).
    A file that cannot be written is said, never raised: the stop stands."""
    write = kind_of(sweep.kind).stops.files
    if write is None:
        return None
    try:
        return write(sweep, runs, jobs, engine.outputs / f"sweep-{sweep.id}")
    except (OSError, ValueError) as e:
        log.warning("stop.files_failed", sweep=sweep.id, error=str(e))
        return f"The partial report could not be written: {e}"


async def end_note(engine: EngineParts, sweep: Sweep, *, ended: bool = False) -> str | None:
    """What the sweep's submissions left outside sweepd's own directories (the cluster
    backend says: e.g. arms in the toolkit's train_env.sh), for the person at a stop or the
    end, recorded as an event. At the end (`ended`: done, failed, aborted, cancelled) it is
    removed first, unless the spec keeps it (`keep_profiles: true`); a stop keeps it for a
    resume. Unreadable or not removable: said so, never raised (the verdict stands)."""
    where = engine.outputs / f"sweep-{sweep.id}"
    said = []
    keep = bool(getattr(engine.spec_of(sweep), "keep_profiles", False))
    if ended and not keep:
        try:
            removed = await engine.backend.remove_leftovers(where)
        except OSError as e:
            removed = f"what the sweep's submissions left could not be removed: {e}"
        if removed:
            await engine.store.events.add(sweep.id, "note", removed.splitlines()[0],
                                          rule="cluster.leftover_removed", evidence=removed)
            said.append(removed)
    try:
        note = await engine.backend.end_note(where)
    except OSError as e:
        note = f"what the sweep's submissions left could not be read back: {e}"
    if note and ended and keep:
        note += "\n  kept, as the spec says (keep_profiles: true)"
    if note:
        await engine.store.events.add(sweep.id, "note", note.splitlines()[0],
                                      rule="cluster.leftover_kept" if ended and keep
                                      else "cluster.leftover", evidence=note)
        said.append(note)
    return "\n".join(said) or None


async def resume(engine: EngineParts, sweep_id: int, exclude: Sequence[str] = (),
                 readmit: Sequence[str] = ()) -> None:
    """Resume a stopped sweep. `exclude` adds to its exclusions; only `readmit` puts an
    excluded node back in use (one a fault excluded must never return by accident)."""
    sweep = await engine.store.sweeps.get(sweep_id)
    if sweep.state != SweepState.AWAITING_DECISION:
        raise InvalidTransition(f"sweep {sweep_id} is {sweep.state}; only a sweep awaiting a "
                                "decision can be resumed")
    await _not_refused_by_spec(engine, sweep)
    pinned = set(expand_nodes(sweep.spec["nodes"]))
    for key, nodes in (("exclude", exclude), ("readmit", readmit)):
        strangers = sorted(set(nodes) - pinned)
        if strangers:   # a typo would otherwise be recorded and leave the bad node in use
            raise SpecError(f"sweep {sweep_id} is not pinned to {compact_nodes(strangers)}; "
                            f"its nodes are {sweep.spec['nodes']}",
                            [{"loc": [key], "msg": "not nodes of the sweep: "
                              f"{compact_nodes(strangers)}"}])
    current = [e.node for e in await engine.store.exclusions.of_sweep(sweep_id)]
    never = sorted(set(readmit) - set(current))
    if never:   # a typo would otherwise be taken silently, the meant node left out
        raise SpecError(f"sweep {sweep_id} has not excluded {compact_nodes(never)}; excluded: "
                        f"{compact_nodes(current) if current else 'none'}",
                        [{"loc": ["readmit"], "msg": f"not excluded: {compact_nodes(never)}"}])
    back = set(readmit)
    wanted = [n for n in dict.fromkeys([*current, *exclude]) if n not in back]
    _enough_left(engine, sweep, wanted)
    if exclude or readmit:
        await engine.store.exclusions.set(sweep_id, wanted, "set on resume")
    await engine.store.sweeps.transition(sweep_id, SweepState.RUNNING, "resumed by a person",
                                               rule="person.resume",
                                               progress=f"sweep {sweep_id} resumed")
    engine.mark(sweep_id)
    engine.notify()


async def _not_refused_by_spec(engine: EngineParts, sweep: Sweep) -> None:
    """A sweep stopped because its spec makes a submission impossible (a job name over the
    toolkit's limit even with every override carried) would be refused again at once: say
    so, nothing recorded."""
    stops = [e for e in await engine.store.events.of_sweep(sweep.id, kind="transition")
             if e.to_state == SweepState.AWAITING_DECISION]
    if not stops or stops[-1].rule != SPEC_REFUSED:
        return
    what = (f"sweep {sweep.id} stopped because its spec cannot be submitted "
            f"({stops[-1].evidence or stops[-1].reason}); a resume would be refused the same "
            "way: correct the spec (`sweepd validate` checks it offline), submit it as a new "
            f"sweep, and abort this one")
    raise SpecError(what, [{"loc": [], "msg": what}])


def _nodes_short(engine: EngineParts, sweep: Sweep, excluded: Sequence[str]) -> int:
    """How many usable nodes the sweep lacks with these exclusions (0: enough)."""
    spec = engine.spec_of(sweep)
    pinned = spec.node_list if spec.nodes else []   # a slot not resolved to nodes: none
    left = [n for n in pinned if n not in set(excluded)]
    return max(0, spec.needed_nodes - len(left))


def _enough_left(engine: EngineParts, sweep: Sweep, excluded: Sequence[str]) -> None:
    """A resume that leaves fewer usable nodes than the sweep needs would stop again at
    once: refuse it, nothing recorded."""
    if _nodes_short(engine, sweep, excluded) == 0:
        return
    spec = engine.spec_of(sweep)
    left = [n for n in spec.node_list if n not in set(excluded)]
    why = "its min_nodes" if spec.min_nodes else f"{spec.model} on these nodes"
    what = (f"sweep {sweep.id} would have {len(left)} usable node(s) of its "
            f"{len(spec.node_list)} pinned ({compact_nodes(left) if left else 'none'}); "
            f"{why} needs {spec.needed_nodes}: readmit a node (--readmit NODE), or abort")
    raise SpecError(what, [{"loc": ["exclude"], "msg": what}])


async def release(engine: EngineParts, sweep: Sweep) -> None:
    """An ended sweep gives back what its kind made for it (e.g. checkouts of its commits). A
    failure is recorded, never raised: the sweep's verdict stands."""
    hook = kind_of(sweep.kind).workspace.release
    if hook is None:
        return
    try:
        removed = await hook(engine.spec_of(sweep), engine.outputs / f"sweep-{sweep.id}")
    except (GitError, OSError, SpecError) as e:
        await engine.store.events.add(sweep.id, "note", f"could not remove the sweep's "
                                            f"checkouts: {e}", rule="checkouts.release_failed",
                                            evidence=str(e))
        return
    if removed:
        await engine.store.events.add(sweep.id, "note", f"removed the sweep's {len(removed)} "
                                            "checkout(s)", rule="checkouts.released",
                                            evidence=", ".join(str(p) for p in removed))


async def release_ended(engine: EngineParts) -> None:
    """`release` for every ended sweep that still holds something (only kinds with a
    `workspace.release` hook are asked)."""
    ended = await engine.store.sweeps.all([SweepState.DONE, SweepState.FAILED,
                                              SweepState.ABORTED])
    for sweep in ended:
        if sweep.kind in kinds() and kinds()[sweep.kind].workspace.release is not None:
            await release(engine, sweep)


async def abort(engine: EngineParts, sweep_id: int, reason: str = "aborted by a person") -> None:
    sweep = await engine.store.sweeps.get(sweep_id)
    if sweep.state in (SweepState.DONE, SweepState.FAILED, SweepState.ABORTED):
        raise InvalidTransition(f"sweep {sweep_id} is already {sweep.state}")
    async with engine.store.tx():
        await end_open_work(engine, sweep_id, reason, "person.abort")
        note = await end_note(engine, sweep, ended=True)
        await engine.store.sweeps.transition(sweep_id, SweepState.ABORTED, reason,
                                                   rule="person.abort",
                                                   progress=f"sweep {sweep_id}: {reason}"
                                                   + (f"\n\n{note}" if note else ""))
    await engine.flush_cancels()
    await release(engine, sweep)
    engine.notify()
