"""A flag-effect model of one (model x parallelism) cell, and its ground truth.

TGS at the image's defaults is multiplied by one factor per effective setting (`key=value`),
per config tag where the tag overrides it, and by interaction factors when every member is
in effect (a member `key` alone matches any non-default value). Temp memory is multiplied
the same way; above the capacity (HBM x the effective XLA_PYTHON_CLIENT_MEM_FRACTION) a run
OOMs. A key the image does not know aborts the job at start-up. Effective settings resolve
last-wins: image defaults <- the model's env file (baseline-deployed) <- the profile; a
value equal to the default a job runs with (`flags.default_value`; booleans in any case, as
XLA reads them, `flags.same_value`) changes nothing and has no effect.

The simulator will load a landscape from its scenario file (`to_yaml` / `from_yaml`).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import yaml
from pydantic import BaseModel, ConfigDict, Field

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Layer, Profile, Setting
from sweepd.kinds.xla_tuning.catalog.flags import (
    IMAGE_DEFAULTS,
    MEM_FRACTION,
    default_value,
    same_value,
)
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS


class Effect(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    tgs: float = 1.0  # factor on steady TGS
    mem: float = 1.0  # factor on compiled temp memory


class Interaction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    members: tuple[str, ...]  # `key=value`, or `key` for any non-default value
    tgs: float
    tag: str | None = None  # None: every config tag


class Landscape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    parallelism: str
    tags: tuple[str, ...] = ("default",)  # the first is the primary config tag
    base_tgs: dict[str, float]  # per tag, at the image's defaults
    step_s_at_base: float = 28.0  # step seconds of the primary tag at base_tgs
    effects: dict[str, Effect] = Field(default_factory=dict)  # `key=value` -> effect
    tag_effects: dict[str, dict[str, Effect]] = Field(default_factory=dict)
    interactions: tuple[Interaction, ...] = ()
    unknown: frozenset[str] = frozenset()  # keys the image's XLA rejects
    deployed: tuple[str, ...] = ()  # the env file's settings, `key=value`
    hbm_gib: float = 288.0
    temp_gib: float = 178.0
    argument_gib: float = 75.4
    output_gib: float = 0.4
    noise: float = 0.008  # relative std of one run's steady TGS
    flake_rate: float = 0.0  # chance a run dies of an RCCL flake / coordination timeout
    # Relative change of every run's TGS per DRIFT_S of the sweep's queue time, linear from
    # its start (thermals, neighbours, file-system load): a real cluster drifts, so a recipe
    # run late and a baseline run early differ by more than their flags (0: a still cluster).
    drift: float = 0.0
    evidence: dict[Cost, float] = Field(default_factory=dict)  # what Wave 1.5 shows

    def deployed_settings(self) -> tuple[Setting, ...]:
        return tuple(_setting(text) for text in self.deployed)

    def effective(self, settings: Iterable[Setting]) -> dict[str, str]:
        eff = dict(IMAGE_DEFAULTS)
        for s in (*self.deployed_settings(), *settings):
            eff[s.key] = s.value
        return eff

    def _factor(self, label: str, tag: str) -> Effect:
        found = self.tag_effects.get(tag, {}).get(label) or self.effects.get(label)
        if found is None and _boolean(label):  # `key=TRUE` is `key=true`, as XLA reads it
            found = next((e for table in (self.tag_effects.get(tag, {}), self.effects)
                          for lb, e in table.items() if _same_label(lb, label)), None)
        return found or Effect()

    def _changed(self, eff: dict[str, str]) -> list[str]:
        """The settings that differ from what the job runs with where nothing sets them
        (compared as XLA does: `true` on the image's `True` changes nothing)."""
        return [f"{k}={v}" for k, v in eff.items() if not _is_default(k, v)]

    def tgs(self, settings: Iterable[Setting], tag: str) -> float:
        """True steady TGS, before noise (OOM and unknown flags aside)."""
        eff = self.effective(settings)
        labels = self._changed(eff)
        value = self.base_tgs[tag] * math.prod(self._factor(lb, tag).tgs for lb in labels)
        for it in self.interactions:
            if (it.tag is None or it.tag == tag) and all(_matches(m, eff) for m in it.members):
                value *= it.tgs
        return value

    def memory(self, settings: Iterable[Setting], tag: str) -> tuple[float, float]:
        """(temp GiB, capacity GiB) as compiled with these settings."""
        eff = self.effective(settings)
        temp = self.temp_gib * math.prod(self._factor(lb, tag).mem for lb in self._changed(eff))
        return temp, self.hbm_gib * float(eff.get(MEM_FRACTION, ".93"))

    def fits(self, settings: Sequence[Setting], tag: str) -> bool:
        temp, cap = self.memory(settings, tag)
        return temp + self.argument_gib + self.output_gib <= cap

    def rejected(self, settings: Iterable[Setting]) -> str | None:
        """The first flag the image does not know, if any."""
        return next((s.key for s in settings if s.key in self.unknown), None)

    def gain(self, settings: Sequence[Setting], tag: str) -> float | None:
        """True TGS relative to baseline-deployed; None when the job cannot run."""
        if self.rejected(settings) or not self.fits(settings, tag):
            return None
        return self.tgs(settings, tag) / self.tgs((), tag)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> Landscape:
        return cls.model_validate(yaml.safe_load(text))

    def evidence_value(self) -> Evidence:
        return Evidence(tuple(self.evidence.items()), source="simulated evidence run")


DRIFT_S = 8 * 3600.0  # the span `Landscape.drift` is given over (the 8 h stop rule)


class RunKind(StrEnum):
    OK = "ok"
    OOM = "oom"
    UNKNOWN_FLAG = "unknown_flag"
    FLAKE = "flake"


@dataclass(frozen=True)
class Sample:
    kind: RunKind
    tgs: float | None = None
    step_s: float | None = None
    detail: str = ""  # the unknown flag, or the failed allocation


def sample(land: Landscape, settings: Sequence[Setting], tag: str, rng: random.Random,
           at_s: float = 0.0) -> Sample:
    """One simulated run, started `at_s` seconds of queue time into the sweep: the log's
    outcome and its steady TGS with noise (and the landscape's drift by then)."""
    bad = land.rejected(settings)
    if bad:
        return Sample(RunKind.UNKNOWN_FLAG, detail=bad)
    if rng.random() < land.flake_rate:
        return Sample(RunKind.FLAKE, detail="RCCL flake")
    temp, cap = land.memory(settings, tag)
    if temp + land.argument_gib + land.output_gib > cap:
        return Sample(RunKind.OOM, detail=f"{temp:.1f}GiB")
    tgs = land.tgs(settings, tag) * (1 + rng.gauss(0.0, land.noise))
    if land.drift:
        tgs *= 1 + land.drift * at_s / DRIFT_S
    step = land.step_s_at_base * land.base_tgs[land.tags[0]] / tgs
    return Sample(RunKind.OK, tgs=tgs, step_s=step)


@dataclass(frozen=True)
class Truth:
    recipe: tuple[str, ...]  # profile names; () = baseline-deployed is best
    gain: float  # true TGS / baseline-deployed on the primary tag


def truth(land: Landscape, profiles: Sequence[Profile],
          max_flags: int = THRESHOLDS.max_flags) -> Truth:
    """The best recipe of at most `max_flags` settings from these profiles (primary tag)."""
    tag = land.tags[0]
    ok = [p for p in profiles if land.gain(p.settings, tag) is not None]
    useful = [p for p in ok if (land.gain(p.settings, tag) or 0) > 1.0 or _interacts(land, p)]
    best = Truth((), 1.0)
    for k in range(1, max_flags + 1):
        for combo in itertools.combinations(useful, k):
            settings = tuple(s for p in combo for s in p.settings)
            if len(settings) > max_flags or len({s.key for s in settings}) < len(settings):
                continue
            g = land.gain(settings, tag)
            if g is not None and g > best.gain:
                best = Truth(tuple(p.name for p in combo), g)
    return best


def _interacts(land: Landscape, p: Profile) -> bool:
    names = {s.key for s in p.settings} | {s.label for s in p.settings}
    return any(m in names for it in land.interactions for m in it.members)


def _matches(member: str, eff: dict[str, str]) -> bool:
    key, _, value = member.partition("=")
    if value:
        return key in eff and same_value(eff[key], value)
    return key in eff and not _is_default(key, eff[key])


def _is_default(key: str, value: str) -> bool:
    d = default_value(key)
    return d is not None and same_value(d, value)


def _boolean(label: str) -> bool:
    return label.partition("=")[2].lower() in ("true", "false")


def _same_label(a: str, b: str) -> bool:
    ka, _, va = a.partition("=")
    kb, _, vb = b.partition("=")
    return ka == kb and same_value(va, vb)


def _setting(text: str) -> Setting:
    key, _, value = text.partition("=")
    layer = Layer.XLA if key.startswith("xla_") else Layer.ENV
    return Setting(key, value, layer)
