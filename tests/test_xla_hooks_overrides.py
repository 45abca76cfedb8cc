"""`report --apply` sources the patched env file with the overrides the cell's jobs passed:
the same `job_overrides` the planner gave them, not a copy of it (a spec's `steps` above the
tuning jobs' 15 is what its jobs ran)."""

from __future__ import annotations

import json
from typing import Any

from sweepd.kinds.xla_tuning.deploy.job_overrides import job_overrides
from sweepd.kinds.xla_tuning.hooks_client import report_extras
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import Sweep
from sweepd.store.states import SweepState

SPEC: dict[str, Any] = {"kind": "xla-tuning", "model": "llama2-70b", "nodes": "n[01-08]",
                        "parallelism": "FSDP=8", "overrides": {"remat_policy": "full"},
                        "config_tags": {"sparse": {"sparse_matmul": "true"}, "dense": {}}}


def _sweep(spec: dict[str, Any]) -> Sweep:
    stored = XlaTuningSpec.model_validate(spec).model_dump(mode="json")
    return Sweep(id=1, kind="xla-tuning", name="s", spec_json=json.dumps(stored),
                 state=SweepState.DONE, reason=None, verdict_json=None,
                 created_at="", updated_at="")


def _sourced_with(spec: dict[str, Any]) -> dict[str, str] | None:
    got: dict[str, str] | None = report_extras(_sweep(spec), [], [], None)["tuning"][
        "job_overrides"]
    return got


def test_a_spec_with_more_steps_is_sourced_with_its_own_steps() -> None:
    # Failed before: the client built the overrides itself, with the tuning jobs' 15 steps.
    got = _sourced_with({**SPEC, "steps": 20})
    assert got is not None and got["steps"] == "20"


def test_the_overrides_are_the_primary_tags_jobs_own() -> None:
    got = _sourced_with(SPEC)
    spec = XlaTuningSpec.model_validate(SPEC)
    assert got == {k: str(v) for k, v in job_overrides(spec, "sparse").items()}
    assert got is not None and got["sparse_matmul"] == "true" and got["steps"] == "15"
