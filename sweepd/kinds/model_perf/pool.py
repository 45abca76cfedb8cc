"""Where the memory pool the search reads comes from, said wherever the pool is used (the
first probe's reason, so `validate` and the sweep's first decision; the report): the spec's
`gpu_memory_gib`, the config's, learned from a run's own log (Memstats' `Using (GB) 3.01 /
15.75`, or what an OOM said was available), or the default a config that names none gets.
On the local backend such a config leaves the pool unknown (config.ClusterConfig
.planning_pool): the planner then starts small, as for a model it has no shape for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.monitor.signatures import oom_sizes
from sweepd.store.rows import Job


@dataclass(frozen=True)
class Pool:
    gb: float | None  # one accelerator's memory; None: unknown
    source: str       # where it came from, in words ("the config", "learned from job 3's …")
    default: bool = False  # a default, no reading of the device

    @property
    def line(self) -> str:
        return f"memory pool {self.gb:g} GB ({self.source})" if self.gb is not None \
            else f"memory pool unknown ({self.source})"


def learned(jobs: Sequence[Job]) -> tuple[float, str] | None:
    """The pool the sweep's first job to print one said: Memstats' total, else what an OOM
    said was available (a compile-time OOM prints no Memstats)."""
    ordered = sorted(jobs, key=lambda j: j.id)
    for job in ordered:
        if job.mem_limit_gb is not None and job.mem_limit_gb > 0:
            return job.mem_limit_gb, f"learned from job {job.id}'s Memstats"
    for job in ordered:
        sizes = oom_sizes(job.failure_line or "") if job.failure_class == "oom" else None
        if sizes is not None and sizes[1] > 0:
            return sizes[1], f"learned from job {job.id}'s out-of-memory line"
    return None


def pool_of(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> Pool:
    if spec.gpu_memory_gib:
        return Pool(spec.gpu_memory_gib, "the spec's gpu_memory_gib")
    if ctx.pool_given and ctx.gpu_memory_gib > 0:
        return Pool(ctx.gpu_memory_gib, "the config's gpu_memory_gib")
    found = learned(ctx.jobs)
    if found is not None:
        return Pool(*found)
    if ctx.gpu_memory_gib > 0:
        return Pool(ctx.gpu_memory_gib, "the default: the config names no gpu_memory_gib",
                    default=True)
    return Pool(None, "the config names no gpu_memory_gib; the first run's Memstats will "
                      "say it", default=True)
