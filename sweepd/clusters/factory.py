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
    """The daemon's backend, its records in the state directory, and its clock."""
    clock = Clock(1.0)
    if config.cluster.backend == "sim":
        from sweepd.sim.scenario import load_scenario

        clock = Clock(load_scenario(config.cluster.sim.scenario or default_scenario())
                      .cluster.time_scale)
    return make_cluster(config, config.daemon.state_dir), clock


def make_cluster(config: Config, state_dir: Path) -> ClusterBackend:
    """The configured backend; the sim and local ones keep their records under `state_dir`
    (`sweepd check`'s dry job passes a scratch folder, so nothing lands in sweepd's state)."""
    if config.cluster.backend == "sim":
        from sweepd.clusters.sim import SimCluster

        state = state_dir / "sim"
        state.mkdir(parents=True, exist_ok=True)
        return SimCluster(state, config.cluster.sim.scenario or default_scenario())
    if config.cluster.backend == "local":
        from sweepd.clusters.local import LocalCluster

        return LocalCluster(state_dir / "local", config.cluster.local)
    from sweepd.clusters.slurm import SlurmCluster

    s = config.cluster.slurm
    return SlurmCluster(s, header_command=s.header_command,
                        summary_command=s.summary_command)
