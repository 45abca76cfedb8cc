"""Build the configured cluster backend and the clock that matches it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from sweepd.clusters.base import ClusterBackend
from sweepd.config import Config
from sweepd.util.clock import Clock


def default_scenario() -> Path:
    return Path(str(resources.files("sweepd.sim").joinpath("default_scenario.yaml")))


def sim_file(name: str) -> Path:
    """A scenario shipped with the package (the demos')."""
    return Path(str(resources.files("sweepd.sim").joinpath(name)))


def make_backend(config: Config) -> tuple[ClusterBackend, Clock]:
    if config.cluster.backend == "sim":
        from sweepd.clusters.sim import SimCluster
        from sweepd.sim.scenario import load_scenario

        scenario = config.cluster.sim.scenario or default_scenario()
        time_scale = load_scenario(scenario).cluster.time_scale
        state = config.daemon.state_dir / "sim"
        state.mkdir(parents=True, exist_ok=True)
        return SimCluster(state, scenario), Clock(time_scale)
    if config.cluster.backend == "local":
        from sweepd.clusters.local import LocalCluster

        return LocalCluster(config.daemon.state_dir / "local", config.cluster.local), Clock(1.0)
    from sweepd.clusters.slurm import SlurmCluster

    s = config.cluster.slurm
    return SlurmCluster(s, header_command=s.header_command,
                        summary_command=s.summary_command), Clock(1.0)
