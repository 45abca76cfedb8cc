"""The model perf sweep's spec: the swept parameter, its candidates or bounds, the budget."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sweepd.kinds.spec import Scalar, _Spec
from sweepd.util.model_shapes import resolve_model

BATCH = "per_device_batch_size"   # the one parameter with a memory-guided search


class ModelPerfSpec(_Spec):
    """Find the parameter value (default per_device_batch_size) with the highest steady TGS."""

    kind: Literal["model-perf"]
    model: str  # required here: no default model for a batch search
    parameter: str = Field(default=BATCH, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    values: list[Scalar] | None = Field(
        default=None, description="explicit candidates; default: 1..upper for integer params")
    lower: int = Field(default=1, ge=1)
    upper: int | None = Field(default=None, ge=1, le=4096)
    gpu_memory_gib: float | None = Field(default=None, gt=0, le=4096)
    mem_fraction: float | None = Field(default=None, gt=0, le=1)
    max_runs: int = Field(default=12, ge=1, le=200)

    @model_validator(mode="after")
    def _bounds(self) -> ModelPerfSpec:
        if self.upper is not None and self.upper < self.lower:
            raise ValueError(f"upper ({self.upper}) is below lower ({self.lower})")
        if self.values is not None and len(self.values) == 0:
            raise ValueError("values is empty")
        if self.values is not None and len(set(self.values)) != len(self.values):
            raise ValueError("values names a value twice")
        if self.parameter in self.overrides:
            raise ValueError(f"{self.parameter} is the swept parameter; remove it from overrides")
        if self.values is None and self.parameter != BATCH:
            raise ValueError(f"values are needed for {self.parameter}: only {BATCH} has a "
                             "memory-guided search")
        if self.values is not None:
            _check_values(self.parameter, self.values)
        if len(self.node_list) < self.needed_nodes:
            raise ValueError(f"{self.model} needs at least {self.needed_nodes} nodes; "
                             f"{len(self.node_list)} pinned (min_nodes overrides that)")
        return self

    @property
    def needed_nodes(self) -> int:
        """`min_nodes`, by default more than half the pinned nodes (and at least the
        model's own minimum): a search on fewer nodes is not the one that was asked for."""
        return self.min_nodes or max(resolve_model(self.model).min_nodes,
                                     len(self.node_list) // 2 + 1)

    def default_name(self) -> str:
        return f"{self.model} {len(self.node_list)}N {self.parameter}"


def _check_values(parameter: str, values: list[Scalar]) -> None:
    """Values a job can run: one type (a mix is a typo), and batch sizes of at least 1."""
    numbers = [v for v in values if isinstance(v, int | float)]
    if numbers and len(numbers) != len(values):
        raise ValueError(f"values mix numbers and text: {values}")
    if parameter == BATCH and not all(isinstance(v, int) and v >= 1 for v in values):
        raise ValueError(f"{BATCH} values must be whole numbers of at least 1: {values}")
