"""Model sweep planning: every model x node count on one or two commits, compared.

Pure: the runs so far, the commits' resolved SHAs and earlier sweeps' results (gathered by
the kind) in; new runs, a fail-fast stop, or the verdict out (batch-sweep.SKILL.md
"Model sweep" Steps 2-6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import hostlist

from sweepd.kinds.api import Finished, Plan, Stop, SweepContext, open_runs
from sweepd.kinds.model_sweep.compare import (
    Column,
    broken,
    columns_of,
    evaluate,
    failure_of,
    newly_broken,
    passed,
)
from sweepd.kinds.model_sweep.matrix import Commit, commits_of, new_runs, node_layout
from sweepd.kinds.model_sweep.rules import ALL_FAIL, FAIL_FAST
from sweepd.store.rows import Run

if TYPE_CHECKING:
    from sweepd.kinds.model_sweep.spec import ModelSweepSpec

FAIL_FAST_MODELS = 2        # models newly broken on a commit before the sweep stops
FAIL_FAST_RULE = FAIL_FAST.id
# batch-sweep.SKILL.md Step 6, "All models fail -> Stop": the first jobs of a commit all
# failing the same way, none passing, is the commit (no baseline needed to see it). It is
# about models: one model's 1N and 2N jobs failing alike say nothing of the others, so the
# failed jobs must span two models (or every model of a spec with fewer).
ALL_FAIL_JOBS = 2
ALL_FAIL_MODELS = 2
ALL_FAIL_RULE = ALL_FAIL.id


@dataclass(frozen=True)
class SweepFacts:
    """What gather found: each ref's commit now (refs move; runs record what ran) and the
    earlier sweeps' columns, oldest first (`compare_to`)."""

    shas: Mapping[str, str] = field(default_factory=dict)
    history: tuple[Column, ...] = ()


def plan(spec: ModelSweepSpec, ctx: SweepContext[SweepFacts]) -> Plan:
    commits = commits_of(spec.commits, ctx.facts.shas)
    history = list(ctx.facts.history)
    prior = {k: hostlist.expand_hostlist(v) for col in history for k, v in col.nodes.items()}
    if not ctx.runs:
        layout = node_layout(spec.matrix, spec.node_list, prior)
        kept = [k for k, v in layout.items() if prior.get(k) == v]
        return new_runs(spec, commits, layout, kept)
    columns = [*history, *columns_of(None, ctx.runs)]
    if open_runs(ctx.runs):
        # All-fail judges only a commit with no column before it: every later one has a
        # baseline, where fail-fast's "newly broken" decides (else the two rules would race
        # on which jobs happen to end first).
        unjudged = columns[:1] if not history else []
        stop = (_fail_fast(columns, history, ctx.acknowledged_stops)
                or _all_fail(unjudged, open_runs(ctx.runs), ctx.acknowledged_stops,
                             len(spec.matrix)))
        return stop if stop is not None else []
    return _finish(commits, history, columns)


def _fail_fast(columns: Sequence[Column], history: Sequence[Column],
               acknowledged: Iterable[str]) -> Stop | None:
    """2+ models failing on a commit that passed on the one before: the commit is broken;
    stop and ask (a person may resume, and is then not asked again)."""
    if FAIL_FAST_RULE in acknowledged:  # a person saw this stop and resumed: go on
        return None
    fresh = {c.commit for c in columns[len(history):]}
    for commit, models in newly_broken(columns).items():
        if commit in fresh and len(models) >= FAIL_FAST_MODELS:
            summary = (f"fail-fast: {len(models)} models fail on {commit} that passed on the "
                       f"baseline ({', '.join(models)}); the commit is clearly broken — "
                       "stopping before the remaining jobs")
            return Stop(summary, FAIL_FAST_RULE, evidence=f"newly broken on {commit}: "
                        f"{', '.join(models)}")
    return None


def _model_of(key: str) -> str:
    return key.rsplit(" ", 1)[0]


def _all_fail(fresh: Sequence[Column], left: Sequence[Run], acknowledged: Iterable[str],
              spec_models: int) -> Stop | None:
    """A commit whose first finished jobs (at least two, of at least two distinct models, or
    every model of a spec with fewer) all failed the same way and none passed: every model
    fails there, whatever the baseline says (a single commit has none); stop before the
    rest (the 8-node jobs queued behind) and ask."""
    if ALL_FAIL_RULE in acknowledged:   # a person saw this stop and resumed: go on
        return None
    need = min(ALL_FAIL_MODELS, spec_models)
    for col in fresh:
        results = col.results
        ways = {failure_of(r) for r in results.values()}
        models = sorted({_model_of(k) for k in results})
        if len(results) < ALL_FAIL_JOBS or len(models) < need \
                or any(passed(r) for r in results.values()) or len(ways) != 1:
            continue
        way = next(iter(ways))
        keys = sorted(results, key=lambda k: int(k.rsplit(" ", 1)[1].rstrip("N")))
        pending = [r for r in left if (r.params.tag or r.params.commit) == col.commit]
        span = (f"{len(models)} distinct model(s) ({', '.join(models)}) of the spec's "
                f"{spec_models}; the rule needs at least {need}")
        summary = (f"all models fail on {col.commit} so far: its first {len(results)} jobs "
                   f"({', '.join(keys)}), of {span}, all failed the same way ({way}) and "
                   "none passed — the commit looks broken (the SKILL.md: all models fail -> "
                   f"stop); stopping before its {len(pending)} remaining job(s)")
        evidence = f"{span}; " + "; ".join(
            f"{k}: {way} (job {results[k].get('job') or '?'})" for k in keys)
        return Stop(summary, ALL_FAIL_RULE, evidence=evidence)
    return None


def _finish(commits: Sequence[Commit], history: Sequence[Column],
            columns: Sequence[Column]) -> Finished:
    found = evaluate(columns, since=len(history))
    current = columns[len(history):]
    verdict: dict[str, Any] = {
        "commits": [asdict(c) for c in commits], "evaluation": found,
        "history": [c.as_dict() for c in history]}
    total = sum(len(c.results) for c in current)
    head = f"{len(current)} commit{'s' if len(current) != 1 else ''}, {total} jobs"
    dead = [c.commit for c in current if broken(c)]
    if dead:
        return Finished(False, f"{head}: every model failed on {', '.join(dead)} — the commit "
                               "is broken", verdict)
    parts = [f"{len(found[k])} {what}" for k, what in (
        ("regressions", "regression(s) >5%"), ("new_breakage", "new breakage(s)"),
        ("pre_existing", "pre-existing failure(s)"), ("failures", "failure(s)")) if found[k]]
    flagged = [f"{x['key']} @{x['commit']}" for x in found["regressions"] + found["new_breakage"]]
    if not parts:
        return Finished(True, f"{head}: all passed" + (", no regression" if len(columns) > 1
                                                        else ""), verdict)
    return Finished(True, f"{head}: {', '.join(parts)}"
                    + (f" — flagged: {', '.join(flagged)}" if flagged else ""), verdict)
