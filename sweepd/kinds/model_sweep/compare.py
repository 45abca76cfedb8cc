"""A model sweep's results compared: each commit's results as a column, and the SKILL.md's
judgement of each model x node count between adjacent columns (regressions, new breakage,
pre-existing failures, fixes, a broken commit)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from sweepd.kinds.model_sweep.matrix import key_of
from sweepd.store.rows import Job, Run

NO_REGRESSION_PCT = 2.0     # |Δ| within this: no regression
REGRESSION_PCT = 5.0        # Δ below minus this: a flagged regression


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
                    "delta_pct": delta_pct(before, cur), "failure": failure_of(cur)})
    return {**found, "broken_commits": [c.commit for c in columns[since:] if broken(c)]}


def failure_of(result: Mapping[str, Any]) -> str | None:
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
