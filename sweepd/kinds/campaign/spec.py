"""The campaign's spec: a model, its parallelism, a cluster slot (spares included), a
budget in hours, and the stages to run (default: all four, in the seeds' order).

    kind: campaign
    model: deepseek3-671b
    parallelism: FSDP=8          # the DCN axes (FSDP x PP) give the nodes a job needs;
                                 # or several: [FSDP=8, PP=8] (batch, flags, confirm each)
    nodes: chi[2832,2863,...]    # the slot: more nodes than that are spares
    budget_hours: 12
    stages: [health, batch, flags, confirm]

A campaign of the confirm stage alone runs its A/B runs itself (`candidate`: the batch and
the flags to confirm against baseline-deployed); any other campaign starts each stage as a
sweep of its own (node perf, model perf, xla-tuning, a confirm campaign). With several
parallelisms, node health runs once and batch, flags and confirm run for each parallelism
in the order given, each stage's key then naming it (`batch PP=8`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sweepd.kinds.spec import AxisError, _Spec, axes_text, parse_axes

Stage = Literal["health", "batch", "flags", "confirm"]
ORDER: tuple[str, ...] = ("health", "batch", "flags", "confirm")
# The budget's share of each stage (of the stages the spec keeps): node health is one wave
# of 1-node jobs, the batch search a dozen runs, the flag waves most of the night, confirm
# 2 x 3 runs.
SHARE = {"health": 0.1, "batch": 0.25, "flags": 0.5, "confirm": 0.15}
# The MaxText override each parallelism axis is passed as (xla-tuning.SKILL.md's template).
AXIS_OVERRIDES = {"FSDP": "dcn_fsdp_parallelism", "PP": "dcn_pipeline_parallelism",
                  "TP": "ici_tensor_parallelism"}


class Candidate(BaseModel):
    """What a confirm stage puts against baseline-deployed: the batch (None: the config's)
    and the flags and env vars of the recipe (none: the batch alone)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    batch: int | None = Field(default=None, ge=1, le=4096)
    xla_flags: list[str] = Field(default_factory=list, max_length=12)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("xla_flags")
    @classmethod
    def _flags(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if not re.fullmatch(r"--[A-Za-z0-9_]+=\S+", f)]
        if bad:
            raise ValueError(f"xla_flags are `--name=value` words: {bad}")
        return v

    @property
    def empty(self) -> bool:
        return self.batch is None and not self.xla_flags and not self.env


def _all_stages() -> list[Stage]:
    return ["health", "batch", "flags", "confirm"]


def parse_parallelism(text: str) -> dict[str, int]:
    """`FSDP=8`, `PP=4,FSDP=2`, `TP=8,FSDP=8` -> each axis's degree, each up to 9999
    (ValueError: one line). Upper case, no spaces inside a part: the spec's text is
    normalised first (`_text`)."""
    try:
        return parse_axes(",".join(p.strip() for p in text.split(",")), max_digits=4,
                          loose=False)
    except AxisError as e:
        raise ValueError(f"parallelism {text!r}: {e.twice} is given twice" if e.twice else
                         f"parallelism {text!r}: each part is FSDP=N, PP=N or TP=N") from e


CELL_STAGES = ("batch", "flags", "confirm")   # run once per parallelism


def parallelism_overrides(par: str) -> dict[str, int]:
    """Each axis of degree > 1 as the MaxText override the template passes."""
    return {AXIS_OVERRIDES[a]: n for a, n in parse_parallelism(par).items() if n > 1}


def _text(par: str) -> str:
    """A parallelism as the stages name it: `PP=4,FSDP=2` (no spaces, upper case)."""
    return axes_text(parse_parallelism(par.replace(" ", "").upper()))


class CampaignSpec(_Spec):
    """From node health to a confirmed configuration: each stage a sweep of its own."""

    kind: Literal["campaign"]
    model: str  # required: every stage's model
    parallelism: str | list[str] = Field(
        description="FSDP=8, PP=8, PP=4,FSDP=2 ...: the DCN axes (FSDP x PP) are the nodes "
                    "a job takes; a list: batch, flags and confirm for each, in its order, "
                    "after one node health stage")
    health_model: str = Field(default="llama2-70b",
                              description="the 1-node model node health runs on each node")
    budget_hours: float = Field(gt=0, le=24 * 14)
    stages: list[Stage] = Field(default_factory=lambda: _all_stages(), min_length=1)
    confirm_runs: int = Field(default=3, ge=3, le=20,
                              description="runs each of baseline-deployed and candidate")
    candidate: Candidate | None = Field(
        default=None, description="a confirm stage alone: what it confirms")
    batch_stage: dict[str, Any] = Field(
        default_factory=dict, description="more model-perf spec fields (max_runs, upper)")
    flags_stage: dict[str, Any] = Field(
        default_factory=dict, description="more xla-tuning spec fields (profiles, thresholds)")

    @field_validator("parallelism")
    @classmethod
    def _parallelisms(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, str):
            return _text(v)
        if not 1 <= len(v) <= 4:
            raise ValueError("parallelism: one, or a list of 1 to 4")
        texts = [_text(p) for p in v]
        if len(set(texts)) != len(texts):
            raise ValueError("parallelism names a parallelism twice")
        return texts

    @field_validator("stages")
    @classmethod
    def _order(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("stages names a stage twice")
        if v != sorted(v, key=ORDER.index):
            raise ValueError(f"stages keep the seeds' order ({', '.join(ORDER)}); drop any "
                             "of them, but do not reorder")
        return v

    @model_validator(mode="after")
    def _slot(self) -> CampaignSpec:
        for par in self.parallelisms:
            if len(self.node_list) < self.nodes_of(par):
                raise ValueError(f"parallelism {par} takes {self.nodes_of(par)} nodes; "
                                 f"the slot has {len(self.node_list)}")
            for key, n in self.parallelism_overrides(par).items():
                if key in self.overrides and str(self.overrides[key]) != str(n):
                    raise ValueError(f"overrides.{key}={self.overrides[key]} contradicts "
                                     f"parallelism {par}; the parallelism sets it")
        if self.stages == ["confirm"] and (self.candidate is None or self.candidate.empty):
            raise ValueError("a confirm stage alone needs a candidate (batch, xla_flags or "
                             "env) to put against baseline-deployed")
        if self.candidate is not None and len(self.parallelisms) > 1:
            raise ValueError("a candidate is confirmed at one parallelism: give one")
        keep = self.keep_profiles or self.flags_stage.get("keep_profiles") is True
        if keep and "flags" in self.stages and self.several:
            # The next parallelism's flags stage would meet the arms the first one kept
            # (its pre-flight refuses a leftover TUNE_PROFILE block): it could never start.
            raise ValueError("keep_profiles keeps a flags stage's TUNE_PROFILE arms in "
                             "train_env.sh, which the next parallelism's flags stage would "
                             "refuse: keep them with one parallelism only")
        for key in ("kind", "model", "nodes", "parallelism"):
            for name, extra in (("batch_stage", self.batch_stage),
                                ("flags_stage", self.flags_stage)):
                if key in extra:
                    raise ValueError(f"{name}.{key}: the campaign sets it")
        return self

    @property
    def parallelisms(self) -> list[str]:
        """The parallelisms in the spec's order (one, or several)."""
        return [self.parallelism] if isinstance(self.parallelism, str) else list(self.parallelism)

    @property
    def several(self) -> bool:
        return len(self.parallelisms) > 1

    @property
    def shown(self) -> str:
        """The parallelism(s) as a line says them."""
        return " + ".join(self.parallelisms)

    @staticmethod
    def nodes_of(par: str) -> int:
        """The nodes one job of a parallelism takes: its DCN axes (FSDP x PP)."""
        axes = parse_parallelism(par)
        return axes.get("FSDP", 1) * axes.get("PP", 1)

    @property
    def job_nodes(self) -> int:
        """The healthy nodes the campaign needs: its largest parallelism's job."""
        return max(self.nodes_of(p) for p in self.parallelisms)

    @property
    def needed_nodes(self) -> int:
        return self.job_nodes

    def key(self, stage: str, par: str) -> str:
        """A stage's key (its link in the store, its name in `list`): the stage, and with
        several parallelisms the one it is for (`batch PP=8`)."""
        return f"{stage} {par}" if self.several and stage in CELL_STAGES else stage

    def cell_of(self, key: str) -> tuple[str, str | None]:
        """(stage, parallelism) of a stage's key; node health's steps have none."""
        stage, _, par = key.partition(" ")
        if stage not in CELL_STAGES:
            return stage, None
        return stage, par or self.parallelisms[0]

    @property
    def runs_itself(self) -> bool:
        """A confirm stage alone: the A/B runs are this sweep's own."""
        return self.stages == ["confirm"]

    def parallelism_overrides(self, par: str | None = None) -> dict[str, int]:
        """Each axis of degree > 1 as the MaxText override the template passes (of `par`,
        default the first parallelism)."""
        return parallelism_overrides(par or self.parallelisms[0])

    def stage_hours(self) -> dict[str, float]:
        """The budget split over the stages kept, in proportion to their shares (a stage
        run per parallelism shares its part among them), by stage key."""
        total = sum(SHARE[s] for s in self.stages)
        out: dict[str, float] = {}
        for s in self.stages:
            pars = self.parallelisms if s in CELL_STAGES else [self.parallelisms[0]]
            for par in pars:
                out[self.key(s, par)] = self.budget_hours * SHARE[s] / total / len(pars)
        return out

    def default_name(self) -> str:
        if self.runs_itself:
            return f"{self.model} {self.job_nodes}N {self.shown} confirm"
        return f"{self.model} {self.shown} campaign"
