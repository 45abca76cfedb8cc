"""The campaign's spec: a model, its parallelism, a cluster slot (spares included), a
budget in hours, and the stages to run (default: all four, in the seeds' order).

    kind: campaign
    model: deepseek3-671b
    parallelism: FSDP=8          # the DCN axes (FSDP x PP) give the nodes a job needs
    nodes: chi[2832,2863,...]    # the slot: more nodes than that are spares
    budget_hours: 12
    stages: [health, batch, flags, confirm]

A campaign of the confirm stage alone runs its A/B runs itself (`candidate`: the batch and
the flags to confirm against baseline-deployed); any other campaign starts each stage as a
sweep of its own (node perf, model perf, xla-tuning, a confirm campaign).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sweepd.kinds.spec import _Spec

Stage = Literal["health", "batch", "flags", "confirm"]
ORDER: tuple[str, ...] = ("health", "batch", "flags", "confirm")
# The budget's share of each stage (of the stages the spec keeps): node health is one wave
# of 1-node jobs, the batch search a dozen runs, the flag waves most of the night, confirm
# 2 x 3 runs.
SHARE = {"health": 0.1, "batch": 0.25, "flags": 0.5, "confirm": 0.15}
# The MaxText override each parallelism axis is passed as (xla-tuning.SKILL.md's template).
AXIS_OVERRIDES = {"FSDP": "dcn_fsdp_parallelism", "PP": "dcn_pipeline_parallelism",
                  "TP": "ici_tensor_parallelism"}
_AXIS = re.compile(r"^(FSDP|PP|TP)=([1-9][0-9]{0,3})$")


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
    """`FSDP=8`, `PP=4,FSDP=2`, `TP=8,FSDP=8` -> each axis's degree (ValueError: one line)."""
    axes: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        m = _AXIS.match(part)
        if m is None:
            raise ValueError(f"parallelism {text!r}: each part is FSDP=N, PP=N or TP=N")
        if m.group(1) in axes:
            raise ValueError(f"parallelism {text!r}: {m.group(1)} is given twice")
        axes[m.group(1)] = int(m.group(2))
    return axes


class CampaignSpec(_Spec):
    """From node health to a confirmed configuration: each stage a sweep of its own."""

    kind: Literal["campaign"]
    model: str  # required: every stage's model
    parallelism: str = Field(description="FSDP=8, PP=8, PP=4,FSDP=2 ...: the DCN axes "
                                         "(FSDP x PP) are the nodes a job takes")
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
        parse_parallelism(self.parallelism)
        if len(self.node_list) < self.job_nodes:
            raise ValueError(f"parallelism {self.parallelism} takes {self.job_nodes} nodes; "
                             f"the slot has {len(self.node_list)}")
        if self.stages == ["confirm"] and (self.candidate is None or self.candidate.empty):
            raise ValueError("a confirm stage alone needs a candidate (batch, xla_flags or "
                             "env) to put against baseline-deployed")
        for key in ("kind", "model", "nodes"):
            for name, extra in (("batch_stage", self.batch_stage),
                                ("flags_stage", self.flags_stage)):
                if key in extra:
                    raise ValueError(f"{name}.{key}: the campaign sets it")
        return self

    @property
    def job_nodes(self) -> int:
        """The nodes one job of the parallelism takes: its DCN axes (FSDP x PP)."""
        axes = parse_parallelism(self.parallelism)
        return axes.get("FSDP", 1) * axes.get("PP", 1)

    @property
    def needed_nodes(self) -> int:
        return self.job_nodes

    @property
    def runs_itself(self) -> bool:
        """A confirm stage alone: the A/B runs are this sweep's own."""
        return self.stages == ["confirm"]

    def parallelism_overrides(self) -> dict[str, int]:
        """Each axis of degree > 1 as the MaxText override the template passes."""
        return {AXIS_OVERRIDES[a]: n for a, n in parse_parallelism(self.parallelism).items()
                if n > 1}

    def stage_hours(self) -> dict[str, float]:
        """The budget split over the stages kept, in proportion to their shares."""
        total = sum(SHARE[s] for s in self.stages)
        return {s: self.budget_hours * SHARE[s] / total for s in self.stages}

    def default_name(self) -> str:
        if self.runs_itself:
            return f"{self.model} {self.job_nodes}N {self.parallelism} confirm"
        return f"{self.model} {self.parallelism} campaign"
