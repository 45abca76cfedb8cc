"""What other kinds may read of xla-tuning's results (a campaign's flags stage): typed
calls, so that no other kind reads its sweeps by the kind's name and verdict keys (the
layering test allows another kind this module alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepd.kinds.xla_tuning.evidence.results import BASELINE
from sweepd.store.states import SweepState

if TYPE_CHECKING:
    from sweepd.store.rows import Sweep
    from sweepd.store.store import Store

NAME = "xla-tuning"   # the kind's name (kind.py registers it)


@dataclass(frozen=True)
class Recipe:
    """A finished tuning sweep's verdict: the recipe's flags and env vars as its runs carried
    them (empty: no recipe, e.g. a bounded search, which is a result, not a stop), its gain
    over baseline-deployed with the 95 % interval, and that baseline's measured TGS."""

    sweep: int
    verdict: str                  # proposal | bounded | timebox | exhausted
    profile: str | None
    xla_flags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    gain: float | None = None
    interval: tuple[float, float] | None = None
    conditional: bool = False
    baseline_tgs: float | None = None
    recipe_tgs: float | None = None

    @property
    def found(self) -> bool:
        return self.profile is not None and bool(self.xla_flags or self.env)


async def recipe_of(store: Store, sweep: Sweep) -> Recipe | None:
    """The recipe a finished xla-tuning sweep found (None: not one, or not done)."""
    verdict = sweep.verdict or {}
    if sweep.kind != NAME or sweep.state != SweepState.DONE:
        return None
    profile = verdict.get("recipe")
    runs = await store.runs.of_sweep(sweep.id)
    ours = [r for r in runs if profile and r.params.profile == profile]
    base = [r.tgs for r in runs if r.params.profile == BASELINE and r.tgs]
    mine = [r.tgs for r in ours if r.tgs]
    interval = verdict.get("interval")
    return Recipe(
        sweep.id, str(verdict.get("kind", "")), profile if ours else None,
        tuple(ours[0].params.xla_flags) if ours else (),
        dict(ours[0].params.env) if ours else {},
        verdict.get("gain") if ours else None,
        (float(interval[0]), float(interval[1])) if ours and interval else None,
        bool(verdict.get("conditional")),
        sum(base) / len(base) if base else None, sum(mine) / len(mine) if mine else None)


@dataclass(frozen=True)
class SimGain:
    """The simulator's true TGS factors of a candidate over baseline-deployed: the flags'
    (the landscape, at its own batch) and the batch's (the model's curve, 1 without one)."""

    flags: float
    batch: float

    @property
    def gain(self) -> float:
        return self.flags * self.batch - 1


def sim_true_gain(scenario: Any, overrides: Mapping[str, str], nodes: Sequence[str],
                  batch: int | None, xla_flags: Sequence[str], env: Mapping[str, str]
                  ) -> SimGain | None:
    """On a simulated scenario with a `tuning:` section: the true gain of running at `batch`
    (None: the landscape's) with these flags and env vars (None: no tuning section)."""
    from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
    from sweepd.kinds.xla_tuning.sim.hook import batch_ratio
    from sweepd.kinds.xla_tuning.sim.tuning import TuningSpec

    section = scenario.section("tuning")
    if not isinstance(section, TuningSpec):
        return None
    land = section.landscape_for(overrides)
    tag = section.tag_for(land, overrides)
    settings = [Setting(k.removeprefix("--"), v, Layer.XLA)
                for k, _, v in (f.partition("=") for f in xla_flags)]
    settings += [Setting(k, v, Layer.ENV) for k, v in env.items()]
    ratio = batch_ratio(scenario, section, section.model, nodes,
                        batch or section.per_device_batch_size, overrides)
    return SimGain(land.gain(settings, tag) or 0.0, ratio)


def write_recipe(path: Path, model: str, parallelism: str, note: str,
                 xla_flags: Sequence[str], env: Mapping[str, str]) -> str:
    """The recipe into the model's env file as this kind's `--apply` writes it: one block
    per model and parallelism, guarded by the parallelism, checked with `bash -n`; returns
    the block. ValueError: refused, nothing written."""
    from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
    from sweepd.kinds.xla_tuning.deploy.deploy import DeployError, settings_of, shell_line
    from sweepd.kinds.xla_tuning.deploy.hooks_apply import apply_env_patch

    try:
        lines = [shell_line(s) for s in settings_of(xla_flags, env)]
    except DeployError as e:
        raise ValueError(str(e)) from None
    return apply_env_patch(path, model, Parallelism.parse(parallelism), [f"# {note}"], lines)


def most_node_hours(spec: Mapping[str, Any], retries: int) -> tuple[float, str] | None:
    """The most node-hours an xla-tuning spec may take (`budget.node_hours`: its timebox
    and each job's own time limit), for a campaign's flags stage."""
    from sweepd.kinds.xla_tuning.runs.budget import node_hours

    return node_hours(spec, retries)
