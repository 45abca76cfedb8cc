"""The confirm stage: baseline-deployed (the config as deployed: its batch, the env file's
flags) against the candidate (the batch found and the recipe), interleaved A B A B ... on
the frozen nodes, one run at a time so a drift of the cluster meets both alike; at least
`confirm_runs` passed runs each. The campaign's claim is these runs' alone: the gain of B's
mean over A's with its 95 % interval (Welch). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, variance
from typing import Any

from sweepd.kinds.api import Finished, NewRun, Plan, SweepContext, open_runs
from sweepd.kinds.campaign.rules import CONFIRM
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.store.rows import Run, RunParams, Scalar
from sweepd.store.states import RunState

BASE, CAND = "A", "B"
PROFILE = "campaign-candidate"   # the candidate's flags reach a submit.sh job as a profile
# Every confirm job: the tuning template's steps and synthetic data (xla-tuning.SKILL.md).
JOB_OVERRIDES: dict[str, Scalar] = {"dataset_type": "synthetic"}
# Two-sided 95 % t quantiles by degrees of freedom (1..30); beyond, the normal's.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: float) -> float:
    if df >= len(_T95):
        return 1.96
    return _T95[max(0, math.floor(df) - 1)]   # rounded down: the wider interval


@dataclass(frozen=True)
class Confirmed:
    """The campaign's claim: candidate vs baseline-deployed on the same nodes, from the
    confirm runs alone."""

    base: tuple[float, ...]
    cand: tuple[float, ...]
    gain: float | None
    interval: tuple[float, float] | None

    @property
    def base_mean(self) -> float | None:
        return fmean(self.base) if self.base else None

    @property
    def cand_mean(self) -> float | None:
        return fmean(self.cand) if self.cand else None

    @property
    def claim(self) -> str:
        if self.gain is None or self.interval is None:
            return "no claim: too few confirm runs passed"
        lo, hi = self.interval
        span = f"{self.gain:+.2%} (95 % interval {lo:+.2%} to {hi:+.2%})"
        if lo > 0:
            return f"confirmed gain {span}"
        if hi < 0:
            return f"the candidate is slower: {span}; keep the deployed configuration"
        return f"within noise: {span}; nothing is put forward"

    def as_dict(self) -> dict[str, Any]:
        return {"base": list(self.base), "cand": list(self.cand), "gain": self.gain,
                "interval": list(self.interval) if self.interval else None,
                "claim": self.claim}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Confirmed:
        iv = d.get("interval")
        return cls(tuple(d.get("base", ())), tuple(d.get("cand", ())), d.get("gain"),
                   (float(iv[0]), float(iv[1])) if iv else None)


def measure(base: Sequence[float], cand: Sequence[float]) -> Confirmed:
    """B's mean over A's, minus 1, and its 95 % interval: Welch's t on the ratio of means
    (delta method), so a few runs give a wide interval, never a narrow one."""
    if len(base) < 2 or len(cand) < 2:
        return Confirmed(tuple(base), tuple(cand), None, None)
    a, b = fmean(base), fmean(cand)
    va, vb = variance(base) / len(base), variance(cand) / len(cand)
    ratio = b / a
    se = ratio * math.sqrt(va / (a * a) + vb / (b * b))
    # Welch-Satterthwaite degrees of freedom
    den = (va * va / (len(base) - 1) + vb * vb / (len(cand) - 1))
    df = (va + vb) ** 2 / den if den > 0 else float(len(base) + len(cand) - 2)
    half = t95(df) * se
    return Confirmed(tuple(base), tuple(cand), ratio - 1, (ratio - 1 - half, ratio - 1 + half))


def _params(spec: CampaignSpec, arm: str) -> RunParams:
    overrides: dict[str, Scalar] = {**spec.overrides, **spec.parallelism_overrides(),
                                    **JOB_OVERRIDES, "steps": spec.steps}
    cand = spec.candidate
    if arm == BASE or cand is None:
        return RunParams(overrides=overrides, tag="baseline")
    if cand.batch is not None:
        overrides["per_device_batch_size"] = cand.batch
    flags = bool(cand.xla_flags or cand.env)
    return RunParams(overrides=overrides, xla_flags=list(cand.xla_flags), env=dict(cand.env),
                     profile=PROFILE if flags else None, tag="candidate")


def passed(runs: Sequence[Run], arm: str) -> list[float]:
    return [r.tgs for r in runs if r.label.startswith(arm) and r.state == RunState.PASSED
            and r.tgs]


def plan(spec: CampaignSpec, ctx: SweepContext[Any]) -> Plan:
    if open_runs(ctx.runs):
        return []   # one at a time: A and B alternate in time
    base, cand = passed(ctx.runs, BASE), passed(ctx.runs, CAND)
    n = spec.confirm_runs
    if len(base) >= n and len(cand) >= n:
        found = measure(base, cand)
        return Finished(True, f"confirm: {found.claim} ({len(cand)} candidate and "
                              f"{len(base)} baseline-deployed runs, interleaved)",
                        {"confirmed": found.as_dict()})
    # Failed runs are re-run, within a cap: a candidate that cannot run is a result too.
    if len(ctx.runs) >= 2 * n + 4:
        found = measure(base, cand)
        return Finished(True, f"confirm: {found.claim}; stopped at {len(ctx.runs)} runs "
                              f"({len(base)} baseline, {len(cand)} candidate passed)",
                        {"confirmed": found.as_dict()})
    last = ctx.runs[-1].label[0] if ctx.runs else CAND
    arm = BASE if last == CAND else CAND
    if arm == CAND and len(cand) >= n:
        arm = BASE
    elif arm == BASE and len(base) >= n:
        arm = CAND
    label = f"{arm}{sum(1 for r in ctx.runs if r.label.startswith(arm)) + 1}"
    what = "baseline-deployed" if arm == BASE else "candidate"
    first = [] if ctx.runs else [
        f"confirm: {what} and candidate interleaved on {spec.nodes}, "
        f"{n} passed runs each; the claim comes from these runs alone"]
    return [NewRun(label, _params(spec, arm), ctx.nodes, f"confirm: {what} run {label}",
                   CONFIRM.id, progress=first)]
