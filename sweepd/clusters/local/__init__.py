"""The `local` backend: jobs as process groups on this host, its one node, one at a time
(`cluster.LocalCluster`); their records (`records`), what a job runs and its start
(`launch`), and the wrapper each job runs under (`wrapper`, standard library only)."""

from sweepd.clusters.local.cluster import LocalCluster

__all__ = ["LocalCluster"]
