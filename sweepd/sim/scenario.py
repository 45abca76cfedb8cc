"""The simulated cluster's scenario file: cluster shape, ground truth, faults (docs/scenario.md).

Validated with pydantic so a typo in a scenario fails loudly at load time instead of
silently producing a healthy cluster.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal, Self

import hostlist
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from sweepd.kinds.modules import kind_modules
from sweepd.util.model_shapes import UnknownModel, resolve_model

DEFAULT_SCENARIO = Path(__file__).with_name("default_scenario.yaml")
# The nodes of the shipped scenarios (the default one and every kind's demo).
DEMO_NODES = "chi[2832,2863,2867-2868,2870,2872,2880-2881]"

GPU_PEAK_TFLOPS: dict[str, float] = {
    "MI355X": 2500, "MI300X": 1307, "H100": 989, "H200": 989, "B200": 2250,
    "TPU-v5e": 197,   # one TPU v5e chip ("TPU v5 lite"), bf16
}


class FaultKind(StrEnum):
    HSA_ERROR = "hsa_error"
    ECC = "ecc"
    NODE_CRASH = "node_crash"
    HANG = "hang"
    RCCL_FLAKE = "rccl_flake"
    COORD_TIMEOUT = "coord_timeout"
    UNKNOWN_FLAG = "unknown_flag"
    CONFIG_ERROR = "config_error"
    ENVIRONMENT = "environment"          # the trainer dies importing jax, on every rank
    CONTROLLER_DOWN = "controller_down"
    OOM = "oom"
    NIC = "nic"                          # ionic CQE error, then a hang at the first collective
    CHECKOUT_OUTAGE = "checkout_outage"  # HTTP 5xx from the code host during preflight
    HOST_OOM = "host_oom"                # the kernel's OOM killer on one node mid-training
    CLEANUP_143 = "cleanup_143"          # every step done, then exit 143 in teardown


HangPhase = Literal["before_memstats", "compile", "training"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterSpec(_Strict):
    nodes: str
    gpu: Literal["MI355X", "MI300X", "H100", "H200", "B200", "TPU-v5e"] = "MI300X"
    gpu_memory_gib: float = Field(192, gt=0)
    time_scale: float = Field(0.01, gt=0)
    noise: float = Field(0.01, ge=0, lt=0.5)
    seed: int = 1

    @field_validator("nodes")
    @classmethod
    def _hostlist(cls, value: str) -> str:
        try:
            names = hostlist.expand_hostlist(value)
        except hostlist.BadHostlist as exc:
            raise ValueError(f"bad hostlist {value!r}: {exc}") from exc
        if not names:
            raise ValueError("cluster.nodes is empty")
        return value

    @property
    def node_list(self) -> list[str]:
        return list(hostlist.expand_hostlist(self.nodes))

    @property
    def peak_tflops(self) -> float:
        return GPU_PEAK_TFLOPS[self.gpu]


class MeasuredPoint(_Strict):
    """One batch as a real run measured it."""

    tgs: float = Field(gt=0)                  # steady tokens/s/device
    memory_gb: float | None = Field(None, gt=0)   # the compiled-memory line's total


class MeasuredOom(_Strict):
    """Every batch from `from_batch` up fails at compile (out of memory)."""

    from_batch: int = Field(ge=1)
    required_gib: float | None = Field(None, gt=0)   # the OOM's HLO temporaries, if known
    available_gib: float | None = Field(None, gt=0)  # ... and the HBM it had (default hbm_gib)


class Warmup(_Strict):
    """Steps 0-2 are not step times: step 0 carries the compile's tail, step 1 the first
    real dispatch, step 2 returns before the device finishes (a very high tokens/s)."""

    step0_s: float = Field(1.8, gt=0)
    step1_s: float = Field(0.6, gt=0)
    step2_share: float = Field(0.28, gt=0, le=1)   # of a steady step's time


class MeasuredCurve(_Strict):
    """A recorded curve replayed instead of the formula (docs/scenario.md, "Recorded
    scenarios"). Only the batches in `points` (and those >= the OOM) exist: any other
    batch fails at startup, so a spec replaying it lists `values:`."""

    points: dict[int, MeasuredPoint] = Field(min_length=1)
    oom: MeasuredOom | None = None
    hbm_gib: float = Field(gt=0)                  # device memory (Memstats' limit)
    argument_gb: float = Field(0.0, ge=0)         # the line's fixed part (params, optimizer)
    run_noise: float = Field(0.0, ge=0, lt=0.5)   # relative sd of the steady mean, run to run
    step_noise: float = Field(0.0, ge=0, lt=0.5)  # relative sd step to step within a run
    warmup: Warmup = Field(default_factory=Warmup)
    fixed_cost_s: float = Field(47.0, gt=0)       # seconds before step 0: imports, chip, compile
    log_format: Literal["default", "tpu"] = "default"

    @field_validator("points")
    @classmethod
    def _batches(cls, value: dict[int, MeasuredPoint]) -> dict[int, MeasuredPoint]:
        if any(b < 1 for b in value):
            raise ValueError("a measured batch must be >= 1")
        return dict(sorted(value.items()))

    @model_validator(mode="after")
    def _oom_above_points(self) -> Self:
        if self.oom is not None and self.oom.from_batch <= max(self.points):
            raise ValueError(f"oom.from_batch {self.oom.from_batch} must be above every "
                             f"measured batch (largest {max(self.points)})")
        return self


class ModelTruthSpec(_Strict):
    """Ground truth at the model's default config on `nodes` nodes (default: its min_nodes):
    the formula's three numbers, or a `measured` curve replayed as recorded."""

    max_batch: int | None = Field(None, ge=1)
    peak_batch: int | None = Field(None, ge=1)
    peak_tgs: float | None = Field(None, gt=0)
    nodes: int | None = Field(None, ge=1)
    # remat_policy -> (activation memory factor, TGS factor) against minimal_flash, for
    # this model; a policy left out keeps the built-in one (sweepd/sim/truth.py REMAT).
    remat: dict[str, tuple[float, float]] = Field(default_factory=dict)
    # remat_policy -> the batch its TGS curve peaks at (memory pressure moves the peak: a
    # policy keeping more activations may peak at a smaller batch). Off by default: every
    # policy's curve is the default's shape scaled by its TGS factor.
    remat_peak: dict[str, int] = Field(default_factory=dict)
    measured: MeasuredCurve | None = None

    @model_validator(mode="after")
    def _formula_or_measured(self) -> Self:
        given = [k for k in ("max_batch", "peak_batch", "peak_tgs") if getattr(self, k) is not None]
        if self.measured is not None and given:
            raise ValueError(f"'measured' replaces {', '.join(given)}: give one or the other")
        if self.measured is None and len(given) < 3:
            raise ValueError("give max_batch, peak_batch and peak_tgs, or a 'measured' curve")
        return self

    @property
    def formula(self) -> tuple[int, int, float]:
        """(max_batch, peak_batch, peak_tgs) of a formula model (not a measured one)."""
        assert self.max_batch is not None and self.peak_batch is not None \
            and self.peak_tgs is not None, "a measured model has no formula"
        return self.max_batch, self.peak_batch, self.peak_tgs


class NodeSpec(_Strict):
    speed: float = Field(1.0, gt=0, le=2)
    nic_speed: float = Field(1.0, gt=0, le=2)
    # A node that slows mid-sweep (thermal throttling, a degraded GPU): its `slows_from_job`-th
    # job (1-based, counted per node across processes: sim/slowing.py) and every later one
    # run at `slowed_speed` instead of `speed`.
    slows_from_job: int | None = Field(None, ge=1)
    slowed_speed: float | None = Field(None, gt=0, le=2)

    @model_validator(mode="after")
    def _slowing_whole(self) -> Self:
        if (self.slows_from_job is None) != (self.slowed_speed is None):
            raise ValueError("'slows_from_job' and 'slowed_speed' go together")
        return self


class ProbeSpec(_Strict):
    """What the fake ssh (`sweepd.sim.fake_ssh`) prints for one node; a field left out is
    made up from the node's faults (docs/scenario.md)."""

    dmesg: str | None = None
    rocm_smi: str | None = None
    ibstat: str | None = None          # before any NIC reset
    nic_recovers: bool = True          # after a reset, every port Active (else as before)
    unreachable: bool = False          # ssh fails (exit 255) for every command
    delay_s: float = Field(0, ge=0)    # wall seconds before answering (a slow or hung node)


class LinkSpec(_Strict):
    a: str
    b: str
    factor: float = Field(gt=0, le=2)


class FaultSpec(_Strict):
    kind: FaultKind
    node: str | None = None
    model: str | None = None
    batch: int | None = Field(None, ge=1)
    times: int | None = Field(None, ge=1)
    phase: HangPhase | None = None
    seconds: float | None = Field(None, gt=0)
    step: int = Field(3, ge=0)          # training step at which mid-training faults fire
    flag: str = "--xla_foo"             # for unknown_flag

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> Self:
        if self.phase is not None and self.kind is not FaultKind.HANG:
            raise ValueError(f"'phase' only applies to kind 'hang', not {self.kind.value!r}")
        if self.kind is FaultKind.CONTROLLER_DOWN and self.seconds is None:
            raise ValueError("kind 'controller_down' needs 'seconds' (cluster seconds)")
        if self.seconds is not None and self.kind is not FaultKind.CONTROLLER_DOWN:
            raise ValueError("'seconds' only applies to kind 'controller_down'")
        return self

    @property
    def hang_phase(self) -> HangPhase:
        return self.phase or "training"


class CommitEffect(_Strict):
    tgs_factor: float = Field(1.0, gt=0)
    fail: FaultKind | None = None

    @field_validator("fail")
    @classmethod
    def _job_fault(cls, value: FaultKind | None) -> FaultKind | None:
        if value is FaultKind.CONTROLLER_DOWN:
            raise ValueError("'controller_down' is a cluster fault, not a commit effect")
        return value


class Scenario(_Strict):
    cluster: ClusterSpec
    models: dict[str, ModelTruthSpec] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    links: list[LinkSpec] = Field(default_factory=list)
    probes: dict[str, ProbeSpec] = Field(default_factory=dict)
    faults: list[FaultSpec] = Field(default_factory=list)
    commits: dict[str, dict[str, CommitEffect]] = Field(default_factory=dict)
    # Beyond these: one section per kind that models its jobs (`sim.hooks`; e.g. `tuning:`,
    # kinds/xla_tuning/sim/tuning.py), a field of the class `load_scenario` validates with.

    @model_validator(mode="after")
    def _names_exist(self) -> Self:
        known = set(self.cluster.node_list)
        used = [*self.nodes, *self.probes, *(n for link in self.links for n in (link.a, link.b)),
                *(f.node for f in self.faults if f.node)]
        unknown = sorted({n for n in used if n not in known})
        if unknown:
            raise ValueError(f"node(s) {', '.join(unknown)} not in cluster.nodes "
                             f"({self.cluster.nodes})")
        models = [*self.models, *(f.model for f in self.faults if f.model),
                  *(m for effects in self.commits.values() for m in effects),
                  *(m for hook in _hooks() if (sec := self.section(hook.section)) is not None
                    for m in hook.models(sec))]
        for name in models:
            try:
                resolve_model(name)
            except UnknownModel as exc:
                raise ValueError(str(exc)) from exc
        return self

    def node(self, name: str) -> NodeSpec:
        return self.nodes.get(name, NodeSpec())

    def model_truth(self, model: str) -> ModelTruthSpec | None:
        for name, spec in self.models.items():
            if resolve_model(name).name == model:
                return spec
        return None

    def section(self, name: str) -> Any:
        """A kind's section of the scenario (None: absent, or no kind reads it)."""
        return getattr(self, name, None)

    def commit_effect(self, commit: str | None, model: str) -> CommitEffect:
        """Effects keyed by exact ref/id, or by a short SHA prefix of the commit id."""
        if commit is None:
            return CommitEffect()
        for key, effects in self.commits.items():
            if key == commit or (len(key) >= 7 and commit.startswith(key)):
                for name, effect in effects.items():
                    if resolve_model(name).name == model:
                        return effect
        return CommitEffect()


class ScenarioError(ValueError):
    pass


def _hooks() -> list[Any]:
    """The kinds' sim hooks (`sim.hooks.SimHook`; read here by their fields alone, as that
    module reads this one)."""
    return [m.HOOK for m in kind_modules("sim.hook") if hasattr(m, "HOOK")]


@cache
def _scenario_model() -> type[Scenario]:
    """The scenario with every kind's section a field of its own (validated, errors named by
    their place, as the rest is)."""
    fields: dict[str, Any] = {h.section: (h.spec | None, None) for h in _hooks()}
    if not fields:
        return Scenario
    return create_model("Scenario", __base__=Scenario, **fields)


def load_scenario(path: Path) -> Scenario:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc}") from exc
    try:
        # Files a section names (e.g. `tuning.landscapes`) are read relative to the scenario.
        return _scenario_model().model_validate(raw, context={"base_dir": path.parent})
    except ValidationError as exc:
        # One line per problem, as config errors are: no pydantic dump with its URLs.
        problems = "\n".join(
            f"  {'.'.join(map(str, e['loc'])) or 'scenario'}: {e['msg']}" for e in exc.errors())
        raise ScenarioError(f"{path}: invalid scenario:\n{problems}") from exc
