"""What the xla-tuning report is built from (`View`): the sweep's results, board and profile
table, and what its runs recorded; and the leaderboard rows read off it.

Every number comes from the store through `gather.results` and `board.build`, the same
view the planner decided from: a profile's TGS is the mean of its measured runs (each the
job's recorded steady TGS), its delta is over baseline-deployed's mean, its whisker the
standard error of that delta from the cell's own noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from sweepd.kinds.xla_tuning.catalog.catalog import Evidence, Profile, stack
from sweepd.kinds.xla_tuning.evidence import logfacts
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import RESTORE, Outcome, Result
from sweepd.kinds.xla_tuning.runs import gather
from sweepd.kinds.xla_tuning.search import profiles
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.kinds.xla_tuning.waves.labels import roles
from sweepd.store.rows import Job, Run, Sweep


@dataclass(frozen=True)
class View:
    spec: XlaTuningSpec
    results: list[Result]
    board: Board
    table: dict[str, Profile]
    # What the env file sets, as the store knows it: the keys restore_default put back.
    restored: tuple[str, ...] = ()
    # Each profile's settings as its run's params carry them (a profile the spec's table
    # cannot rebuild: restore_default, whose values come from the env file).
    recorded: dict[str, str] | None = None
    batch: int | None = None  # the per_device_batch_size the runs carried
    commit: str | None = None  # the commit the runs were submitted from, when recorded
    evidence: Evidence | None = None  # the evidence run's HLO shares

    @property
    def primary(self) -> str:
        return next(iter(self.spec.config_tags))


def view(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
         read: logfacts.Reader = logfacts.stored) -> View:
    spec = XlaTuningSpec.from_stored(sweep.spec)
    assert isinstance(spec, XlaTuningSpec)
    results = roles(gather.results(runs, jobs, read), runs, jobs)
    t = spec.thresholds
    batch = next((r.params.overrides.get("per_device_batch_size") for r in runs
                  if "per_device_batch_size" in r.params.overrides), None)
    commit = next((r.params.commit for r in runs if r.params.commit), None)
    return View(spec, results, build(results, t.noise, t.max_flakes, DriftRead(t.drift)),
                profiles(spec.inputs()),
                restored_keys(runs), recorded_settings(runs),
                int(batch) if isinstance(batch, int | float | str) and str(batch).isdigit()
                else None, commit, gather.evidence(runs, jobs))


def recorded_settings(runs: Sequence[Run]) -> dict[str, str]:
    out: dict[str, str] = {}
    for run in runs:
        p = run.params
        if p.profile is not None and p.profile not in out:
            # Not its overrides: those carry the config tag's too.
            out[p.profile] = " ".join([*p.xla_flags, *(f"{k}={v}" for k, v in p.env.items())])
    return out


def restored_keys(runs: Sequence[Run]) -> tuple[str, ...]:
    """The XLA flags and env vars a restore_default run put back to the image's defaults:
    the env file's settings (the Inventory), read from the run's own params."""
    for run in runs:
        p = run.params
        if p.profile == RESTORE:
            flags = [f[2:].split("=", 1)[0] for f in p.xla_flags]
            return tuple(dict.fromkeys([*flags, *p.env]))
    return ()


def flags_of(name: str, table: dict[str, Profile], recorded: dict[str, str] | None = None
             ) -> str:
    """A profile's settings as they reach the job (a stack from its parts); one the table
    cannot rebuild as its run recorded them."""
    parts = [table.get(p) for p in name.split("+")]
    if any(p is None for p in parts):
        return (recorded or {}).get(name) or name
    prof = stack(tuple(p for p in parts if p is not None))
    return " ".join(s.text for s in prof.settings) or "(as deployed)"


def leaderboard(v: View) -> list[dict[str, Any]]:
    out = []
    for e in sorted(v.board.entries.values(), key=lambda e: (e.tag != v.primary,
                                                             -(e.mean if e.n else -1.0))):
        ok = [r for r in v.results if (r.profile, r.tag) == (e.profile, e.tag)
              and r.outcome is Outcome.OK]
        out.append({"profile": e.profile, "tag": e.tag,
                    "flags": flags_of(e.profile, v.table, v.recorded),
                    "tgs": e.mean if e.n else None, "n": e.n,
                    "delta": v.board.delta(e.profile, e.tag), "se": v.board.se(e.profile, e.tag),
                    "fate": str(e.fate), "detail": e.detail, "flakes": e.flakes,
                    "job_ids": [r.job_id for r in ok],
                    "step_s": mean_of([r.step_s for r in ok]),
                    "loss": mean_of([r.loss for r in ok])})
    return out


def mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values measured (None: none was)."""
    got = [x for x in values if x is not None]
    return fmean(got) if got else None
