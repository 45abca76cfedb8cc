"""Sweep specs: the API's contract. One pydantic model per sweep kind, YAML or JSON."""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sweepd.monitor.steady import steady_window
from sweepd.util.hostlists import collect_nodes, expand_nodes
from sweepd.util.model_shapes import UnknownModel, find_model, resolve_model
from sweepd.util.text import control_chars, describe_controls, escape


class SpecError(ValueError):
    """A spec that cannot be accepted; `errors` holds field-level details."""

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or [{"loc": [], "msg": message}]


def control_errors(data: Any, loc: tuple[str | int, ...] = ()) -> list[dict[str, Any]]:
    """A located error for every text in a spec (values and keys, at any depth) holding a
    control character: each field is free text someone may put escape sequences in."""
    if isinstance(data, str):
        return ([{"loc": list(loc), "msg": f"{describe_controls(data)} not allowed: text "
                  "fields take printable characters only"}] if control_chars(data) else [])
    errors: list[dict[str, Any]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            errors += [{**e, "msg": f"{e['msg']} (in a key)"}
                       for e in control_errors(str(key), loc)]
            errors += control_errors(value, (*loc, escape(str(key))))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            errors += control_errors(value, (*loc, i))
    return errors


def _section_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model an annotation holds: itself, or the model in a list of them or
    in an optional one (`list[ProfileSpec]`, `Part | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = [m for m in map(_section_of, typing.get_args(annotation)) if m is not None]
    return found[0] if len(found) == 1 else None


def unknown_key(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """The message for a key the spec does not have: the closest valid one, if any (a
    typo), and the valid keys where it stands, at any depth (`profiles.0.setings`)."""
    section: type[BaseModel] | None = model
    for part in loc[:-1]:   # a nested model's keys (most sections are free mappings)
        if isinstance(part, int):   # an item of the list the previous part named
            continue
        field = section.model_fields.get(str(part)) if section is not None else None
        section = _section_of(field.annotation) if field is not None else None
    if section is None:
        return "unknown key"
    valid = sorted(section.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), valid, 1)
    return (f"unknown key{f' (did you mean {close[0]}?)' if close else ''}; valid keys: "
            f"{', '.join(valid)}")


def joined(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" if x["loc"]
                     else str(x["msg"]) for x in errors)


Scalar = int | float | str

# The SKILL.md's timebox: without `max_node_hours` a sweep's node-hour cap is this long on
# every node of the spec, or its stated most where larger (`node_hour_cap`).
TIMEBOX_HOURS = 8.0

CapSource = typing.Literal["max_node_hours", "most", "timebox"]


def model_of_setup(name: str, context: Mapping[str, Any]) -> str:
    """A model a sweep kind that runs the model may name: a built-in shape or, in submit.sh
    mode, one the toolkit repo has a config for. The CLI does not know the daemon's repo: a
    name it does not know goes on to the daemon, which decides. On the local backend
    (`local_node`) any name: the train command and the overrides define the model."""
    try:
        return find_model(name, context.get("repo"))[0]
    except UnknownModel:
        if context.get("client") or context.get("local_node"):
            return name
        raise


def node_hour_cap(own: float | None, nodes: int, most: float | None
                  ) -> tuple[float, CapSource]:
    """The node-hour cap a sweep stops at, and what set it: its spec's `max_node_hours`
    (`own`); else the timebox on each of its nodes, or the most it may take as `validate`
    states it (`most`, None: nothing bounds it) where that is larger, so that a sweep that
    keeps to its plan never meets it. One rule for core/cost_cap.applied_cap (what a sweep
    applies) and a campaign's budget (the sum of its stages' caps)."""
    if own is not None:
        return own, "max_node_hours"
    timebox = TIMEBOX_HOURS * nodes
    if most is not None and most > timebox:
        return most, "most"
    return timebox, "timebox"

EMPTY_PROFILER = ("profiler: an empty value is refused: `profiler=` breaks MaxText's YAML "
                  "enum check (xla-tuning.SKILL.md); leave it out, the config's "
                  "`profiler: \"\"` already means no profiler")


def profiled(overrides: Mapping[str, Any]) -> bool:
    """Whether these MaxText overrides turn the profiler on."""
    return str(overrides.get("profiler", "")) not in ("", "none")


def refuse_empty_profiler(overrides: Mapping[str, Any]) -> None:
    """A `profiler=` passthrough fails every job at MaxText's config check: say so at
    validation, one line, rather than at the first job."""
    value = overrides.get("profiler")
    if isinstance(value, str) and not value.strip():
        raise ValueError(EMPTY_PROFILER)


# A parallelism part: an axis and its degree (the DCN axes FSDP x PP, TP within a node).
_AXIS = re.compile(r"^(FSDP|PP|TP)=([1-9][0-9]*)$")


class AxisError(ValueError):
    """A parallelism refused: `part` (as written) is not AXIS=N, or `twice` is an axis given
    twice. The message is the shared wording; a kind may word it its own way from these."""

    def __init__(self, text: str, part: str = "", twice: str = "") -> None:
        self.part, self.twice = part, twice
        super().__init__(f"parallelism {text!r}: axis {twice} given twice" if twice else
                         f"parallelism {text!r}: {part!r} is not AXIS=N (FSDP, PP, TP)")


def parse_axes(text: str, max_digits: int | None = None, loose: bool = True) -> dict[str, int]:
    """`FSDP=8`, `pp=4, fsdp=2` -> each axis's degree, in the order given; AxisError (one
    line) otherwise, or for a degree of more than `max_digits`. `loose`: spaces and case do
    not matter (else each part is matched as given)."""
    axes: dict[str, int] = {}
    for part in (text.replace(" ", "") if loose else text).split(","):
        m = _AXIS.match(part.upper() if loose else part)
        if m is None or (max_digits is not None and len(m.group(2)) > max_digits):
            raise AxisError(text, part=part)
        if m.group(1) in axes:
            raise AxisError(text, twice=m.group(1))
        axes[m.group(1)] = int(m.group(2))
    return axes


def axes_text(axes: Mapping[str, int]) -> str:
    """A parallelism as every kind writes it: `PP=4,FSDP=2` (no spaces, upper case)."""
    return ",".join(f"{a}={n}" for a, n in axes.items())


class _Spec(BaseModel):
    kind: str

    # strict: YAML's `true` is not the number 1; no NaN or infinity reaches a job's flags.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: str | None = Field(default=None, max_length=80)
    nodes: str = Field(description="hostlist expression, pinned for the whole sweep")
    overrides: dict[str, Scalar] = Field(default_factory=dict,
                                         description="key=value MaxText passthrough")
    env: dict[str, str] = Field(default_factory=dict, description="job environment")
    steps: int = Field(default=15, ge=1, le=10_000)
    model: str = "llama2-70b"
    min_nodes: int | None = Field(default=None, ge=1,
                                  description="stop when fewer usable nodes remain")
    keep_profiles: bool = Field(
        default=False,
        description="leave what the sweep's jobs put in the person's files (its TUNE_PROFILE "
                    "arms in the toolkit's train_env.sh) when it ends; by default removed")
    max_node_hours: float | None = Field(
        default=None, gt=0, le=1_000_000,
        description="hard cap on the node-hours the sweep's jobs may take: it stops before "
                    "submitting a job that would pass it (default: the 8 h timebox x the "
                    "spec's nodes, or the most validate states where larger)")
    chats: list[int] | None = Field(
        default=None, min_length=1, max_length=20,
        description="Telegram chats for this sweep's messages, each one the daemon allows "
                    "(default: its first configured chat)")

    @model_validator(mode="before")
    @classmethod
    def _printable(cls, data: Any) -> Any:
        # parse_spec names each field; this holds for specs validated any other way.
        errors = control_errors(data)
        if errors:
            raise ValueError(joined(errors))
        return data

    @field_validator("model")
    @classmethod
    def _model(cls, v: str, info: ValidationInfo) -> str:
        try:
            return cls.known_model(v, info.context or {})
        except UnknownModel as e:
            raise ValueError(str(e)) from e

    @classmethod
    def known_model(cls, name: str, context: dict[str, Any]) -> str:
        """The model's name as sweepd knows it (a kind may know more than the built-in
        shapes); `context` is `parse_spec`'s (the toolkit repo, client or daemon)."""
        return resolve_model(name).name

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, v: str) -> str:
        return collect_nodes(expand_nodes(v))

    @field_validator("env", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        # YAML reads `.93` as a number; say how to write it rather than "not a string".
        for key, value in (v.items() if isinstance(v, dict) else ()):
            if not isinstance(value, str):
                shown = "" if value is None else value
                raise ValueError(f"{key}: env values are text; quote it ({key}: \"{shown}\")")
        return v

    @field_validator("chats")
    @classmethod
    def _distinct_chats(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("a chat is named twice")
        return v

    @field_validator("overrides", "env")
    @classmethod
    def _keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if not key or any(c in key for c in " =\n\t"):
                raise ValueError(f"bad key {key!r}")
        return v

    @field_validator("overrides")
    @classmethod
    def _no_empty_profiler(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        refuse_empty_profiler(v)
        return v

    @model_validator(mode="after")
    def _reaches_steady(self) -> _Spec:
        first = steady_window(self.profiler).start
        if self.steps <= first:
            # Every kind judges steady-state TGS: a shorter run cannot be judged at all.
            raise ValueError(f"steps must reach the steady window (more than {first}; "
                             "default 15)")
        return self

    @property
    def node_list(self) -> list[str]:
        return expand_nodes(self.nodes)

    @property
    def profiler(self) -> bool:
        return profiled(self.overrides)

    def profiles_run(self, run_overrides: Mapping[str, Any]) -> bool:
        """Whether a run of this spec has the profiler on: the run's own overrides over the
        spec's (an xla-tuning evidence run turns it on; its steady window must leave the
        profiler's steps out)."""
        return profiled({**self.overrides, **run_overrides})   # the run's own win, as sent

    @property
    def needed_nodes(self) -> int:
        return self.min_nodes or resolve_model(self.model).min_nodes

    def default_name(self) -> str:
        return f"{self.model} {len(self.node_list)}N"

    def cluster_problem(self, gpus_per_node: int) -> str | None:
        """Why this spec cannot run on a cluster of `gpus_per_node` GPUs per node (the
        config's, which the spec alone cannot see), or None; checked at submit and
        validate."""
        return None

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> _Spec:
        """The spec a sweep was accepted with, from its stored JSON (`model_dump(mode="json")`
        of an accepted spec, already normalised): each field's type is rebuilt (a path, a
        tuple), no validator runs again. A validator made stricter since must not stop a
        sweep already in flight; it applies to the next submission."""
        values = {name: _adapter(field.annotation).validate_python(data[name])
                  for name, field in cls.model_fields.items() if name in data}
        return cls.model_construct(_fields_set=set(values), **values)


SweepSpec = _Spec


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    """A field's type alone (not its constraints), lax: JSON's string becomes a Path."""
    if annotation not in _ADAPTERS:
        _ADAPTERS[annotation] = TypeAdapter(annotation)
    return _ADAPTERS[annotation]
