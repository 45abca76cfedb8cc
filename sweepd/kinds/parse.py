"""A spec's data read into its kind's spec model: a submission's with every validator (each
error named by its field), a stored sweep's as it was accepted (none again), a spec file's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sweepd.kinds.registry import kind_of, kinds
from sweepd.kinds.spec import SpecError, SweepSpec, control_errors, joined, unknown_key


def stored_spec(kind: str, data: dict[str, Any]) -> SweepSpec:
    """A stored sweep's spec as it was accepted (see `_Spec.from_stored`)."""
    spec: type[SweepSpec] = kind_of(kind).spec
    return spec.from_stored(data)


# What the CLI checks a spec without `nodes` as (it does not know the daemon's cluster): one
# node, as the local backend has; the spec goes on without it for the daemon to judge.
CLIENT_NODE = "the-one-node"


def leaves_nodes_out(data: Any) -> bool:
    """A spec that names no nodes and no slot: on the local backend, its one node."""
    return isinstance(data, dict) and "nodes" not in data and "node_count" not in data


def parse_spec(data: Any, repo: Path | None = None, client: bool = False,
               local_node: str | None = None) -> SweepSpec:
    """`repo`: the toolkit repo whose configs/<model>.gpu.yml define models beyond the
    built-in shapes (submit.sh mode). `client`: checked by the CLI, which does not know the
    daemon's repo, so a model it does not know is left to the daemon to judge. `local_node`:
    the one node of the local backend, which a spec without `nodes` runs on (and where a
    model-perf spec may name a model sweepd has no shape for: it searches without one)."""
    if not isinstance(data, dict):
        raise SpecError("a spec must be a mapping with a `kind` field")
    if leaves_nodes_out(data) and (local_node or client):
        data = {**data, "nodes": local_node or CLIENT_NODE}
    kind = data.get("kind")
    refused = control_errors(data)
    if refused:
        raise SpecError(f"invalid spec: {joined(refused)}", refused)
    known = kinds()
    model: type[SweepSpec] | None = known[str(kind)].spec if str(kind) in known else None
    if model is None:
        # No ": " in it: the CLI prints a message with fields up to its first colon.
        what = f"unknown sweep kind {kind!r}, not one of {', '.join(sorted(known))}"
        raise SpecError(what, [{"loc": ["kind"], "msg": what}])
    try:
        spec = model.model_validate(data, context={"repo": repo, "client": client,
                                                    "local_node": local_node})
    except ValidationError as e:
        errors = [{"loc": list(err["loc"]),
                   "msg": unknown_key(model, err["loc"]) if err["type"] == "extra_forbidden"
                   else err["msg"].removeprefix("Value error, ")}
                  for err in e.errors()]
        # A misspelt required key is one mistake, not two: its "Field required" goes.
        meant = {m.split("did you mean ", 1)[1].split("?")[0] for m in
                 (str(x["msg"]) for x in errors) if "did you mean " in m}
        errors = [x for x in errors if not (x["msg"] == "Field required" and len(x["loc"]) == 1
                                            and x["loc"][0] in meant)]
        raise SpecError(f"invalid {kind} spec: {joined(errors)}", errors) from None
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
