"""Model sweep: every model config x node count on one commit, or two commits compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from sweepd import worktrees
from sweepd.models import UnknownModel, resolve_model
from sweepd.reports import model_sweep as report
from sweepd.specs import _Spec
from sweepd.store.store import NotFound, Store
from sweepd.strategies import model_sweep_plan
from sweepd.strategies.model_sweep_plan import Column, columns_of
from sweepd.strategies.registry import Kind

# batch-sweep.SKILL.md "Model sweep" Step 2: 10 jobs per commit.
DEFAULT_MATRIX: dict[str, tuple[int, ...]] = {
    "llama2-70b": (1, 2), "mixtral-8x22b": (4, 8), "grok-1": (8,), "grok-2": (8,),
    "llama3.1-405b": (8,), "deepseek3-671b": (8,), "kimi-k2-1t": (8,), "qwen3-480b-a35b": (8,),
}
# Proxy configs and `default` are not real models; the SKILL.md skips them.
SKIPPED_PREFIXES = ("ds-proxy", "default")
MAX_HISTORY = 20  # earlier sweeps followed through `compare_to`


class ModelSweepSpec(_Spec):
    """All models x node counts on 1 or 2 commits (refs or SHAs; the first is the baseline)."""

    kind: Literal["model-sweep"]
    commits: list[str] = Field(default_factory=lambda: ["HEAD"], min_length=1, max_length=2)
    repo: Path | None = Field(default=None, strict=False,  # a path arrives as a string
                               description="git repo; None: commits are labels")
    matrix: dict[str, list[int]] = Field(
        default_factory=lambda: {m: list(n) for m, n in DEFAULT_MATRIX.items()})
    compare_to: int | None = Field(default=None, ge=1,
                                   description="an earlier model sweep to compare against")

    @field_validator("commits")
    @classmethod
    def _commits(cls, v: list[str]) -> list[str]:
        for c in v:
            if not c or c.startswith("-") or any(ch.isspace() for ch in c):
                raise ValueError(f"bad commit {c!r}")
        if len(set(v)) != len(v):
            raise ValueError("the two commits are the same")
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix(cls, v: dict[str, list[int]]) -> dict[str, list[int]]:
        if not v:
            raise ValueError("the matrix is empty")
        out: dict[str, list[int]] = {}
        for name, counts in v.items():
            if name.startswith(SKIPPED_PREFIXES):
                raise ValueError(f"{name!r}: proxy and default configs are not swept")
            try:
                shape = resolve_model(name)
            except UnknownModel as e:
                raise ValueError(str(e)) from e
            if not counts or any(n < 1 for n in counts) or len(set(counts)) != len(counts):
                raise ValueError(f"{name}: node counts must be distinct and positive")
            if min(counts) < shape.min_nodes:
                raise ValueError(f"{name} needs at least {shape.min_nodes} nodes, "
                                 f"not {min(counts)}")
            if shape.name in out:
                raise ValueError(f"{name!r} names {shape.name} twice")
            out[shape.name] = sorted(counts)
        return out

    @model_validator(mode="after")
    def _fits(self) -> ModelSweepSpec:
        pinned = len(self.node_list)
        over = [f"{m} {n}N" for m, counts in self.matrix.items() for n in counts if n > pinned]
        if over:
            raise ValueError(f"{', '.join(over)} need more than the {pinned} pinned nodes")
        return self

    @property
    def needed_nodes(self) -> int:
        # The engine needs min(this, len(run nodes)): each run keeps its whole node list,
        # since a shrunken list is no longer comparable across sweeps.
        return self.min_nodes or max(n for counts in self.matrix.values() for n in counts)

    def default_name(self) -> str:
        return f"model sweep {' vs '.join(self.commits)}"


async def history(store: Store, compare_to: int | None) -> list[Column]:
    """Earlier model sweeps' columns, oldest first, following each sweep's `compare_to`."""
    chain: list[Column] = []
    seen: set[int] = set()
    at = compare_to
    while at is not None and at not in seen and len(seen) < MAX_HISTORY:
        seen.add(at)
        try:
            sweep = await store.sweep(at)
        except NotFound:
            raise ValueError(f"compare_to: sweep {at} does not exist") from None
        if sweep.kind != "model-sweep":
            raise ValueError(f"compare_to: sweep {at} is a {sweep.kind} sweep")
        cols = columns_of(sweep.id, await store.runs(sweep.id), await store.jobs(sweep.id))
        chain[:0] = [c for c in cols if c.results]
        at = sweep.spec.get("compare_to")
    return chain


async def gather(store: Store, spec: ModelSweepSpec) -> dict[str, Any]:
    """The commits' SHAs (refs move; runs record what ran) and earlier sweeps' results."""
    try:
        shas = ({} if spec.repo is None else
                {c: await worktrees.resolve(spec.repo, c) for c in spec.commits})
        past = await history(store, spec.compare_to)
    except (worktrees.GitError, ValueError) as e:
        return {"error": str(e)}
    return {"shas": shas, "history": [c.as_dict() for c in past]}


async def prepare(spec: ModelSweepSpec, sweep_dir: Path) -> list[worktrees.Worktree]:
    """A worktree per commit under the sweep's directory (for a `Kind.prepare` hook: real
    Slurm jobs must run from them; the simulated cluster only needs the labels)."""
    if spec.repo is None:
        return []
    return await worktrees.prepare(spec.repo, spec.commits, sweep_dir / "worktrees")


async def workdir(spec: ModelSweepSpec, params: dict[str, Any], sweep_dir: Path) -> Path | None:
    """The checkout of the run's commit under the sweep's directory, made on first use: a
    clone, which the toolkit's submit.sh takes for a repo root. Its jobs' logs still go to
    the configured repo's workspace (the slurm backend sets JOB_WORKSPACE)."""
    commit = params.get("_commit")
    if spec.repo is None or not commit:
        return None
    return (await worktrees.add(spec.repo, str(commit), sweep_dir / "worktrees")).path


async def release(spec: ModelSweepSpec, sweep_dir: Path) -> list[Path]:
    """The sweep has ended: its checkouts go (its jobs ran from submit.sh's snapshots)."""
    if spec.repo is None:
        return []
    return await worktrees.remove_all(spec.repo, sweep_dir / "worktrees")


KIND = Kind("model-sweep", ModelSweepSpec, model_sweep_plan.plan, report.markdown, report.rows,
            gather=gather, workdir=workdir, release=release, config_stops=False,
            plot=report.plot)
