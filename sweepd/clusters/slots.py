"""What a partition holds now, for a sweep that asks for a cluster slot rather than named
nodes (xla-tuning's `partition` + `node_count`) and for its pre-flight: the idle nodes, and
the jobs of other users. Each answer carries the command or source it came from (evidence).

Kept out of the `ClusterBackend` protocol: only the real Slurm backend and the simulated
cluster answer; any other backend says it cannot (None), and the caller refuses or notes it.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass

import hostlist

from sweepd.clusters.sim import PENDING, SimCluster
from sweepd.clusters.slurm import SlurmCluster


@dataclass(frozen=True)
class Listing:
    items: list[str]
    evidence: str  # the command that answered (or the simulator's source)


def _partition_args(partition: str | None) -> list[str]:
    return ["-p", partition] if partition else []


async def idle_nodes(backend: object, partition: str | None) -> Listing | None:
    """The nodes of `partition` (None: every partition) that are idle now, in name order;
    None when the backend cannot list them."""
    if isinstance(backend, SlurmCluster):
        argv = ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N", *_partition_args(partition)]
        res = await backend._run(argv)
        if res.rc != 0:
            backend._raise_for("sinfo", res)
        found = sorted({line.strip() for line in res.out.splitlines() if line.strip()},
                       key=_natural)
        return Listing(found, f"{' '.join(argv)}: {hostlist.collect_hostlist(found) or 'none'}")
    if isinstance(backend, SimCluster):
        return Listing(backend_idle_sim(backend), "the simulated cluster (one partition): "
                       "its nodes minus those of running or queued jobs")
    return None


def backend_idle_sim(sim: SimCluster) -> list[str]:
    """The simulated cluster's nodes no running or queued job holds (a queued job will
    take its nodes: they are not free for a frozen slot)."""
    held = {n for r in sim._all() if sim._running(r) or r["state"] == PENDING
            for n in r["nodes"]}
    return [n for n in sim.scenario.cluster.node_list if n not in held]


async def others_jobs(backend: object, partition: str | None) -> Listing | None:
    """Other users' pending and running jobs on `partition` (`jobid user state nodes`, one
    each); None when the backend cannot say. The simulated cluster has no other users."""
    if isinstance(backend, SlurmCluster):
        argv = ["squeue", "-h", "-t", "PENDING,RUNNING", "-o", "%i|%u|%T|%N",
                *_partition_args(partition)]
        res = await backend._run(argv)
        if res.rc != 0:
            backend._raise_for("squeue", res)
        me = getpass.getuser()
        rows = [line.split("|") for line in res.out.splitlines() if line.count("|") == 3]
        found = [" ".join(r) for r in rows if r[1] != me]
        return Listing(found, f"{' '.join(argv)} (users other than {me})")
    if isinstance(backend, SimCluster):
        return Listing([], "the simulated cluster has no other users")
    return None


def _natural(name: str) -> tuple[str, int, str]:
    """n2 before n10: the name's prefix, then its trailing number."""
    stripped = name.rstrip("0123456789")
    digits = name[len(stripped):]
    return stripped, int(digits) if digits else -1, name
