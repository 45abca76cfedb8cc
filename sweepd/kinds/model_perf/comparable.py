"""The runs must be comparable before a verdict rests on them: a value run again that read
lower beyond the noise, confirmed by one more run, says the nodes slowed mid-sweep
(`search.slowed`). The sweep then names the runs at one of which the readings fell and
asks, rather than claim an optimum from runs before and after the slowdown."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.api import Stop, SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.probes import latest_jobs, probe_runs
from sweepd.kinds.model_perf.rules import NODES_SLOWED
from sweepd.kinds.model_perf.search import Probe, SearchSpace, Slowdown, slowdown
from sweepd.kinds.model_perf.search.slowed import Pair, pending, slow_bar
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.store.rows import Run

SLOWED_STOP = NODES_SLOWED.id


def slowed_stop(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts], space: SearchSpace,
                seen: list[Probe], runs_left: int) -> Stop | str | None:
    """`space` with the noise the runs' steps show (not what two runs of one value did:
    the drop would raise it and hide itself). A Stop that asks; once a person resumed, the
    caveat the verdict carries; a drop no run was left to confirm, said; else None."""
    found = slowdown(space, seen)
    if found is None:
        left = pending(space, seen) if runs_left < 1 else None
        return None if left is None else (
            f"{_read(spec, probe_runs(spec, ctx), left)}, beyond the noise of two runs' difference "
            f"({slow_bar(space):.1%}); no run was left to tell a node that slowed from the "
            "noise")
    runs = probe_runs(spec, ctx)  # once: every sentence below names runs by their number
    said = _said(spec, runs, space, found)
    if SLOWED_STOP in ctx.acknowledged_stops:
        return (f"{said}; a person resumed the sweep, so its runs were read as one curve "
                "and the best is not an optimum measured on comparable runs")
    return Stop(f"{said}. No optimum is claimed from runs measured before and after it: "
                "check the nodes (rocm-smi clocks and temperature, dmesg), then resume to "
                "go on reading the runs as one curve, or abort and sweep again",
                SLOWED_STOP, evidence=_evidence(runs, ctx, seen, found))


def _read(spec: ModelPerfSpec, runs: Sequence[Run], pair: Pair) -> str:
    return (f"{spec.parameter}={pair.value} read {pair.drop:+.1%} on run "
            f"{runs[pair.again].seq} against its run {runs[pair.first].seq}")


def _said(spec: ModelPerfSpec, runs: Sequence[Run], space: SearchSpace,
          found: Slowdown) -> str:
    a, b = runs[found.since].seq, runs[found.until].seq
    fell = f"run {b}" if a == b else f"one of runs {a}-{b} (no run between shows which)"
    return (f"the nodes slowed: {_read(spec, runs, found.shown)}, beyond the noise of two "
            f"runs' difference ({slow_bar(space):.1%}), and {_read(spec, runs, found.confirmed)}"
            f"; the readings fell at {fell}, so the runs before and after are not one "
            "curve (a node throttling or a degraded GPU slows every job after it)")


def _evidence(runs: Sequence[Run], ctx: SweepContext[PerfFacts], seen: list[Probe],
               found: Slowdown) -> str:
    jobs = latest_jobs(ctx.jobs)
    start = min(found.shown.first, found.confirmed.first)
    end = max(found.shown.again, found.confirmed.again)
    parts = []
    for k in range(start, end + 1):
        job = jobs.get(runs[k].id)
        tgs = seen[k].tgs
        parts.append(f"run {runs[k].seq} {runs[k].label}: "
                     f"{'-' if tgs is None else f'{tgs:,.0f}'} TGS"
                     + (f" (job {job.backend_id})" if job and job.backend_id else ""))
    return "; ".join(parts)
