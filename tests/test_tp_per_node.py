"""The xla-tuning TP degree is checked against the cluster's GPUs per node
(`cluster.gpus_per_node`), not the model's usual 8: at submit and at `validate`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.service import Service
from sweepd.cli.offline import validate_spec
from sweepd.clusters.factory import make_backend
from sweepd.core.engine import Engine
from sweepd.kinds.spec import SpecError
from sweepd.store.store import Store
from tests.simrun import NODES, sim_config, write_scenario


def xla(parallelism: str) -> dict[str, Any]:
    return {"kind": "xla-tuning", "model": "llama2-70b", "nodes": NODES,
            "parallelism": parallelism}


@contextlib.asynccontextmanager
async def service_of(tmp_path: Path, gpus_per_node: int) -> AsyncIterator[tuple[Service, Store]]:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    config = config.model_copy(update={"cluster": config.cluster.model_copy(
        update={"gpus_per_node": gpus_per_node})})
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    backend, clock = make_backend(config)
    try:
        yield Service(Engine(store, backend, clock, config)), store
    finally:
        await backend.close()
        await store.close()


async def test_a_tp_that_divides_8_but_not_a_4_gpu_node_is_refused(tmp_path: Path) -> None:
    line = ("parallelism 'FSDP=8,TP=8': TP=8 does not divide the 4 GPUs of a node "
            "(cluster.gpus_per_node)")
    async with service_of(tmp_path, 4) as (service, store):
        for call in (service.submit, service.validate):
            with pytest.raises(SpecError) as caught:
                await call(xla("FSDP=8,TP=8"))
            assert str(caught.value) == line
        assert await store.sweeps.all() == []     # nothing recorded
        # A TP the node's 4 GPUs hold is accepted on the same cluster.
        plan = await service.validate(xla("FSDP=8,TP=4"))
        assert plan["kind"] == "xla-tuning"


async def test_tp_16_on_a_16_gpu_node_is_accepted(tmp_path: Path) -> None:
    async with service_of(tmp_path, 16) as (service, store):
        plan = await service.validate(xla("FSDP=8,TP=16"))
        assert plan["kind"] == "xla-tuning" and plan["first_plan"]
        summary = await service.submit(xla("FSDP=8,TP=16"))
        assert [s.id for s in await store.sweeps.all()] == [summary["id"]]


def test_sweepd_validate_with_a_config_checks_it(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    four = config.model_copy(update={"cluster": config.cluster.model_copy(
        update={"gpus_per_node": 4})})
    with pytest.raises(SpecError, match=r"^parallelism 'FSDP=8,TP=8': TP=8 does not divide "
                                        r"the 4 GPUs of a node \(cluster\.gpus_per_node\)$"):
        validate_spec(xla("FSDP=8,TP=8"), four)
