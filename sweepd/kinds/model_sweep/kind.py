"""Model sweep: every model config x node count on one commit, or two commits compared."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweepd.kinds.api import GatherError
from sweepd.kinds.model_sweep import plan as model_sweep_plan
from sweepd.kinds.model_sweep import report
from sweepd.kinds.model_sweep.compare import Column, columns_of
from sweepd.kinds.model_sweep.demo import DEMO
from sweepd.kinds.model_sweep.plan import SweepFacts
from sweepd.kinds.model_sweep.spec import ModelSweepSpec
from sweepd.kinds.registry import (
    NO_CONTEXT,
    Budget,
    GatherContext,
    Kind,
    Report,
    Stops,
    Workspace,
)
from sweepd.store.rows import RunParams
from sweepd.store.store import NotFound, Store
from sweepd.util import worktrees

MAX_HISTORY = 20  # earlier sweeps followed through `compare_to`


async def history(store: Store, compare_to: int | None) -> list[Column]:
    """Earlier model sweeps' columns, oldest first, following each sweep's `compare_to`."""
    chain: list[Column] = []
    seen: set[int] = set()
    at = compare_to
    while at is not None and at not in seen and len(seen) < MAX_HISTORY:
        seen.add(at)
        try:
            sweep = await store.sweeps.get(at)
        except NotFound:
            raise ValueError(f"compare_to: sweep {at} does not exist") from None
        if sweep.kind != "model-sweep":
            raise ValueError(f"compare_to: sweep {at} is a {sweep.kind} sweep")
        cols = columns_of(sweep.id, await store.runs.of_sweep(sweep.id),
                          await store.jobs.of_sweep(sweep.id))
        chain[:0] = [c for c in cols if c.results]
        at = sweep.spec.get("compare_to")
    return chain


async def gather(store: Store, spec: ModelSweepSpec, where: GatherContext = NO_CONTEXT
                 ) -> SweepFacts:
    """The commits' SHAs (refs move; runs record what ran) and earlier sweeps' results."""
    try:
        shas = ({} if spec.repo is None else
                {c: await worktrees.resolve(spec.repo, c) for c in spec.commits})
        past = await history(store, spec.compare_to)
    except (worktrees.GitError, ValueError) as e:
        raise GatherError(str(e)) from e
    return SweepFacts(shas=shas, history=tuple(past))


async def workdir(spec: ModelSweepSpec, params: RunParams, sweep_dir: Path) -> Path | None:
    """The checkout of the run's commit under the sweep's directory, made on first use: a
    clone, which the toolkit's submit.sh takes for a repo root. Its jobs' logs still go to
    the configured repo's workspace (the slurm backend sets JOB_WORKSPACE)."""
    if spec.repo is None or not params.commit:
        return None
    return (await worktrees.add(spec.repo, params.commit, sweep_dir / "worktrees")).path


async def release(spec: ModelSweepSpec, sweep_dir: Path) -> list[Path]:
    """The sweep has ended: its checkouts go (its jobs ran from submit.sh's snapshots)."""
    if spec.repo is None:
        return []
    return await worktrees.remove_all(spec.repo, sweep_dir / "worktrees")


def most_runs(spec: Mapping[str, Any]) -> int | None:
    """Every model x node count of the matrix on each commit."""
    matrix = spec.get("matrix")   # stored specs carry their defaults
    if not isinstance(matrix, dict):
        return None
    return sum(len(c) for c in matrix.values()) * len(spec.get("commits") or ["HEAD"])


def most_node_runs(spec: Mapping[str, Any]) -> int | None:
    """Each run takes its node count, not every pinned node."""
    matrix = spec.get("matrix")
    if not isinstance(matrix, dict):
        return None
    counts = [int(n) for c in matrix.values() for n in c]
    return sum(counts) * len(spec.get("commits") or ["HEAD"])


# Stops(on_config_error=False): every model failing the same way is each model's result
# (all failing: the commit is broken), not a reason to stop the sweep.
KIND = Kind("model-sweep", ModelSweepSpec, model_sweep_plan.plan,
            Report(report.markdown, report.rows, one_model=False), gather,
            budget=Budget(runs=most_runs, node_runs=most_node_runs),
            stops=Stops(on_config_error=False), workspace=Workspace(workdir, release),
            plot=report.plot, demo=DEMO)
