"""The simulator's true gain of what a campaign confirmed (the demo's last line): the
flag-effect landscape's gain of the candidate's flags (over baseline-deployed, at the
landscape's batch) times the model's batch curve at the candidate's batch over the
config's, on the frozen nodes. Read from the demo's store and scenario."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweepd.config import Config
from sweepd.kinds.campaign.spec import parallelism_overrides
from sweepd.kinds.xla_tuning.exports import sim_true_gain
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes

if TYPE_CHECKING:
    from sweepd.sim.scenario import Scenario


async def true_gain_line(config: Config) -> str:
    from sweepd.clusters.factory import default_scenario
    from sweepd.sim.scenario import load_scenario

    store = await Store.open(config.daemon.db_path)
    try:
        confirms = [s for s in await store.sweeps.all()
                    if s.kind == "campaign" and s.spec.get("stages") == ["confirm"]]
    finally:
        await store.close()
    if not confirms:
        return "(no confirm stage ran: no true gain to compare)"
    scenario = load_scenario(config.cluster.sim.scenario or default_scenario())
    return "\n".join(_line(scenario, c.spec) for c in confirms)


def _line(scenario: Scenario, spec: dict[str, Any]) -> str:
    """One confirm stage's true gain, at its parallelism (its axes as the jobs' overrides)."""
    overrides = {k: str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in spec.get("overrides", {}).items()}
    par = str(spec.get("parallelism"))
    overrides.update({k: str(n) for k, n in parallelism_overrides(par).items()})
    nodes = expand_nodes(spec["nodes"])
    cand = spec.get("candidate") or {}
    flags = list(cand.get("xla_flags", []))
    found = sim_true_gain(scenario, overrides, nodes, cand.get("batch"), flags,
                          cand.get("env", {}))
    if found is None:
        return "(the scenario has no tuning section: no ground truth)"
    return (f"simulator's ground truth: the confirmed candidate (batch "
            f"{cand.get('batch') or 'as configured'}, {' '.join(flags) or 'no flags'}) is "
            f"{found.gain:+.2%} over baseline-deployed (flags x{found.flags:.4f}, batch "
            f"x{found.batch:.4f}) on {spec['nodes']} at {par}")
