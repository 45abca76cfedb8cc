"""An xla-tuning sweep's default batch comes from a model perf sweep of its own cell: the
same model, node count and parallelism (a batch found at FSDP=8 does not fit PP=8)."""

from __future__ import annotations

from typing import Any

from sweepd.core.states import SweepState
from sweepd.kinds.model_perf.exports import latest_optimum
from sweepd.store.store import Store


async def done(store: Store, best: int, nodes: str = "n[1-2]", **spec: Any) -> int:
    sid = await store.sweeps.create("model-perf", f"b{best}",
                                          {"model": "llama2-70b", "nodes": nodes, **spec})
    await store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await store.sweeps.transition(sid, SweepState.DONE, "verdict",
                                        verdict={"best": best, "settled": True})
    return sid


async def test_the_same_parallelism_comes_first_whatever_its_order(store: Store) -> None:
    same = await done(store, 6, parallelism="PP=2,FSDP=1")
    await done(store, 9)                               # the config's own axes, later
    await done(store, 12, parallelism="FSDP=2")         # another cell, latest
    found = await latest_optimum(store, "llama2-70b", 2, "fsdp=1, pp=2")
    assert found is not None and (found.sweep, found.best) == (same, 6)


async def test_a_sweep_of_the_config_axes_stands_in_another_cell_never(store: Store) -> None:
    unnamed = await done(store, 9)
    await done(store, 12, parallelism="FSDP=2")
    found = await latest_optimum(store, "llama2-70b", 2, "PP=2")
    assert found is not None and (found.sweep, found.best) == (unnamed, 9)
    await done(store, 4, nodes="n[1-4]", parallelism="PP=2")   # four nodes: not this cell
    only_other = await latest_optimum(store, "llama2-70b", 2, "TP=8")
    assert only_other is not None and only_other.sweep == unnamed


async def test_no_parallelism_asked_takes_the_latest_as_before(store: Store) -> None:
    await done(store, 9)
    latest = await done(store, 12, parallelism="FSDP=2")
    found = await latest_optimum(store, "llama2-70b", 2)
    assert found is not None and found.sweep == latest
    assert await latest_optimum(store, "llama2-70b", 8) is None


async def test_an_xla_tuning_sweep_takes_the_batch_of_its_own_parallelism(store: Store) -> None:
    from sweepd.kinds.xla_tuning.inventory.planner_facts import model_perf_prior
    from tests.support.xla import spec_of

    spec = spec_of()
    nodes = ",".join(f"n{i}" for i in range(1, spec.count + 1))
    own = await done(store, 5, nodes=nodes, parallelism=spec.parallelism)
    await done(store, 11, nodes=nodes, parallelism="TP=8")   # later, another cell
    prior = await model_perf_prior(store, spec)
    assert prior is not None and (prior.sweep, prior.best) == (own, 5)
