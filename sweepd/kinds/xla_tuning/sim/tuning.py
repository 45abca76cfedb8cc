"""The scenario's optional `tuning:` section: XLA/NCCL flag-effect landscapes (issue 14); the
simulator reads it through this kind's sim hook (`hook.py`).

    tuning:
      model: deepseek3-671b        # jobs of this model follow the landscapes
      landscapes: default          # or a list: inline landscapes and/or YAML file paths
      per_device_batch_size: 7     # the batch the landscapes were measured at (temp scales)
      tags:                        # config tag -> the overrides that select it
        sparse: {sparse_matmul: true, use_turbo_grouped_gemm: true, use_deepep_dispatch: true}
        dense: {}
      env_file_last: false         # true: the model's env file beats the job's own flags
      toolkit: ../maxtext-slurm    # optional: a toolkit checkout whose env file jobs source
      unknown_flags: [xla_gpu_enable_async_collective_permute]   # the image rejects these
      platform: gpu                # tpu: a TPU VM's jobs (their dump as libtpu writes it)

`default` is `kinds/xla_tuning/catalog/defaults.default_landscapes()` (the real FSDP=8 and PP=8
cells). A file path is read relative to the scenario file. A job picks the landscape of its
parallelism (`dcn_fsdp_parallelism`, `dcn_pipeline_parallelism`, `ici_tensor_parallelism`
overrides, as the SKILL.md's submission template passes them; none: the first landscape,
the config's own parallelism) and the config tag whose overrides it carries (the most
specific match; a tag with no overrides matches any job).

`toolkit` (a path, relative to the scenario file): the model's env file is the checkout's real
`configs/<model>.env.sh`, sourced by bash for each job with its passthrough overrides (as
`_train.sh` does, guards and all), instead of the landscapes' `deployed` lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from sweepd.kinds.spec import axes_text
from sweepd.kinds.xla_tuning.catalog.catalog import Axis, Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import default_landscapes
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, truth
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS
from sweepd.util.model_shapes import resolve_model

# The override each axis is passed as (xla-tuning.SKILL.md, "Submission template").
AXIS_OVERRIDES: dict[Axis, str] = {
    Axis.FSDP: "dcn_fsdp_parallelism",
    Axis.PP: "dcn_pipeline_parallelism",
    Axis.TP: "ici_tensor_parallelism",
}
DEFAULT_TAGS: dict[str, dict[str, str]] = {
    "sparse": {"sparse_matmul": "true", "use_turbo_grouped_gemm": "true",
               "use_deepep_dispatch": "true"},
    "dense": {},
}


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class TuningSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str = "deepseek3-671b"
    landscapes: Literal["default"] | tuple[Landscape, ...] = "default"
    per_device_batch_size: int = Field(7, ge=1)
    tags: dict[str, dict[str, str]] = Field(default_factory=lambda: dict(DEFAULT_TAGS))
    env_file_last: bool = False
    unknown_flags: frozenset[str] = frozenset()  # flags this image's XLA rejects (all cells)
    toolkit: Path | None = None  # a checkout whose configs/<model>.env.sh the jobs source
    # `tpu`: the jobs are a TPU VM's (MaxText run directly, no toolkit): the HLO dump is
    # written only where XLA_FLAGS' --xla_dump_to asks (ENABLE_XLA_DUMP means nothing), under
    # libtpu's file name, and libtpu refuses a dump flag in LIBTPU_INIT_ARGS at start.
    platform: Literal["gpu", "tpu"] = "gpu"

    @field_validator("toolkit", mode="before")
    @classmethod
    def _toolkit_path(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        base = Path((info.context or {}).get("base_dir", "."))
        path = base / str(value)
        if not (path / "configs").is_dir():
            raise ValueError(f"tuning.toolkit {path} has no configs/ directory")
        return path

    def env_file(self, model: str) -> Path | None:
        """The toolkit checkout's env file of the model (None: no toolkit, or no file)."""
        if self.toolkit is None:
            return None
        path = self.toolkit / "configs" / f"{model}.env.sh"
        return path if path.is_file() else None

    @field_validator("landscapes", mode="before")
    @classmethod
    def _read_files(cls, value: Any, info: ValidationInfo) -> Any:
        if value == "default" or not isinstance(value, list):
            return value
        base = Path((info.context or {}).get("base_dir", "."))
        return [_read_landscape(base / item) if isinstance(item, str) else item
                for item in value]

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_text(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {str(tag): {str(k): _text(v) for k, v in (over or {}).items()}
                if isinstance(over, dict) else over for tag, over in value.items()}

    @field_validator("landscapes")
    @classmethod
    def _parallelisms_parse(cls, value: Any) -> Any:
        if isinstance(value, tuple):
            if not value:
                raise ValueError("tuning.landscapes is empty")
            for land in value:
                Parallelism.parse(land.parallelism)
        return value

    def cells(self) -> tuple[Landscape, ...]:
        cells = default_landscapes() if self.landscapes == "default" else self.landscapes
        if not self.unknown_flags:
            return cells
        return tuple(land.model_copy(update={"unknown": land.unknown | self.unknown_flags})
                     for land in cells)

    def landscape_for(self, overrides: Mapping[str, str]) -> Landscape:
        """The landscape of the job's parallelism; ValueError naming what the scenario has."""
        cells = self.cells()
        want = job_parallelism(overrides)
        if want is None:
            return cells[0]
        for land in cells:
            if _live(Parallelism.parse(land.parallelism)) == want:
                return land
        have = ", ".join(land.parallelism for land in cells)
        raise ValueError(f"the simulated cluster has no tuning landscape for parallelism "
                         f"{_text_of(want)} (it has {have})")

    def tag_for(self, land: Landscape, overrides: Mapping[str, str]) -> str:
        """The config tag whose overrides the job carries (most specific first)."""
        known = [t for t in land.tags if t in self.tags]
        for tag in sorted(known, key=lambda t: -len(self.tags[t])):
            if all(overrides.get(k) == v for k, v in self.tags[tag].items()):
                return tag
        return land.tags[0]


def tuning_for(section: TuningSpec | None, model: str) -> TuningSpec | None:
    """The scenario's tuning section (`Scenario.section("tuning")`) when the jobs of `model`
    (resolved) follow its landscapes, else None."""
    if section is None or resolve_model(section.model).name != model:
        return None
    return section


def _read_landscape(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read landscape file {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"landscape file {path} does not hold a mapping")
    return raw


def _live(par: Parallelism) -> frozenset[tuple[Axis, int]]:
    return frozenset((a, n) for a, n in par.axes if n > 1)


def _text_of(axes: frozenset[tuple[Axis, int]]) -> str:
    return axes_text(dict(sorted(axes))) or "none"


def job_parallelism(overrides: Mapping[str, str]) -> frozenset[tuple[Axis, int]] | None:
    """Axes of degree > 1 the job's overrides set; None when it sets none (config default)."""
    axes: set[tuple[Axis, int]] = set()
    for axis, key in AXIS_OVERRIDES.items():
        if key not in overrides:
            continue
        try:
            degree = int(overrides[key])
        except ValueError as exc:
            raise ValueError(f"{key}={overrides[key]!r} is not an integer") from exc
        if degree > 1:
            axes.add((axis, degree))
    return frozenset(axes) if axes else None


def parallelism_overrides(parallelism: str) -> dict[str, str]:
    """The passthrough overrides of a parallelism (SKILL.md submission template)."""
    par = Parallelism.parse(parallelism)
    return {key: str(par.degree(axis)) for axis, key in AXIS_OVERRIDES.items()
            if axis is not Axis.TP or par.degree(Axis.TP) > 1}


# ---- ground truth ----------------------------------------------------------------------------

TUNING_SCENARIO = Path(__file__).with_name("tuning_scenario.yaml")
# One TPU v5e chip (`platform: tpu` sweeps, the TPU example).
TPU_SCENARIO = Path(__file__).with_name("tpu_scenario.yaml")


class CellTruth(BaseModel):
    """The best recipe of at most `max_flags` settings for one (parallelism x config tag)."""

    model_config = ConfigDict(frozen=True)
    parallelism: str
    tag: str
    recipe: tuple[str, ...]      # profile names; () = baseline-deployed is best
    settings: tuple[str, ...]    # their `key=value`s
    gain: float                  # true TGS / baseline-deployed's

    @property
    def text(self) -> str:
        recipe = "+".join(self.recipe) or "baseline-deployed"
        return f"{self.parallelism}/{self.tag}: {recipe} ({(self.gain - 1) * 100:+.1f} %)"


def ground_truth(spec: TuningSpec, max_flags: int = THRESHOLDS.max_flags) -> tuple[CellTruth, ...]:
    """Per landscape and config tag, `landscape.truth` over the default catalog."""
    out: list[CellTruth] = []
    for land in spec.cells():
        par = Parallelism.parse(land.parallelism)
        profiles = default_catalog(par)
        by_name = {p.name: p for p in profiles}
        for tag in land.tags:
            as_primary = land.model_copy(update={"tags": (tag, *(t for t in land.tags
                                                                 if t != tag))})
            best = truth(as_primary, profiles, max_flags)
            labels = tuple(s.label for name in best.recipe for s in by_name[name].settings)
            out.append(CellTruth(parallelism=land.parallelism, tag=tag, recipe=best.recipe,
                                 settings=labels, gain=best.gain))
    return tuple(out)


def truth_line(spec: TuningSpec, max_flags: int = THRESHOLDS.max_flags) -> str:
    """One line for the demo: `ground truth: FSDP=8/sparse: ag1G (+11.6 %); ...`."""
    return "ground truth: " + "; ".join(c.text for c in ground_truth(spec, max_flags))
