"""The model sweep's report (batch-sweep.SKILL.md "Model sweep" Steps 5-6).

One commit and no earlier sweep: the single-commit table. Two commits or a series of
sweeps (`compare_to`): one table per model x node count, every sweep's commit a row with
Δ vs the row before, then the evaluation (regressions, new breakage vs pre-existing).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from sweepd.kinds.model_sweep.compare import (
    Column,
    broken,
    columns_of,
    delta_pct,
    evaluate,
    judge,
    passed,
)
from sweepd.kinds.model_sweep.matrix import key_of
from sweepd.kinds.model_sweep.plot import grouped_bars_plot
from sweepd.store.rows import Job, Run, Sweep


def _columns(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[Column]:
    past = [Column.from_dict(c) for c in (sweep.verdict or {}).get("history", [])]
    return [*past, *columns_of(sweep.id, runs, jobs)]


def _keys(sweep: Sweep, columns: Sequence[Column]) -> list[str]:
    # Run order (sub-full jobs first, as submitted); the stored spec's keys may be sorted.
    keys = [k for c in columns for k in c.nodes]
    matrix = sweep.spec.get("matrix") or {}
    keys += [key_of(m, n) for m, counts in matrix.items() for n in counts]
    return list(dict.fromkeys(keys))


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    columns = _columns(sweep, runs, jobs)
    out = []
    for key in _keys(sweep, columns):
        model, nodes = key.rsplit(" ", 1)
        prev: dict[str, Any] | None = None
        for i, col in enumerate(columns):
            cur = col.results.get(key)
            if cur is None and col.sweep != sweep.id:
                continue  # an earlier sweep without this entry: nothing to show
            status = judge(prev, cur) if len(columns) > 1 else _single(cur)
            out.append({"key": key, "model": model, "nodes": int(nodes[:-1]), "row": i + 1,
                        "sweep": col.sweep, "commit": col.commit, "sha": col.sha,
                        "node_list": col.nodes.get(key), **(cur or {"job": None}),
                        "delta_pct": delta_pct(prev, cur), "status": status})
            prev = cur if cur is not None else prev
    return out


def _single(cur: dict[str, Any] | None) -> str:
    if cur is None:
        return "not run"
    return "PASS" if passed(cur) else "FAIL"


def _commit(row: dict[str, Any]) -> str:
    """The ref as given, and the commit it was (refs move; without a repo they are labels)."""
    sha = str(row.get("sha") or "")
    return f"{row['commit']} ({sha[:8]})" if sha and not sha.startswith(row["commit"]) else \
        str(row["commit"])


def _num(v: float | None, fmt: str) -> str:
    return format(v, fmt) if v is not None else "—"


def _what(row: dict[str, Any]) -> str:
    status = str(row["status"])
    if row.get("outcome") == "pass" or status == "not run":
        return status
    return f"{status} ({row.get('failure_class') or row.get('outcome') or 'failed'})"


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    columns = _columns(sweep, runs, jobs)
    table = rows(sweep, runs, jobs)
    if len(columns) <= 1:
        lines = ["| Model | Nodes | Job | Avg TGS/device | Avg MFU | Status |",
                 "|-------|-------|-----|----------------|---------|--------|"]
        lines += [f"| {r['model']} | {r['nodes']}N | {r['job'] or '—'} | "
                  f"{_num(r.get('tgs'), ',.0f')} | {_num(r.get('mfu'), '.1f')}"
                  f"{'%' if r.get('mfu') is not None else ''} | {_what(r)} |" for r in table]
    else:
        lines = []
        for key in dict.fromkeys(r["key"] for r in table):
            model, nodes = key.rsplit(" ", 1)
            # Kept the same in every sweep (persisted), so that the rows stay comparable.
            where = next((r["node_list"] for r in table if r["key"] == key and r["node_list"]),
                         None)
            lines += [f"### {model} ({nodes}{f' on {where}' if where else ''})", "",
                      "| Sweep | Commit | Job | TGS | Δ vs row above | Status |",
                      "|-------|--------|-----|-----|----------------|--------|"]
            for r in (r for r in table if r["key"] == key):
                d = r["delta_pct"]
                lines.append(f"| #{r['sweep']} | {_commit(r)} | {r['job'] or '—'}"
                             f" | {_num(r.get('tgs'), ',.0f')} | "
                             f"{'—' if d is None else f'{d:+.1f}%'} | {_what(r)} |")
            lines.append("")
    since = len((sweep.verdict or {}).get("history", []))
    return "\n".join([*lines, "", *evaluation(columns, since)]).rstrip()


def evaluation(columns: Sequence[Column], since: int = 0) -> list[str]:
    """The SKILL.md Step 6 outcome of this sweep's columns (from `since`: the ones before
    are earlier sweeps, compared with), regressions and breakage first."""
    if not any(c.results for c in columns[since:]):
        return ["Evaluation: no job has finished yet."]
    found = evaluate(columns, since)
    out = ["## Evaluation", ""]
    for c in columns[since:]:
        if broken(c):
            out.append(f"- **{c.commit}: every model failed — the commit is broken.**")
    for x in found["regressions"]:
        out.append(f"- **Regression** {x['key']} at {x['commit']}: {x['delta_pct']:+.1f}% TGS "
                   "vs the commit before it (more than 5%)")
    for x in found["new_breakage"]:
        out.append(f"- **New breakage** {x['key']} at {x['commit']} ({x['failure']}): passed "
                   "on the commit before it")
    for x in found["pre_existing"]:
        out.append(f"- Pre-existing failure {x['key']} at {x['commit']} ({x['failure']}): "
                   "failed on the commit before it too; not blamed on this commit")
    for x in found["fixed"]:
        out.append(f"- Fixed {x['key']} at {x['commit']}: failed on the commit before it")
    for x in found["failures"]:
        out.append(f"- Failed {x['key']} at {x['commit']} ({x['failure']})")
    if len(out) == 2:
        judged = columns[max(since - 1, 0):]   # this sweep's commits and the one before them
        out.append("- All models passed" + (", every Δ within ±2%: no regression"
                                           if len(columns) > 1 and _all_within(judged) else
                                           "" if len(columns) <= 1 else
                                           "; no Δ beyond -5%"))
    return out


def _all_within(columns: Sequence[Column]) -> bool:
    return all(abs(d) <= 2.0 for p, c in pairwise(columns)
               for k in c.results if (d := delta_pct(p.results.get(k), c.results.get(k)))
               is not None)


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """TGS per model x node count, one bar per commit (a failed run: an empty slot)."""
    table = rows(sweep, runs, jobs)
    if not any(r.get("tgs") for r in table):
        return None
    keys = list(dict.fromkeys(r["key"] for r in table))
    commits = list(dict.fromkeys(str(r["commit"]) for r in table))
    value = {(r["key"], str(r["commit"])): r.get("tgs") for r in table}
    series = [(c, [value.get((k, c)) for k in keys]) for c in commits]
    return grouped_bars_plot(keys, series, f"model sweep {sweep.id}: TGS/device per commit")
