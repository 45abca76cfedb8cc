"""Model sweep planning: every model x node count on one or two commits, compared.

Pure: the runs so far, the commits' resolved SHAs and earlier sweeps' results (gathered by
the kind) in; new runs, a fail-fast stop, or the verdict out (batch-sweep.SKILL.md
"Model sweep" Steps 2-6).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import hostlist

from sweepd.kinds.api import Finished, NewRun, Plan, Stop, SweepContext, open_runs
from sweepd.store.rows import Job, Run, RunParams

if TYPE_CHECKING:
    from sweepd.kinds.model_sweep.spec import ModelSweepSpec

NO_REGRESSION_PCT = 2.0     # |Δ| within this: no regression
REGRESSION_PCT = 5.0        # Δ below minus this: a flagged regression
FAIL_FAST_MODELS = 2        # models newly broken on a commit before the sweep stops
FAIL_FAST_RULE = "model_sweep.fail_fast"
# batch-sweep.SKILL.md Step 6, "All models fail -> Stop": the first jobs of a commit all
# failing the same way, none passing, is the commit (no baseline needed to see it). It is
# about models: one model's 1N and 2N jobs failing alike say nothing of the others, so the
# failed jobs must span two models (or every model of a spec with fewer).
ALL_FAIL_JOBS = 2
ALL_FAIL_MODELS = 2
ALL_FAIL_RULE = "model_sweep.all_fail"


def key_of(model: str, nodes: int) -> str:
    return f"{model} {nodes}N"


@dataclass(frozen=True)
class Commit:
    ref: str      # as the user gave it
    commit: str   # what the job runs: the SHA when a repo resolved it, else the ref
    tag: str      # job-name tag and column label


@dataclass(frozen=True)
class Column:
    """One commit's results in one sweep: a row of every per-model table."""

    sweep: int | None
    commit: str                       # the tag, for display
    sha: str
    results: dict[str, dict[str, Any]] = field(default_factory=dict)   # key -> result
    nodes: dict[str, str] = field(default_factory=dict)                # key -> hostlist

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Column:
        return cls(d.get("sweep"), str(d["commit"]), str(d["sha"]), dict(d.get("results", {})),
                   dict(d.get("nodes", {})))


def _tag(ref: str, sha: str) -> str:
    if re.fullmatch(r"[0-9a-f]{7,40}", ref) and sha.startswith(ref):
        return sha[:8]
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", ref).strip("-")
    return clean[:40] or sha[:8]


def commits_of(refs: Sequence[str], shas: Mapping[str, str]) -> list[Commit]:
    """Without a repo (the simulated cluster) a commit is just its label."""
    out = [Commit(r, shas.get(r, r), _tag(r, shas.get(r, r))) for r in refs]
    if len({c.tag for c in out}) < len(out):  # e.g. `a/b` and `a-b`: tell them apart
        out = [Commit(c.ref, c.commit, f"{c.tag}-{c.commit[:8]}") for c in out]
    return out


def node_layout(matrix: Mapping[str, Sequence[int]], pinned: Sequence[str],
                prior: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[str]]:
    """Node list per model x node count. Sub-full counts get disjoint blocks aligned to their
    size (1N=[n1], 2N=[n3,n4], 4N=[n5..n8] on 8 nodes, as in the SKILL.md) so they run in
    parallel; the full count uses every node. A list an earlier sweep used is kept when it is
    still pinned, since hardware variance between nodes invalidates TGS comparisons."""
    full = len(pinned)
    taken: set[int] = set()
    block: dict[int, list[str]] = {}
    for n in sorted({n for counts in matrix.values() for n in counts}):
        start = next((s for s in range(0, full - n + 1, n)
                      if n < full and taken.isdisjoint(range(s, s + n))), 0)
        if n < full and taken.isdisjoint(range(start, start + n)):
            taken.update(range(start, start + n))
        block[n] = list(pinned[start:start + n])
    layout: dict[str, list[str]] = {}
    for model, counts in matrix.items():
        for n in counts:
            key = key_of(model, n)
            kept = list((prior or {}).get(key, ()))
            layout[key] = kept if len(kept) == n and set(kept) <= set(pinned) else block[n]
    return layout


# -- results ------------------------------------------------------------------------------

def _result(run: Run, job: Job | None) -> dict[str, Any]:
    return {"job": job.backend_id if job else None, "tgs": run.tgs, "mfu": run.mfu,
            "outcome": run.outcome, "failure_class": run.failure_class, "detail": run.detail}


def _key_of_run(run: Run) -> str:
    return key_of(str(run.params.model), run.node_count)


def columns_of(sweep_id: int | None, runs: Sequence[Run], jobs: Sequence[Job] = ()
               ) -> list[Column]:
    """One column per commit of a sweep, in submission order; finished runs only."""
    last_job = {j.run_id: j for j in jobs}  # in id order: the last attempt wins
    cols: dict[str, Column] = {}
    for run in sorted(runs, key=lambda r: r.seq):
        params = run.params
        tag = params.tag or params.commit or "?"
        col = cols.setdefault(tag, Column(sweep_id, tag, params.commit or tag))
        key = _key_of_run(run)
        col.nodes[key] = run.nodes
        if run.state in ("passed", "failed"):
            col.results[key] = _result(run, last_job.get(run.id))
    return list(cols.values())


def passed(result: Mapping[str, Any] | None) -> bool:
    return result is not None and result.get("outcome") == "pass" and result.get("tgs") is not None


def delta_pct(prev: Mapping[str, Any] | None, cur: Mapping[str, Any] | None) -> float | None:
    if not (passed(prev) and passed(cur)) or not prev or not cur or not prev["tgs"]:
        return None
    return (float(cur["tgs"]) / float(prev["tgs"]) - 1.0) * 100.0


def judge(prev: Mapping[str, Any] | None, cur: Mapping[str, Any] | None) -> str:
    """The SKILL.md's multi-sweep evaluation of one model x node count between two sweeps."""
    if cur is None:
        return "not run"
    if not passed(cur):
        if prev is None:
            return "FAIL"
        return "pre-existing failure" if not passed(prev) else "NEW BREAKAGE"
    if prev is None:
        return "PASS"
    if not passed(prev):
        return "fixed"
    d = delta_pct(prev, cur)
    assert d is not None
    if d < -REGRESSION_PCT:
        return "REGRESSION"
    if abs(d) <= NO_REGRESSION_PCT:
        return "no regression"
    return "faster" if d > 0 else "slower (within 5%)"


def broken(col: Column) -> bool:
    """Every model failed on this commit: the commit itself is broken."""
    return bool(col.results) and not any(passed(r) for r in col.results.values())


def evaluate(columns: Sequence[Column], since: int = 0) -> dict[str, Any]:
    """Findings over adjacent pairs of columns, oldest first, for the columns from `since`
    on: an earlier sweep's columns are compared with, not judged again."""
    found: dict[str, list[dict[str, Any]]] = {
        "regressions": [], "new_breakage": [], "pre_existing": [], "fixed": [], "failures": []}
    where = {"REGRESSION": "regressions", "NEW BREAKAGE": "new_breakage",
             "pre-existing failure": "pre_existing", "fixed": "fixed", "FAIL": "failures"}
    for i, col in enumerate(columns):
        if i < since:
            continue
        prev = columns[i - 1] if i else None
        for key, cur in col.results.items():
            before = prev.results.get(key) if prev else None
            verdict = judge(before, cur)
            if verdict in where:
                found[where[verdict]].append({
                    "key": key, "sweep": col.sweep, "commit": col.commit,
                    "delta_pct": delta_pct(before, cur), "failure": _failure(cur)})
    return {**found, "broken_commits": [c.commit for c in columns[since:] if broken(c)]}


def _failure(result: Mapping[str, Any]) -> str | None:
    if passed(result):
        return None
    return str(result.get("failure_class") or result.get("outcome") or "failed")


def newly_broken(columns: Sequence[Column]) -> dict[str, list[str]]:
    """Per commit, the models that failed there but passed in the column before it."""
    out: dict[str, list[str]] = {}
    for prev, col in pairwise(columns):
        models = sorted({key.rsplit(" ", 1)[0] for key, r in col.results.items()
                         if not passed(r) and passed(prev.results.get(key))})
        if models:
            out[col.commit] = models
    return out


# -- the plan -----------------------------------------------------------------------------

def new_runs(spec: ModelSweepSpec, commits: Sequence[Commit], layout: Mapping[str, list[str]],
             kept: Iterable[str]) -> list[NewRun]:
    """Sub-full jobs first, each commit's run of a key next to the other's, so that disjoint
    subsets run at once, full-size jobs queue behind, and pairs land early for fail-fast."""
    full = len(spec.node_list)
    kept = set(kept)
    keys = sorted(((m, n) for m, counts in spec.matrix.items() for n in counts),
                  key=lambda mn: mn[1] == full)
    out = []
    for model, n in keys:
        key = key_of(model, n)
        nodes = layout[key]
        why = ("the node list of the earlier sweep, for comparable TGS" if key in kept else
               "all pinned nodes" if n == full else f"a {n}-node block disjoint from the "
               "other sub-full jobs, so they run in parallel")
        for c in commits:
            out.append(NewRun(
                label=f"{key} @{c.tag}",
                params=RunParams(model=model, commit=c.commit, tag=c.tag,
                                 overrides={"steps": spec.steps, "dataset_type": "synthetic"}),
                nodes=nodes, rule="model_sweep.matrix",
                reason=f"{key} at {c.ref}" + (f" ({c.commit[:12]})" if c.commit != c.ref else "")
                + f" on {hostlist.collect_hostlist(nodes)}: {why}"))
    return out


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
        ways = {_failure(r) for r in results.values()}
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
