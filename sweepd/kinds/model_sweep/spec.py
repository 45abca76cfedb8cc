"""The model sweep's spec: the commits, the model x node-count matrix, an earlier sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from sweepd.kinds.spec import _Spec
from sweepd.util.model_shapes import UnknownModel, resolve_model

# batch-sweep.SKILL.md "Model sweep" Step 2: 10 jobs per commit.
DEFAULT_MATRIX: dict[str, tuple[int, ...]] = {
    "llama2-70b": (1, 2), "mixtral-8x22b": (4, 8), "grok-1": (8,), "grok-2": (8,),
    "llama3.1-405b": (8,), "deepseek3-671b": (8,), "kimi-k2-1t": (8,), "qwen3-480b-a35b": (8,),
}
# Proxy configs and `default` are not real models; the SKILL.md skips them.
SKIPPED_PREFIXES = ("ds-proxy", "default")


class ModelSweepSpec(_Spec):
    """All models x node counts on 1 or 2 commits (refs or SHAs; the first is the baseline)."""

    kind: Literal["model-sweep"]
    commits: list[str] = Field(default_factory=lambda: ["HEAD"], min_length=1, max_length=2)
    repo: Path | None = Field(default=None, strict=False,  # a path arrives as a string
                               description="git repo; None: commits are labels")
    matrix: dict[str, list[int]] = Field(
        default_factory=lambda: {m: list(n) for m, n in DEFAULT_MATRIX.items()})
    compare_to: int | None = Field(default=None, ge=1,
                                   description="an earlier model sweep to compare against")

    @field_validator("commits")
    @classmethod
    def _commits(cls, v: list[str]) -> list[str]:
        for c in v:
            if not c or c.startswith("-") or any(ch.isspace() for ch in c):
                raise ValueError(f"bad commit {c!r}")
        if len(set(v)) != len(v):
            raise ValueError("the two commits are the same")
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix(cls, v: dict[str, list[int]]) -> dict[str, list[int]]:
        if not v:
            raise ValueError("the matrix is empty")
        out: dict[str, list[int]] = {}
        for name, counts in v.items():
            if name.startswith(SKIPPED_PREFIXES):
                raise ValueError(f"{name!r}: proxy and default configs are not swept")
            try:
                shape = resolve_model(name)
            except UnknownModel as e:
                raise ValueError(str(e)) from e
            if not counts or any(n < 1 for n in counts) or len(set(counts)) != len(counts):
                raise ValueError(f"{name}: node counts must be distinct and positive")
            if min(counts) < shape.min_nodes:
                raise ValueError(f"{name} needs at least {shape.min_nodes} nodes, "
                                 f"not {min(counts)}")
            if shape.name in out:
                raise ValueError(f"{name!r} names {shape.name} twice")
            out[shape.name] = sorted(counts)
        return out

    @model_validator(mode="after")
    def _fits(self) -> ModelSweepSpec:
        pinned = len(self.node_list)
        over = [f"{m} {n}N" for m, counts in self.matrix.items() for n in counts if n > pinned]
        if over:
            raise ValueError(f"{', '.join(over)} need more than the {pinned} pinned nodes")
        return self

    @property
    def needed_nodes(self) -> int:
        # The engine needs min(this, len(run nodes)): each run keeps its whole node list,
        # since a shrunken list is no longer comparable across sweeps.
        return self.min_nodes or max(n for counts in self.matrix.values() for n in counts)

    def default_name(self) -> str:
        return f"model sweep {' vs '.join(self.commits)}"
