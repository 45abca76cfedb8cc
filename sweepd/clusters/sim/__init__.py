"""The `sim` backend: the embedded simulated cluster (`cluster.SimCluster`), its job records
and clock (`records`) and the start of each job's trainer process (`launch`)."""

from sweepd.clusters.sim.cluster import SimCluster

__all__ = ["SimCluster"]
