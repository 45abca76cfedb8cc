"""A whole sweep played against a flag-effect landscape: the planner's loop without a cluster.

Each planned run is sampled from the landscape at once (noise, flakes, OOM, unknown flags),
at the queue time the runs before it took (RUN_S each: the landscape's drift by then);
the evidence run yields the landscape's evidence. Used by the benchmark, the tests and,
later, the demo's ground-truth check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import Evidence, Setting
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, RunKind, sample
from sweepd.kinds.xla_tuning.evidence.results import EVIDENCE, Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import Planned, Verdict, plan, profiles

OUTCOME = {RunKind.OK: Outcome.OK, RunKind.OOM: Outcome.OOM,
           RunKind.UNKNOWN_FLAG: Outcome.UNKNOWN_FLAG, RunKind.FLAKE: Outcome.FLAKE}
RUN_S = 600.0  # queue + compile + 15 steps of one job (~10 min)


@dataclass(frozen=True)
class Replay:
    verdict: Verdict
    results: tuple[Result, ...]
    planned: tuple[Planned, ...]

    def settings(self, inp: Inputs) -> tuple[Setting, ...]:
        """The verdict's recipe as settings (none: baseline-deployed)."""
        if self.verdict.recipe is None:
            return ()
        table = profiles(inp)
        return tuple(s for part in self.verdict.recipe.split("+") for s in table[part].settings)


def replay(inp: Inputs, land: Landscape, rng: random.Random, max_calls: int = 500) -> Replay:
    results: list[Result] = []
    planned: list[Planned] = []
    evidence: Evidence | None = None
    for _ in range(max_calls):
        step = plan(inp, results, evidence)
        if isinstance(step, Verdict):
            return Replay(step, tuple(results), tuple(planned))
        if not step:
            raise RuntimeError("planner waits with nothing in flight")
        for p in step:
            s = sample(land, p.profile.settings, p.tag, rng, at_s=RUN_S * len(results))
            planned.append(p)
            results.append(Result(p.profile.name, p.tag, OUTCOME[s.kind], s.tgs, s.step_s,
                                  s.detail, RUN_S, p.wave, job_id=str(1000 + len(results)),
                                  rule=p.rule))
            if p.profile.name == EVIDENCE and s.kind is RunKind.OK:
                evidence = land.evidence_value()
    raise RuntimeError(f"no verdict after {max_calls} planning passes")
