"""What the wave planner hands out: the runs it plans (each with its rule and reason), the
verdict it ends on, and the profiles a sweep can run (the catalog, restore_default, the
baseline and the evidence run)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Profile, Setting
from sweepd.kinds.xla_tuning.catalog.flags import restore_default
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE
from sweepd.kinds.xla_tuning.inputs import Inputs


@dataclass(frozen=True)
class Planned:
    profile: Profile
    tag: str
    wave: int
    rule: str
    reason: str


class VerdictKind(StrEnum):
    PROPOSAL = "proposal"
    BOUNDED = "bounded"
    TIMEBOX = "timebox"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    rule: str
    reason: str
    recipe: str | None  # profile name of the proposed recipe; None: no change
    gain: float | None  # its delta vs baseline-deployed, from runs that did not select it
    regressed: tuple[str, ...] = ()  # config tags the recipe regresses (> regress)
    # A verdict that lacks what a deployment needs (the leader not confirmed, Wave 6 not
    # run, a part not tested, another tag regressed): `report --apply` refuses it unless
    # forced. The reason says what is missing.
    conditional: bool = False
    conditional_reason: str = ""
    interval: tuple[float, float] | None = None  # the gain's 95 % interval
    n: int = 0  # the runs behind the gain (fresh: after the one that selected the recipe)
    left_out: tuple[str, ...] = ()  # parts dropped from the stack, each with why
    profiles: int = 0  # distinct profiles tried in Waves 2-4
    win: bool = False  # the recipe is confirmed >= +5 % (what a ">= +5 %" claim means)
    tested: tuple[str, ...] = ()  # parts kept after their stack was re-run without them


Plan = tuple[Planned, ...] | Verdict  # an empty tuple: wait for the runs in flight
EVIDENCE_PROFILE = Profile(EVIDENCE, (
    Setting("profiler", "xplane", Layer.MAXTEXT),
    Setting("skip_first_n_steps_for_profiler", "10", Layer.MAXTEXT),
    Setting("profiler_steps", "3", Layer.MAXTEXT),
    Setting("ENABLE_XLA_DUMP", "1", Layer.ENV),
), frozenset())
BASELINE_PROFILE = Profile(BASELINE, (), frozenset())


def profiles(inp: Inputs) -> dict[str, Profile]:
    """Every profile the sweep can run, by name (stacks are resolved from their parts)."""
    out = {p.name: p for p in inp.catalog}
    restore = restore_default(inp.deployed)
    if restore is not None:
        out[restore.name] = restore
    out[BASELINE] = BASELINE_PROFILE
    out[EVIDENCE] = EVIDENCE_PROFILE
    return out
