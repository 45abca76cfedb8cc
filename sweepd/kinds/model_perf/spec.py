"""The model perf sweep's spec: the swept parameter, its candidates or bounds, the budget."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from sweepd.kinds.model_perf.estimate import sharding_of, weight_bytes
from sweepd.kinds.model_perf.params import ENV_PREFIX
from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.kinds.model_perf.two_param.pairs import ONE_PARAMETER, SECOND, is_fraction
from sweepd.kinds.spec import Scalar, _Spec, axes_text, model_of_setup, parse_axes
from sweepd.util.model_shapes import MODELS, ModelShape, UnknownModel, find_model, resolve_model

BATCH = "per_device_batch_size"   # the one parameter with a memory-guided search
# The MaxText override each parallelism axis is passed as (xla-tuning.SKILL.md's template).
AXIS_OVERRIDES = {"FSDP": "dcn_fsdp_parallelism", "PP": "dcn_pipeline_parallelism",
                  "TP": "ici_tensor_parallelism"}


def parse_parallelism(text: str) -> dict[str, int]:
    """`FSDP=8`, `pp=4, fsdp=2` -> each axis's degree, in the order given, each up to 9999
    (ValueError: one line)."""
    return parse_axes(text, max_digits=4)


class SecondKnob(BaseModel):
    """A second knob searched with the batch: its values, the config's own value first."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    parameter: str
    values: list[Scalar] = Field(min_length=2)

    @model_validator(mode="after")
    def _known(self) -> SecondKnob:
        name = self.parameter.removeprefix(ENV_PREFIX)
        if name in ONE_PARAMETER:
            raise ValueError(f"{name} changes what is trained: it stays a one-parameter "
                             f"sweep (sweep it as parameter, not second)")
        if self.parameter not in SECOND:
            raise ValueError(f"second.parameter must be one of {', '.join(SECOND)} (the "
                             f"knobs that leave the training unchanged), not {self.parameter}")
        if len(set(map(str, self.values))) != len(self.values):
            raise ValueError("second.values names a value twice")
        if is_fraction(self.parameter) and not all(
                isinstance(v, int | float) and 0 < v <= 1 for v in self.values):
            raise ValueError(f"second.values of {self.parameter} are fractions in (0, 1]: "
                             f"{self.values}")
        if not is_fraction(self.parameter) and not all(isinstance(v, str) for v in self.values):
            raise ValueError(f"second.values of {self.parameter} are policy names: "
                             f"{self.values}")
        return self


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
    second: SecondKnob | None = Field(
        default=None,
        description="a second knob searched with per_device_batch_size: "
                    "{parameter: remat_policy | _env_XLA_PYTHON_CLIENT_MEM_FRACTION, values: "
                    "[the config's value first, ...]}")
    parallelism: str | None = Field(
        default=None,
        description="FSDP=8, PP=4,FSDP=2, TP=8,FSDP=8 ...: each axis above 1 is passed as "
                    "its MaxText override (dcn_fsdp_parallelism, dcn_pipeline_parallelism, "
                    "ici_tensor_parallelism) with every job; its DCN axes (FSDP x PP) are "
                    "the pinned nodes, all of them in every job")
    max_runs: int = Field(default=THRESHOLDS.max_runs, ge=1, le=200)
    multi_peak: bool = Field(
        default=False,
        description="the TGS curve may have a second peak below the runs (another kernel or "
                    "schedule at small batches): before stopping, halve below the lowest run "
                    "down to batch 8 while it measures within 15% of the best, then bisect "
                    "each wide gap below the best that a valley 5% deep between its runs "
                    "would open (a departure from SKILL.md's single-peak narrowing; about "
                    "+1.0-1.4 runs). Off, the verdict names such gaps")
    noise_floor: float | None = Field(
        default=None, ge=0.0001, le=0.2,
        description="the least run-to-run TGS noise (relative) the search allows for, and "
                    "what it assumes until the runs measure more; the runs' own steady "
                    "steps may show more. Unset: 1 %, sweepd's default (GPU clusters); a "
                    "quiet single accelerator measures far less (a TPU v5e chip: 0.02-0.05 "
                    "% between runs), and there a floor of 0.001, or measured_noise, lets "
                    "the rules tell apart values a few tenths of a percent apart")
    measured_noise: bool | None = Field(
        default=None,
        description="unset: on for the local backend (one box: every run on the same "
                    "accelerator, so its steps show the noise between its runs), off on a "
                    "cluster (the seed's fixed 1 %: a run's nodes drift beyond what its "
                    "steps show). true: decide with the noise the runs measure once their "
                    "steady steps put it "
                    "far below the prior (a quarter or less of noise_floor or 1 %), never "
                    "below 0.05 %, once the leader has run again after the second pass to "
                    "measure the noise between runs the steps cannot show (the prior until "
                    "then; model_perf.noise_probe; a departure from the seed's "
                    "fixed 1 %: on the recorded TPU v5e curves it finds the best of every "
                    "curve where the default chose 2.4 % and 0.45 % under it; "
                    "docs/benchmarks.md)")
    measure_noise: bool = Field(
        default=False,
        description="before the verdict, run the best again: two runs of one value measure "
                    "the run-to-run noise a run's steps cannot show (placement, clocks, "
                    "another tenant offset every step alike); beyond 2 % apart, the search "
                    "goes on at that noise (a departure from SKILL.md's one run a value; "
                    "about +1.5 runs)")
    check_slowdown: bool = Field(
        default=False,
        description="check that the runs stay comparable (a node throttling or a degraded "
                    "GPU slows every job after it) at any noise: before the verdict the best "
                    "runs again where a later run reads within 10% of it; a value run again "
                    "that reads lower beyond the noise, confirmed by one more run, stops the "
                    "sweep to ask (model_perf.nodes_slowed) instead of claiming an optimum "
                    "from mixed runs. Without it, runs made again anyway (noise above 1%) "
                    "are read so, and at the default noise the best runs again only where a "
                    "later run reads below the chord of its neighbours (a departure from "
                    "SKILL.md's one run a value; about +1 run)")
    extend_budget: bool = Field(
        default=False,
        description="when max_runs runs out with an unexplored gap beside the best, take "
                    "up to 4 more runs there instead of stopping to ask")
    use_prior: bool = Field(
        default=True,
        description="start from the latest settled sweep of the same cell (model, nodes, "
                    "config): its runs, scaled by the values both ran, stand in for values "
                    "not run here, so a cell swept before settles in about one run. false: "
                    "search afresh (after a change of image, kernel or code that may move "
                    "the peak where the first run does not look)")
    toolkit_shape: ModelShape | None = Field(
        default=None,
        description="set by sweepd: the shape the toolkit's configs/<model>.gpu.yml gave at "
                    "acceptance, for a model with no built-in shape")

    @model_validator(mode="before")
    @classmethod
    def _toolkit_shape(cls, data: Any, info: ValidationInfo) -> Any:
        """Where the daemon knows the toolkit repo, a model it defines gets the shape its
        config gives, recorded in the spec so the planner needs no repo. A shape given
        with the spec must be that one (a stored spec submitted again); the CLI passes it
        on for the daemon to judge."""
        if not isinstance(data, dict):
            return data
        given = _shape(data.get("toolkit_shape"))
        data = data if given is None else {**data, "toolkit_shape": given}
        context = info.context or {}
        if context.get("client") or not isinstance(data.get("model"), str):
            return data
        try:
            name, shape = find_model(data["model"], context.get("repo"))
        except UnknownModel:
            return data   # the model field's own validator says so, at its location
        derived = shape if shape is not None and name not in MODELS else None
        if given is not None and given != derived:
            where = (f"configs/{name}.gpu.yml gives {asdict(derived)}" if derived else
                     f"{name} has {'a built-in shape' if name in MODELS else 'no config shape'}")
            raise ValueError(f"toolkit_shape is set by sweepd from the toolkit's config, not "
                             f"given ({where}); remove it")
        return {**data, "toolkit_shape": derived}

    @model_validator(mode="before")
    @classmethod
    def _parallelism_overrides(cls, data: Any) -> Any:
        """The parallelism's axes join `overrides`, so they reach every job (and the memory
        estimate, and the prior-sweep match of the cell) the way any override does. An
        override that sets an axis to another degree contradicts it: refused. The same
        degree (a stored spec submitted again) is the same spec."""
        if not isinstance(data, dict) or not isinstance(data.get("parallelism"), str):
            return data
        par = parse_parallelism(data["parallelism"])
        given = data.get("overrides") or {}
        if not isinstance(given, dict):
            return data   # the overrides field's own validator says so
        # Axes at 1 are left to the config (every override lengthens the job name).
        axes: dict[str, Scalar] = {AXIS_OVERRIDES[a]: n for a, n in par.items() if n > 1}
        for key, degree in axes.items():
            if key in given and str(given[key]) != str(degree):
                raise ValueError(f"overrides.{key}={given[key]} contradicts parallelism "
                                 f"{axes_text(par)} ({key}={degree}); give the axis "
                                 "once")
        return {**data, "parallelism": axes_text(par), "overrides": {**given, **axes}}

    @classmethod
    def known_model(cls, name: str, context: dict[str, Any]) -> str:
        """`kinds.spec.model_of_setup`; with no shape the search starts with a small first
        probe (search_space._small_start)."""
        return model_of_setup(name, context)

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
        if self.second is not None:
            _check_second(self)
        if self.parallelism is not None:
            _check_parallelism(self)
        # What the memory estimate reads from the overrides: a typo is one clear line now,
        # not a planner error later.
        weight_bytes(self.overrides)
        sharding_of(self.overrides, len(self.node_list), 8, False)
        if len(self.node_list) < self.needed_nodes:
            raise ValueError(f"{self.model} needs at least {self.needed_nodes} nodes; "
                             f"{len(self.node_list)} pinned (min_nodes overrides that)")
        return self

    @property
    def needed_nodes(self) -> int:
        """`min_nodes`, by default more than half the pinned nodes (and at least the
        model's own minimum): a search on fewer nodes is not the one that was asked for.
        With a parallelism, every pinned node: a job on fewer is another parallelism."""
        if self.parallelism is not None:
            return len(self.node_list)
        shape = self.known_shape
        return self.min_nodes or max(shape.min_nodes if shape else 1,
                                     len(self.node_list) // 2 + 1)

    @property
    def known_shape(self) -> ModelShape | None:
        """The model's shape: the toolkit config's when it gave one, else the built-in one;
        None: no shape is known (the search then starts small, with no estimate)."""
        if self.toolkit_shape is not None:
            return self.toolkit_shape
        try:
            return resolve_model(self.model)
        except UnknownModel:
            return None

    def cluster_problem(self, gpus_per_node: int) -> str | None:
        """TP is ICI, inside one node: its degree must divide the cluster's GPUs per node."""
        tp = parse_parallelism(self.parallelism).get("TP", 1) if self.parallelism else 1
        if gpus_per_node % tp:
            return (f"parallelism {self.parallelism!r}: TP={tp} does not divide the "
                    f"{gpus_per_node} GPUs of a node (cluster.gpus_per_node)")
        return None

    def default_name(self) -> str:
        second = f" x {self.second.parameter.removeprefix(ENV_PREFIX)}" if self.second else ""
        par = f" {self.parallelism}" if self.parallelism else ""
        return f"{self.model} {len(self.node_list)}N{par} {self.parameter}{second}"


def _shape(raw: object) -> ModelShape | None:
    """A shape given with a spec (JSON, as a stored spec holds it), checked field by field."""
    if raw is None or isinstance(raw, ModelShape):
        return raw
    try:
        return _SHAPE.validate_python(raw)
    except ValidationError as e:
        raise ValueError(f"toolkit_shape is not a model shape: {e.errors()[0]['msg']}") from None


_SHAPE: TypeAdapter[ModelShape] = TypeAdapter(ModelShape)


def _check_values(parameter: str, values: list[Scalar]) -> None:
    """Values a job can run: one type (a mix is a typo), and batch sizes of at least 1."""
    numbers = [v for v in values if isinstance(v, int | float)]
    if numbers and len(numbers) != len(values):
        raise ValueError(f"values mix numbers and text: {values}")
    if parameter == BATCH and not all(isinstance(v, int) and v >= 1 for v in values):
        raise ValueError(f"{BATCH} values must be whole numbers of at least 1: {values}")


def _check_parallelism(spec: ModelPerfSpec) -> None:
    """The DCN axes (FSDP x PP) span the nodes: every job runs on all the pinned nodes (no
    spare, no substitution), so they must be that many; min_nodes cannot allow fewer."""
    par = parse_parallelism(spec.parallelism or "")
    dcn = par.get("FSDP", 1) * par.get("PP", 1)
    if dcn != len(spec.node_list):
        raise ValueError(f"parallelism {spec.parallelism}: its DCN axes (FSDP x PP) make "
                         f"{dcn} nodes, not the {len(spec.node_list)} pinned")
    if spec.min_nodes is not None and spec.min_nodes != dcn:
        raise ValueError(f"min_nodes {spec.min_nodes}: a {spec.parallelism} job takes all "
                         f"{dcn} pinned nodes; leave min_nodes out")


def _check_second(spec: ModelPerfSpec) -> None:
    """A second knob goes with the batch search only, and is not also fixed in the config."""
    second = spec.second
    assert second is not None
    if spec.parameter != BATCH:
        raise ValueError(f"second goes with parameter {BATCH} (the memory-guided search), "
                         f"not {spec.parameter}")
    name = second.parameter.removeprefix(ENV_PREFIX)
    if second.parameter in spec.overrides or name in spec.env:
        raise ValueError(f"{name} is the second swept parameter; remove it from "
                         f"{'env' if name in spec.env else 'overrides'}")
    if is_fraction(second.parameter) and spec.mem_fraction is not None:
        raise ValueError("mem_fraction is set and XLA_PYTHON_CLIENT_MEM_FRACTION is swept: "
                         "remove mem_fraction")
