"""A model sweep's matrix: the commits it runs (each with its resolved SHA and tag), the
nodes of each model x node count, and the runs that cover it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import hostlist

from sweepd.kinds.api import NewRun
from sweepd.kinds.model_sweep.rules import MATRIX
from sweepd.store.rows import RunParams

if TYPE_CHECKING:
    from sweepd.kinds.model_sweep.spec import ModelSweepSpec


def key_of(model: str, nodes: int) -> str:
    return f"{model} {nodes}N"


@dataclass(frozen=True)
class Commit:
    ref: str      # as the user gave it
    commit: str   # what the job runs: the SHA when a repo resolved it, else the ref
    tag: str      # job-name tag and column label


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
                nodes=nodes, rule=MATRIX.id,
                reason=f"{key} at {c.ref}" + (f" ({c.commit[:12]})" if c.commit != c.ref else "")
                + f" on {hostlist.collect_hostlist(nodes)}: {why}"))
    return out
