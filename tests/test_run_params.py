"""A run's typed params reach its job: the engine builds the submission from them alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from sweepd.app.daemon import open_parts
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import RunParams
from tests.simrun import NODES, perf_spec, sim_config, write_scenario


async def test_the_engine_submits_a_runs_typed_params(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    spec = parse_spec(perf_spec(values=[4], env={"A": "spec", "B": "spec"},
                                overrides={"remat_policy": "full"}))
    async with open_parts(config) as parts:
        sid = await parts.store.sweeps.create("model-perf", "p", spec.model_dump(mode="json"))
        await parts.store.runs.add(sid, "typed", RunParams(
            tag="t1", env={"B": "run"}, overrides={"per_device_batch_size": 4},
            xla_flags=["--xla_a=1", "--xla_b=2"]), NODES, "test")
        await parts.engine.step()
        (job,) = await parts.store.jobs.of_sweep(sid)
        assert job.backend_id is not None
        await parts.engine.backend.cancel(job.backend_id)
    record = json.loads((config.daemon.state_dir / "sim" / "jobs" / f"{job.backend_id}.json")
                        .read_text())
    assert record["model"] == "llama2-70b"                      # None: the spec's model
    assert record["env"] == {"A": "spec", "B": "run"}          # the run's env wins
    assert record["overrides"] == {"remat_policy": "full", "steps": "15",
                                   "per_device_batch_size": "4"}
    assert record["xla_flags"] == ["--xla_a=1", "--xla_b=2"]
    assert job.job_name.startswith("JAX-llama2-70b-t1-")


@pytest.mark.parametrize("flag", ["xla_a=1", "--xla_a=1 --xla_b=2", ""])
def test_an_xla_flag_is_one_dashed_word(flag: str) -> None:
    with pytest.raises(ValidationError, match="XLA flags are `--name=value` words"):
        RunParams(xla_flags=[flag])


def test_params_round_trip_through_their_json() -> None:
    params = RunParams(model="grok-1", commit="0a1b", overrides={"b": 8, "x": 0.5, "s": "8"})
    back = RunParams.model_validate_json(params.to_json())
    assert back == params
    assert {k: type(v) for k, v in back.overrides.items()} == {"b": int, "x": float, "s": str}
