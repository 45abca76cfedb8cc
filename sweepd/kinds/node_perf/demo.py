"""`sweepd demo --kind node-perf`: one node of the simulated cluster is 7% slow."""

from pathlib import Path

from sweepd.kinds.registry import Demo
from sweepd.sim.scenario import DEMO_NODES

DEMO = Demo(
    "sweepd demo --kind node-perf: a node perf sweep: one 1-node job per node; one node is "
    "7% slow\n",
    Path(__file__).with_name("demo.yaml"),
    [{"kind": "node-perf", "nodes": DEMO_NODES}])
