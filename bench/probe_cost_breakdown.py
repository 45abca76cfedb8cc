"""Where the model perf search's node-hours go, by family and by kind of run (not a test).

    python bench/probe_cost_breakdown.py [--curves N] [--held-out] [--smoke]

Same curves, noise and cost model as probe_efficiency.py. Each run is one of: an OOM, a
hang (too slow: two attempts past the hang limit), a pass in the top quarter of the
batches that fit ("large": its steps dominate), or another pass. Per family: mean runs
and node-hours of each kind, and the share of node-hours spent on passes that could not
have been the optimum (a true TGS more than 1% below the true peak) at batches above it.
The oracle row is a floor: the optimum and its two neighbours, run by one who knows them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_efficiency as pe

from sweepd.kinds.model_perf.search import Outcome, Probe

KINDS = ("oom", "hang", "large pass", "pass")


class Recorder(pe.Cluster):
    """A cluster that records each run's kind and node-hours."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.log: list[tuple[str, float, int]] = []

    def run(self, b: int) -> Probe:
        before = self.node_hours
        probe = super().run(b)
        kind = ("oom" if probe.outcome is Outcome.OOM else
                "hang" if probe.outcome is not Outcome.OK else
                "large pass" if b > 0.75 * self.curve.max_fit else "pass")
        self.log.append((kind, self.node_hours - before, b))
        return probe


ORACLE = "oracle: the optimum and its two neighbours"


def oracle(cluster: Recorder) -> None:
    """A floor, not a method: it knows where the optimum is and runs only it and the batch
    on each side (above the largest fit: its OOM), the least that shows a measured best is
    a local peak. No search spends less and still checks its verdict."""
    best = cluster.curve.best_batch
    for b in (best, best - 1, best + 1):
        if b >= 1:
            cluster.run(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--curves", type=int, default=1500)
    parser.add_argument("--held-out", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    a = parser.parse_args()
    curves = 15 if a.smoke else a.curves
    seed = 99173 if a.held_out else 20240601
    families = pe.HOLDOUT_FAMILIES if a.held_out else pe.FAMILIES
    cases = pe.workload(curves, seed, families, 0.08 if a.held_out else 0.03)
    for name in (pe.SWEEPD, "SKILL.md literal", ORACLE):
        per: dict[str, list[Recorder]] = defaultdict(list)
        for i, case in enumerate(cases):
            cluster = Recorder(case.curve, pe.noise_stream(seed, i), pe.NOISE)
            if name == ORACLE:
                oracle(cluster)
            else:
                pe.METHODS[name](cluster, case.estimate)
            per[case.curve.family].append(cluster)
        print(f"\n[{name}, {'held out' if a.held_out else 'tuned'}, {len(cases)} curves] "
              "per curve: runs / node-h of each kind; past-peak = node-h on passes above "
              "the optimum more than 1% below it")
        print(f"{'family':16} {'runs':>5} {'node-h':>7}  " +
              "  ".join(f"{k:>15}" for k in KINDS) + f"  {'past-peak':>9}")
        every = [c for cs in per.values() for c in cs]
        for family, clusters in [*sorted(per.items()), ("all", every)]:
            n = len(clusters)
            cells = []
            for kind in KINDS:
                runs = sum(1 for c in clusters for k, _, _ in c.log if k == kind) / n
                hours = sum(h for c in clusters for k, h, _ in c.log if k == kind) / n
                cells.append(f"{runs:5.2f} / {hours:5.2f} h")
            past = sum(h for c in clusters for k, h, b in c.log if k.endswith("pass")
                       and b > c.curve.best_batch
                       and c.curve.true(b) < 0.99 * c.curve.peak) / n
            print(f"{family:16} {statistics.mean(c.runs for c in clusters):5.2f} "
                  f"{statistics.mean(c.node_hours for c in clusters):7.2f}  "
                  + "  ".join(f"{c:>15}" for c in cells) + f"  {past:9.2f}")


if __name__ == "__main__":
    main()
