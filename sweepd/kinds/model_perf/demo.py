"""`sweepd demo` (the default kind): a model perf sweep of llama2-70b on the simulated
cluster, and the simulator's true optimum on the nodes the sweep ended up using."""

from __future__ import annotations

from pathlib import Path

from sweepd.config import Config
from sweepd.kinds.registry import Demo
from sweepd.sim.scenario import DEMO_NODES


async def truth_line(config: Config) -> str:
    """What the simulator knows and the sweep had to find out: its true optimum on the
    nodes the sweep ended up using (the demo's last line)."""
    from sweepd.clusters.factory import default_scenario
    from sweepd.sim.scenario import load_scenario
    from sweepd.sim.truth import true_outcome, true_peak_batch
    from sweepd.store.store import Store
    from sweepd.util.hostlists import expand_nodes

    store = await Store.open(config.daemon.db_path)
    try:
        sweep = (await store.sweeps.all())[-1]
        jobs = await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    if not jobs:
        return "(no job ran)"
    nodes = expand_nodes(jobs[-1].nodes)
    scenario = load_scenario(config.cluster.sim.scenario or default_scenario())
    peak = true_peak_batch(scenario, sweep.spec["model"], nodes)
    tgs = true_outcome(scenario, sweep.spec["model"], nodes,
                       {"per_device_batch_size": str(peak)}, {}, None).tgs
    return (f"simulator's ground truth on the {len(nodes)} nodes used: peak at "
            f"per_device_batch_size={peak} ({tgs:,.0f} TGS/device without noise)")


DEMO = Demo(
    "sweepd demo: a model perf sweep of llama2-70b on an embedded simulated 8-node cluster\n"
    "(results land as each job finishes; cluster time runs 250x faster)\n",
    Path(__file__).with_name("demo.yaml"),
    [{"kind": "model-perf", "name": "demo: llama2-70b batch size on 8 simulated nodes",
      "model": "llama2-70b", "nodes": DEMO_NODES}],
    truth=truth_line)
