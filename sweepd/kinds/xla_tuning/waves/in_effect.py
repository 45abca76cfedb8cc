"""Catalog profiles that change nothing for the job, left out of the search.

A profile whose every setting already holds without it (the env file's value, else the
image's or XLA's/NCCL's own, `flags.default_value`; booleans in any case, as XLA reads them)
runs the baseline again under another name: the image sets latency_hiding_scheduler=True, so
the catalog's `lhs` (=true) is one; an env file that sets double buffering makes `dbuf` one.
Each such run costs a job (~15 min on a real cluster) and can only "win" by noise, so the
planner never runs them and the verdict says which it left out.

A profile the sweep already has a result for stays (a sweep begun before this rule): its
result is read like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from sweepd.kinds.xla_tuning.catalog.catalog import Profile, Setting
from sweepd.kinds.xla_tuning.catalog.flags import default_value, same_value
from sweepd.kinds.xla_tuning.evidence.results import Result
from sweepd.kinds.xla_tuning.inputs import Inputs


def holds_already(profile: Profile, deployed: Sequence[Setting]) -> bool:
    """Every setting of the profile is what the job runs with without it."""
    return _holds(profile, {s.key: s.value for s in deployed})


def _holds(profile: Profile, env: dict[str, str]) -> bool:
    """`holds_already` against the env file's settings by key (last wins)."""
    if not profile.settings:
        return False
    for s in profile.settings:
        now = env.get(s.key, default_value(s.key))
        if now is None or not same_value(now, s.value):
            return False
    return True


def without_in_effect(inp: Inputs, results: Iterable[Result] = ()) -> Inputs:
    """The inputs with the catalog's no-op profiles left out (named in `in_effect`);
    idempotent: the names already left out are kept."""
    ran = {part for r in results for part in r.profile.split("+")}
    env = {s.key: s.value for s in inp.deployed}
    dropped = tuple(p.name for p in inp.catalog if p.name not in ran and _holds(p, env))
    if not dropped:
        return inp
    return replace(inp, catalog=tuple(p for p in inp.catalog if p.name not in dropped),
                   in_effect=(*inp.in_effect, *dropped))


def in_effect_note(inp: Inputs) -> str:
    """The verdict's phrase for the profiles left out (empty when none were)."""
    if not inp.in_effect:
        return ""
    return ("; not run, already in effect (each setting the env file's or the image's value): "
            + ", ".join(inp.in_effect))
