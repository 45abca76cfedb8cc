"""`sweepd demo --kind model-sweep`: every model on two commits; the candidate slows one
model and breaks another."""

from pathlib import Path

from sweepd.kinds.registry import Demo
from sweepd.sim.scenario import DEMO_NODES

DEMO = Demo(
    "sweepd demo --kind model-sweep: a model sweep of all models on commits main and "
    "candidate; candidate slows llama2-70b by 8% and breaks grok-1\n",
    Path(__file__).with_name("demo.yaml"),
    [{"kind": "model-sweep", "nodes": DEMO_NODES, "commits": ["main", "candidate"]}])
