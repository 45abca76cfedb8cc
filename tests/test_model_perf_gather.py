"""Model perf's gather reads only what it can use (the store picks out its model's settled
sweeps, and the jobs on the spec's nodes with a memory line), and finds what reading and
parsing every sweep found: the same prior and the same param memory, on a store of many
sweeps of several models, kinds and states. What one gather reads does not grow with the
model's running sweeps."""

from __future__ import annotations

from typing import Any, cast

import pytest

from sweepd.core.states import RunState, SweepState
from sweepd.kinds.model_perf import gather as perf_gather
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import RunParams
from sweepd.store.store import Store

MODELS = ("llama2-70b", "mixtral-8x22b", "grok-1")
NODES = ("chi[1-2]", "chi[1-4]")


def _spec(model: str, nodes: str, **more: Any) -> ModelPerfSpec:
    return cast(ModelPerfSpec, parse_spec({"kind": "model-perf", "model": model,
                                           "nodes": nodes, "min_nodes": 1, **more}))


async def _every_sweep_read(store: Store, spec: ModelPerfSpec) -> PerfFacts:
    """The gather as it was: every sweep read and parsed, the prior the latest that fits,
    the param memory from every sweep whose stored spec names the model."""
    sweeps = await store.sweeps.all()
    prior = None
    if spec.second is None:
        for sweep in reversed(sweeps):
            if perf_gather.is_prior(sweep, spec):
                prior = await perf_gather.prior_of(store, spec, sweep)
                break
    same_model = {s.id for s in sweeps if s.spec.get("model") == spec.model}
    latest = [j for s in sorted(same_model) for j in await store.jobs.of_sweep(s)
              if j.nodes == spec.nodes and j.mem_used_gb is not None]
    return PerfFacts(prior=prior, param_gb=max(latest, key=lambda j: j.id).mem_used_gb
                     if latest else None)


async def _fill(store: Store) -> dict[str, set[int]]:
    """Sweeps of three models in every state, of model perf and other kinds; returns the
    ids of each model's sweeps."""
    of_model: dict[str, set[int]] = {m: set() for m in MODELS}
    for i in range(72):
        model, nodes = MODELS[i % 3], NODES[(i // 3) % 2]
        remat = {"overrides": {"remat_policy": "full"}} if i % 7 == 0 else {}
        if i % 6 == 5:   # another kind naming the model: its jobs' memory counts too
            spec: dict[str, Any] = {"kind": "xla-tuning", "model": model, "nodes": nodes}
            kind = "xla-tuning"
        elif i % 6 == 4:   # a model sweep: no top-level model
            spec, kind = {"kind": "model-sweep", "nodes": nodes, "matrix": {model: [2]}}, \
                "model-sweep"
        else:
            spec = _spec(model, nodes, **remat).model_dump(mode="json")
            kind = "model-perf"
        sweep = await store.sweeps.create(kind, f"s{i}", spec)
        if "model" in spec:
            of_model[model].add(sweep)
        for v in (2, 4, 8):
            run = await store.runs.add(sweep, f"b{v}", RunParams(
                overrides={"per_device_batch_size": v}), nodes, "planned")
            job = await store.jobs.create(run, f"tok-{sweep}-{v}", "name", nodes)
            if v == 2 and i % 4 != 3:
                await store.jobs.update(job.id, mem_used_gb=30.0 + i + v / 10)
            await store.runs.transition(run.id, RunState.ACTIVE, "submitted")
            await store.runs.transition(run.id, RunState.PASSED if v < 8 else RunState.FAILED,
                                            "ended", outcome="pass" if v < 8 else "oom",
                                            tgs=100.0 + i + v)
        if i % 4 == 0:
            continue   # still queued
        if i % 4 == 3:
            await store.sweeps.transition(sweep, SweepState.FAILED, "failed")
            continue
        await store.sweeps.transition(sweep, SweepState.RUNNING, "started")
        verdict = {"best": 4, "tgs": 104.0 + i, "settled": i % 4 == 1}
        await store.sweeps.transition(sweep, SweepState.DONE, "done", verdict=verdict)
    return of_model


async def test_the_gather_finds_what_reading_every_sweep_found(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    await _fill(store)
    asked = [_spec(m, n, **more) for m in MODELS for n in NODES
             for more in ({}, {"overrides": {"remat_policy": "full"}})]
    before = [await _every_sweep_read(store, spec) for spec in asked]

    # The gather now never reads every sweep.
    async def every_sweep(*_: Any) -> None:
        raise AssertionError("the gather read every sweep")
    monkeypatch.setattr(store.sweeps, "all", every_sweep)
    after = [await perf_gather.gather(store, spec) for spec in asked]
    assert after == before
    # Not a vacuous match: priors and param memory were found, and told apart by cell.
    assert sum(f.prior is not None for f in after) >= 4
    # Only model sweeps (whose specs name no one model) ran mixtral on chi[1-4].
    assert [(s.model, s.nodes) for s, f in zip(asked, after, strict=True)
            if f.param_gb is None] == [("mixtral-8x22b", "chi[1-4]")] * 2
    assert len({f.prior.sweep for f in after if f.prior is not None}) >= 4


async def test_the_store_returns_only_the_models_settled_sweeps(store: Store) -> None:
    of_model = await _fill(store)
    found = 0
    for model, ids in of_model.items():
        got = await store.sweeps.settled_of_model("model-perf", model)
        # Done with a best and settled (i % 4 == 1), of model perf (not i % 6 in (4, 5)).
        sweeps = [await store.sweeps.get(s) for s in sorted(ids)]
        want = [s.id for s in sweeps if s.state == SweepState.DONE and s.kind == "model-perf"
                and (s.verdict or {}).get("settled")]
        assert [s.id for s in got] == want
        assert all(s.spec["model"] == model for s in got)
        found += len(got)
    assert found >= 4   # not a vacuous match
    assert await store.sweeps.settled_of_model("model-perf", "no-such-model") == []
    assert await store.sweeps.settled_of_model("xla-tuning", MODELS[0]) == []


async def _read_by_one_gather(store: Store, spec: ModelPerfSpec,
                              monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Statements SQLite ran for one gather, and rows the store built from them."""
    statements: list[str] = []
    rows = 0
    conn = store.base._conn   # the store's one connection: its statements, as SQLite ran them
    await conn.set_trace_callback(statements.append)
    read = type(store.base).rows

    async def counted(base: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal rows
        got = await read(base, *args, **kwargs)
        rows += len(got)
        return got

    with monkeypatch.context() as patched:
        patched.setattr(type(store.base), "rows", counted)
        await perf_gather.gather(store, _spec(MODELS[0], NODES[0]))
    await conn.set_trace_callback(None)
    return len(statements), rows


async def test_one_gather_reads_the_same_beside_many_running_sweeps_of_its_model(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's shape (bench/monitor_scale.py: a thousand running sweeps of one model,
    each planned once): what one plan's gather reads must not grow with the model's sweeps
    that can be no prior, or it is quadratic in them."""
    await _fill(store)
    few = await _read_by_one_gather(store, _spec(MODELS[0], NODES[0]), monkeypatch)
    for i in range(60):   # running sweeps of the same model and cell, each with a job
        sweep = await store.sweeps.create("model-perf", f"running{i}",
                                          _spec(MODELS[0], NODES[0]).model_dump(mode="json"))
        await store.sweeps.transition(sweep, SweepState.RUNNING, "started")
        run = await store.runs.add(sweep, "b2", RunParams(overrides={"per_device_batch_size": 2}),
                                   NODES[1], "planned")
        job = await store.jobs.create(run, f"run-{i}", "name", NODES[1])
        await store.jobs.update(job.id, mem_used_gb=50.0)
    many = await _read_by_one_gather(store, _spec(MODELS[0], NODES[0]), monkeypatch)
    assert few[1] > 0 and few == many


async def test_a_verdict_sqlite_cannot_read_never_stops_another_models_gather(
        store: Store) -> None:
    # A garbled log's `Tokens/s/device: 1e999` reads as inf; json.dumps stores `Infinity`,
    # which SQLite's JSON refuses: the store leaves that sweep to the caller to judge.
    bad = await store.sweeps.create("model-perf", "garbled",
                                    _spec(MODELS[2], NODES[0]).model_dump(mode="json"))
    await store.sweeps.transition(bad, SweepState.RUNNING, "started")
    await store.sweeps.transition(bad, SweepState.DONE, "done",
                                  verdict={"best": 4, "tgs": float("inf")})
    good = await store.sweeps.create("model-perf", "good",
                                     _spec(MODELS[0], NODES[0]).model_dump(mode="json"))
    await store.sweeps.transition(good, SweepState.RUNNING, "started")
    await store.sweeps.transition(good, SweepState.DONE, "done",
                                  verdict={"best": 4, "tgs": 104.0})
    assert [s.id for s in await store.sweeps.settled_of_model("model-perf", MODELS[0])] == [good]
    assert [s.id for s in await store.sweeps.settled_of_model("model-perf", MODELS[2])] == [bad]
    await perf_gather.gather(store, _spec(MODELS[0], NODES[0]))   # no error
