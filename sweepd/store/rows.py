"""Typed rows read from the store."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Self

import hostlist
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sweepd.store.states import JobState, RunState, SweepState

Scalar = str | int | float


class Expected(BaseModel):
    """The TGS a run is judged by, fixed when it was planned, and where that figure came
    from (the network kind: a node perf sweep's median, the spec's figure)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tgs: float | None
    source: str


class RunParams(BaseModel):
    """What one run submits, stored as JSON in `runs.params_json` (schema version 6).

    Every field but `overrides`, `env` and `xla_flags` (what the job receives) and `labels`
    (what only the kind reads) steers the submission itself; the toolkit's `_env_KEY=value`
    passthrough is built from `env` by the cluster backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None           # None: the spec's model
    commit: str | None = None          # the commit the run's job is submitted from
    tag: str | None = None             # submit.sh's `model:tag` (job name) and a column label
    alias: str | None = None           # submit.sh's `model:alias:tag`
    env: dict[str, str] = Field(default_factory=dict)          # on top of the spec's env
    # MaxText `key=value` overrides on top of the spec's, the swept parameter among them.
    overrides: dict[str, Scalar] = Field(default_factory=dict)
    expected: Expected | None = None
    # Appended to the XLA_FLAGS the job inherits (never a replacement of it).
    xla_flags: list[str] = Field(default_factory=list)
    # The job's per-job profile name (`clusters.base.JobProfile`): submit.sh mode writes
    # `xla_flags` and the run's own env as the profile's train_env.sh arms and selects them
    # by this name; None: the job has none. Any kind may set it.
    profile: str | None = None
    # The kind's own notes on the run (e.g. the XLA tuning kind's wave): free-form, read by
    # the kind that wrote them and by nothing else, never submitted (schema version 11).
    labels: dict[str, str] = Field(default_factory=dict)
    # The job's time limit (sbatch --time, `MM:SS`, `H:MM:SS` or `D-HH:MM:SS`); None: the
    # configured `time_limit`.
    time_limit: str | None = Field(default=None, pattern=r"^(\d{1,3}-)?\d{1,4}(:\d{2}){0,2}$")

    @field_validator("xla_flags")
    @classmethod
    def _flags(cls, v: list[str]) -> list[str]:
        # One word each: XLA splits its XLA_FLAGS on white space.
        bad = [f for f in v if not f.startswith("--") or any(c.isspace() for c in f)]
        if bad:
            raise ValueError(f"XLA flags are `--name=value` words: {bad}")
        return v

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


class _Row:
    @classmethod
    def from_row(cls, row: Any) -> Self:
        """The row as read. Columns and fields are the same set (tests/test_migrations.py
        checks it), and the rows have no checks in `__init__`: the values are set as
        `with_fields` sets them, without the frozen dataclass's `__init__` (one
        `object.__setattr__` per field), which was most of the cost of reading the
        thousands of rows a restart or a report reads."""
        made = object.__new__(cls)
        made.__dict__.update(zip(row.keys(), row, strict=True))
        return made

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def with_fields(self, changed: Mapping[str, Any]) -> Self:
        """A copy with these fields changed: `dataclasses.replace` without re-running
        `__init__` (the rows have no checks there), for the thousands of jobs a pass moves
        on (their offsets and output times). The names are not checked: the store checks
        them against its columns before it writes them."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changed)
        return copy


@dataclass(frozen=True)
class Sweep(_Row):
    id: int
    kind: str
    name: str
    spec_json: str
    state: SweepState
    reason: str | None
    verdict_json: str | None
    created_at: str
    updated_at: str
    submitted_by: str | None = None   # the socket peer's user name (schema version 4)

    @property
    def spec(self) -> dict[str, Any]:
        return dict(json.loads(self.spec_json))

    @property
    def verdict(self) -> dict[str, Any] | None:
        return dict(json.loads(self.verdict_json)) if self.verdict_json else None


@dataclass(frozen=True)
class Run(_Row):
    id: int
    sweep_id: int
    seq: int
    label: str
    params_json: str
    nodes: str
    state: RunState
    outcome: str | None
    tgs: float | None
    mfu: float | None
    failure_class: str | None
    detail: str | None
    not_before: float | None

    @property
    def params(self) -> RunParams:
        return RunParams.model_validate_json(self.params_json)

    @property
    def node_count(self) -> int:
        """How many nodes its latest attempt ran on (fewer than planned after an exclusion)."""
        return len(hostlist.expand_hostlist(self.nodes))


@dataclass(frozen=True)
class Job(_Row):
    id: int
    run_id: int
    sweep_id: int
    attempt: int
    token: str
    job_name: str
    nodes: str
    backend_id: str | None
    log_path: str | None
    state: JobState
    scheduler_state: str | None
    submitted_at: float | None
    ended_at: float | None
    log_offset: int
    log_identity: str | None
    last_output_at: float | None
    phase: str
    last_step: int | None
    profiler: int
    mem_used_gb: float | None
    mem_limit_gb: float | None
    summary_status: str | None
    summary_exit: int | None
    node_map_json: str | None
    tgs: float | None
    mfu: float | None
    failure_class: str | None
    failure_node: str | None
    failure_line: str | None
    failure_detail: str | None
    submit_deadline: float | None
    # Compiled memory (migration 4), rank 0's line.
    mem_total_gb: float | None = None
    mem_output_gb: float | None = None
    mem_temp_gb: float | None = None
    mem_argument_gb: float | None = None
    mem_host_temp_gb: float | None = None
    # What the sweep's kind wants from the job (`Kind.job_facts`, migration 8): a JSON
    # object folded from the log as it is read and completed when the job ends.
    facts_json: str | None = None
    # When the job ran on the cluster's own clock, where its log printed it (migration 10:
    # the simulated cluster's `Cluster time:`); None elsewhere (`store/spans.span_of`).
    span_start: float | None = None
    span_end: float | None = None

    @property
    def facts(self) -> dict[str, Any]:
        """The job's stored kind facts ({} when none were stored)."""
        return dict(json.loads(self.facts_json)) if self.facts_json else {}


@dataclass(frozen=True)
class Event(_Row):
    id: int
    sweep_id: int
    run_id: int | None
    job_id: int | None
    at: str
    kind: str
    from_state: str | None
    to_state: str | None
    rule: str | None
    reason: str
    evidence: str | None


@dataclass(frozen=True)
class StepRow(_Row):
    job_id: int
    step: int
    seconds: float | None
    tflops: float | None
    mfu: float | None
    tgs: float
    loss: float | None


@dataclass(frozen=True)
class SignalRow(_Row):
    id: int
    job_id: int
    offset: int
    rank: int | None
    node: str | None
    klass: str
    detail: str | None
    line: str


@dataclass(frozen=True)
class Exclusion(_Row):
    sweep_id: int
    node: str
    job_id: int | None
    reason: str
    active: int
