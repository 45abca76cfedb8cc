"""Sweep specs: the API's contract. One pydantic model per sweep kind, YAML or JSON."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import hostlist
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sweepd.models import UnknownModel, resolve_model
from sweepd.monitor.steady import steady_window
from sweepd.text import control_chars, describe_controls, escape


class SpecError(ValueError):
    """A spec that cannot be accepted; `errors` holds field-level details."""

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or [{"loc": [], "msg": message}]


# The most nodes a hostlist may name: a sweep's pinned nodes, or one resume's exclusions.
# Far above any sweep's needs, far below a typo's `chi[1-100000]`, whose names would fill
# every error message and a person's terminal.
MAX_NODES = 4096
_GROUP = re.compile(r"\[([^\]]*)\]")
_PART = re.compile(r"(?:[^,\[]|\[[^\]]*\])+")   # a top-level comma-separated part
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")


def _range_size(text: str) -> int:
    m = _RANGE.fullmatch(text)
    if m is None:
        return 1   # a single number, or a bad range python-hostlist then names
    low, high = m.groups()
    if len(high) > 9:
        return 10**9
    return max(int(high) - int(low) + 1, 1)


def count_hostlist(expr: str) -> int:
    """How many names `expr` expands to (before duplicates are dropped), computed from
    its ranges without expanding them."""
    total = 0
    for part in _PART.findall(expr):
        size = 1
        for group in _GROUP.findall(part):
            size *= sum(_range_size(r) for r in group.split(","))
        total += size
    return total


def _shown_expr(expr: str) -> str:
    return repr(escape(expr if len(expr) <= 60 else f"{expr[:60]}…"))


def expand_nodes(expr: str, limit: int = MAX_NODES) -> list[str]:
    count = count_hostlist(expr)
    if count > limit:
        raise ValueError(f"the hostlist {_shown_expr(expr)} names {count:,} nodes; at most "
                         f"{limit:,} are allowed")
    try:
        nodes: list[str] = hostlist.expand_hostlist(expr)
    except hostlist.BadHostlist as e:
        raise ValueError(f"bad hostlist expression {_shown_expr(expr)}: {e}") from e
    if not nodes:
        raise ValueError("the node list is empty")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"node list {_shown_expr(expr)} names a node twice")
    return nodes


def collect_nodes(nodes: list[str]) -> str:
    return str(hostlist.collect_hostlist(nodes))


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


def _joined(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" if x["loc"]
                     else str(x["msg"]) for x in errors)


Scalar = int | float | str
BATCH = "per_device_batch_size"   # the one parameter with a memory-guided search


class _Spec(BaseModel):
    kind: str

    # strict: YAML's `true` is not the number 1; no NaN or infinity reaches a job's flags.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: str | None = Field(default=None, max_length=80)
    nodes: str = Field(description="hostlist expression, pinned for the whole sweep")
    overrides: dict[str, Scalar] = Field(default_factory=dict,
                                         description="key=value MaxText passthrough")
    env: dict[str, str] = Field(default_factory=dict, description="_env_ variables")
    steps: int = Field(default=15, ge=1, le=10_000)
    model: str = "llama2-70b"
    min_nodes: int | None = Field(default=None, ge=1,
                                  description="stop when fewer usable nodes remain")

    @model_validator(mode="before")
    @classmethod
    def _printable(cls, data: Any) -> Any:
        # parse_spec names each field; this holds for specs validated any other way.
        errors = control_errors(data)
        if errors:
            raise ValueError(_joined(errors))
        return data

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        try:
            return resolve_model(v).name
        except UnknownModel as e:
            raise ValueError(str(e)) from e

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

    @field_validator("overrides", "env")
    @classmethod
    def _keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if not key or any(c in key for c in " =\n\t"):
                raise ValueError(f"bad key {key!r}")
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
        return str(self.overrides.get("profiler", "")) not in ("", "none")

    @property
    def needed_nodes(self) -> int:
        return self.min_nodes or resolve_model(self.model).min_nodes

    def default_name(self) -> str:
        return f"{self.model} {len(self.node_list)}N"


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

    def default_name(self) -> str:
        return f"{self.model} {len(self.node_list)}N {self.parameter}"


SweepSpec = _Spec


def _check_values(parameter: str, values: list[Scalar]) -> None:
    """Values a job can run: one type (a mix is a typo), and batch sizes of at least 1."""
    numbers = [v for v in values if isinstance(v, int | float)]
    if numbers and len(numbers) != len(values):
        raise ValueError(f"values mix numbers and text: {values}")
    if parameter == BATCH and not all(isinstance(v, int) and v >= 1 for v in values):
        raise ValueError(f"{BATCH} values must be whole numbers of at least 1: {values}")


def parse_spec(data: Any) -> SweepSpec:
    from sweepd.strategies.registry import kinds

    if not isinstance(data, dict):
        raise SpecError("a spec must be a mapping with a `kind` field")
    kind = data.get("kind")
    refused = control_errors(data)
    if refused:
        raise SpecError(f"invalid spec: {_joined(refused)}", refused)
    known = kinds()
    model = known[str(kind)].spec if str(kind) in known else None
    if model is None:
        # No ": " in it: the CLI prints a message with fields up to its first colon.
        what = f"unknown sweep kind {kind!r}, not one of {', '.join(sorted(known))}"
        raise SpecError(what, [{"loc": ["kind"], "msg": what}])
    try:
        spec = model.model_validate(data)
    except ValidationError as e:
        errors = [{"loc": list(err["loc"]), "msg": err["msg"].removeprefix("Value error, ")}
                  for err in e.errors()]
        raise SpecError(f"invalid {kind} spec: {_joined(errors)}", errors) from None
    return spec


def load_spec_file(path: Path) -> SweepSpec:
    return parse_spec(read_spec_file(path))


def read_spec_file(path: Path) -> Any:
    """A spec file's data, not yet checked."""
    try:
        with path.open(encoding="utf-8") as stream:   # YAML errors then name the file
            data = yaml.safe_load(stream)
    except OSError as e:
        raise SpecError(f"cannot read spec {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path} is not UTF-8 text") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path} is not valid YAML/JSON: {e}") from None
    return data
