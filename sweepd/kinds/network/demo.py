"""`sweepd demo --kind network`: a node perf sweep, then the network sweep that uses it;
one link of the simulated cluster is slow."""

from pathlib import Path

from sweepd.kinds.registry import Demo
from sweepd.sim.scenario import DEMO_NODES

DEMO = Demo(
    "sweepd demo --kind network: a node perf sweep, then a network health sweep that uses "
    "it; the link chi2867-chi2881 (across the halves) runs at 85%\n",
    Path(__file__).with_name("demo.yaml"),
    [{"kind": "node-perf", "nodes": DEMO_NODES}, {"kind": "network", "nodes": DEMO_NODES}])
