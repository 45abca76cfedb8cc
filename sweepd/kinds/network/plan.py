"""The network sweep's planner: multi-node runs over subsets of the pinned nodes, isolating a
bad node (NIC) or a bad link between two nodes. The group-testing logic is in isolation.py;
this module turns runs into results and the outcome into a verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hostlist

from sweepd.kinds.api import Finished, GatherError, NewRun, Plan, SweepContext
from sweepd.kinds.network.isolation import advance
from sweepd.kinds.network.judge import Fault, Group, Judge, Outcome, Test
from sweepd.kinds.network.rules import ROLES
from sweepd.kinds.network.spec import NetworkSpec, failure_only_note
from sweepd.kinds.node_perf import exports as node_perf
from sweepd.kinds.registry import NO_CONTEXT, GatherContext
from sweepd.store.rows import Expected, Run, RunParams
from sweepd.store.store import NotFound, Store
from sweepd.util.hostlists import expand_nodes


@dataclass(frozen=True)
class NetworkFacts:
    # The node perf sweep cross-referenced: {sweep, median, status: {node: band},
    # delta: {node: vs the median}}; None: there is none.
    node_perf: Mapping[str, Any] | None = None


async def gather(store: Store, spec: NetworkSpec, where: GatherContext = NO_CONTEXT
                 ) -> NetworkFacts:
    """The node perf sweep to cross-reference: named, or the latest done covering our nodes."""
    if spec.node_perf_sweep is not None:
        try:
            candidates = [await store.sweeps.get(spec.node_perf_sweep)]
        except NotFound:
            raise GatherError(f"node_perf_sweep {spec.node_perf_sweep} does not exist") from None
    else:
        candidates = await node_perf.done_covering(store, spec.node_list)
    for sweep in candidates:
        found = node_perf.node_verdicts(sweep)
        if found is not None:
            return NetworkFacts(node_perf=found.as_dict())
    if spec.node_perf_sweep is not None:
        raise GatherError(f"sweep {spec.node_perf_sweep} is not a finished node perf sweep")
    return NetworkFacts()


def _hl(nodes: Sequence[str]) -> str:
    return str(hostlist.collect_hostlist(list(nodes)))


# A failure-only group that trained: no TGS was measured (the judge ignores the number).
TRAINED = 0.0


def results_of(runs: Sequence[Run]) -> tuple[dict[Group, float | None], set[Group]]:
    """Finished groups -> TGS (None: the job failed or hung; TRAINED: it ran, failure-only
    with no TGS), and the groups in flight."""
    done: dict[Group, float | None] = {}
    busy: set[Group] = set()
    for r in runs:
        group = frozenset(expand_nodes(r.nodes))
        if r.state == "passed":
            done[group] = r.tgs if r.tgs is not None else TRAINED
        elif r.state == "failed":
            done[group] = None
        else:
            busy.add(group)
    return done, busy


def reference(spec: NetworkSpec, facts: NetworkFacts,
              runs: Sequence[Run] = ()) -> tuple[float | None, str]:
    """The expected TGS the groups are judged by. Chosen when the first job is planned and
    recorded with every run: a node perf sweep finishing mid-sweep must not change how the
    groups already run are judged (the planner replays them)."""
    if runs and (first := runs[0].params.expected) is not None:
        return first.tgs, first.source
    if spec.expected_tgs is not None:
        return spec.expected_tgs, "the spec's expected_tgs (1 node)"
    perf = facts.node_perf
    if perf:
        return float(perf["median"]), f"node perf sweep {perf['sweep']} (median, 1 node)"
    return None, ("the best group seen, scaled to each size (no absolute reference: the "
                  "whole group is judged by its halves)")


def _params(spec: NetworkSpec, ref: float | None, source: str) -> RunParams:
    synthetic = {} if "dataset_type" in spec.overrides else {"dataset_type": "synthetic"}
    return RunParams(expected=Expected(tgs=ref, source=source), overrides=synthetic)


def plan(spec: NetworkSpec, ctx: SweepContext[NetworkFacts]) -> Plan:
    ref, source = reference(spec, ctx.facts, ctx.runs)
    if spec.failure_only:
        ref, source = None, failure_only_note(spec)
    judge = Judge(ref, spec.tolerance, spec.scaling, failure_only=spec.failure_only)
    done, busy = results_of(ctx.runs)
    step = advance(list(ctx.nodes), done, judge)
    if isinstance(step, Outcome):
        return finish(spec, step, source, ctx.facts.node_perf)
    mode = f"; {failure_only_note(spec)}" if spec.failure_only else ""
    return [NewRun(f"{role} {_hl(sorted(g))}", _params(spec, ref, source), sorted(g),
                   f"{role} test of {len(g)} nodes (wave {step.rounds + 1}){mode}",
                   ROLES[role].id) for g, role in step.groups if g not in busy]


def _diagnosis(fault: Fault, perf: Mapping[str, Any] | None) -> str:
    nodes = " and ".join(fault.nodes)
    if fault.kind == "link":
        return f"bad link between {nodes}"
    if fault.kind == "pair":
        return f"{nodes}: one of them or the link between them (no known-good node to tell)"
    if fault.kind == "group":
        return f"{', '.join(fault.nodes)}: degraded together (no known-good node to narrow it)"
    node = fault.nodes[0]
    if perf is None:
        return f"bad node {node} (its NIC; no node perf sweep to cross-check)"
    status = perf.get("status", {}).get(node)
    delta = perf.get("delta", {}).get(node)
    shown = f" {delta:+.1%}" if isinstance(delta, float) else ""
    if status in ("degraded", "marginal", "unhealthy"):
        return (f"slow node {node}: its GPUs are slow on their own too (node perf sweep "
                f"{perf['sweep']}: {status}{shown})")
    return f"bad node {node} (its NIC: healthy alone in node perf sweep {perf['sweep']}{shown})"


def test_row(t: Test) -> dict[str, Any]:
    delta = t.tgs / t.expected - 1 if t.tgs is not None and t.expected else None
    return {"wave": t.wave, "role": t.role, "nodes": _hl(sorted(t.group)), "size": len(t.group),
            "tgs": t.tgs, "expected": t.expected, "delta": delta,
            "status": "DEGRADED" if t.degraded else "healthy"}


def finish(spec: NetworkSpec, out: Outcome, source: str,
           perf: Mapping[str, Any] | None) -> Finished:
    diagnoses = [_diagnosis(f, perf) for f in out.faults]
    faults: list[dict[str, Any]] = [
        {"kind": f.kind, "nodes": list(f.nodes), "evidence": list(f.evidence), "diagnosis": d}
        for f, d in zip(out.faults, diagnoses, strict=True)]
    drop = [f.nodes[0] for f in out.faults if f.kind == "node"]
    split = [f.nodes[-1] for f in out.faults if f.kind == "link"]
    # Unresolved: which node (or link) is bad is unknown, so none of them is usable.
    suspects = [n for f in out.faults if f.kind in ("pair", "group") for n in f.nodes]
    keep = [n for n in spec.node_list if n not in {*drop, *split, *suspects}]
    whole_bad = any(t.role == "whole" and t.degraded for t in out.tests)
    rows = [test_row(t) for t in out.tests]
    if spec.failure_only:   # nothing was measured: no TGS column to show
        rows = [{**r, "tgs": None, "delta": None} for r in rows]
    verdict: dict[str, Any] = {
        "expected_source": source, "absolute": out.absolute, "rounds": out.rounds,
        "jobs": len(out.tests), "tests": rows, "faults": faults,
        "failure_only": spec.failure_only,
        "exclude": drop, "split_links": split, "suspects": suspects,
        "healthy": _hl(keep) if keep else "",
    }
    if not faults:
        what = ("the whole group is degraded but no single node or link explains it "
                "(shared infrastructure? report to the HW team)" if whole_bad
                else "no network issue" if out.absolute
                else "no group slower than the others (without a reference, faults that "
                "slow every half alike cannot be seen: set expected_tgs or run a node perf "
                "sweep first)")
        if spec.failure_only and not whole_bad:
            what = f"every group trained ({failure_only_note(spec)})"
        verdict["recommendation"] = what
        return Finished(True, f"network: {what} ({out.rounds} rounds, {len(out.tests)} jobs)",
                        verdict)
    advice = [f"exclude {', '.join(drop)}"] if drop else []
    advice += [f"keep {f.nodes[0]} and {f.nodes[1]} out of the same job (e.g. exclude "
               f"{f.nodes[-1]}) and escalate the link to the infrastructure team"
               for f in out.faults if f.kind == "link"]
    advice += [f"exclude {', '.join(f.nodes)} until they are checked one by one "
               "(could not tell which is bad)" for f in out.faults if f.kind in ("pair", "group")]
    verdict["recommendation"] = "; ".join(advice) + (f"; usable: -w {_hl(keep)}" if keep else "")
    summary = "; ".join(diagnoses) + (f"; {failure_only_note(spec)}" if spec.failure_only
                                       else "")
    return Finished(True, f"network: {summary} ({out.rounds} rounds, {len(out.tests)} jobs)",
                    verdict)


# A failed group job is that group's result (degraded), not a reason to drop a node from it.
