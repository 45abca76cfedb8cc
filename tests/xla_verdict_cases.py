"""xla-tuning verdicts from real sweeps: whole sweeps on the simulated cluster (the demo, a
bounded stop, the 8 h stop, a max_runs stop on TPU), each stored by the engine, and the
planner's verdicts on given runs (a sub-bar timebox read on its selecting runs, one read on
its report block, a restore_default that ran out of memory). Each case is its verdict line
(what `report`, `explain` and Telegram show) and its structure. Each is run once a process.
tests/test_xla_verdict_structure.py asserts the structure; tests/test_xla_verdict_golden.py
holds the prose to tests/golden/xla_tuning/."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.demo import DEMO
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import REPORT, Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import plan
from sweepd.kinds.xla_tuning.sim.tuning import TPU_SCENARIO
from sweepd.kinds.xla_tuning.verdict import render
from sweepd.kinds.xla_tuning.verdict.structure import Conclusion, Decided, from_stored
from tests.simrun import open_store, run, sim_config
from tests.support.xla import tpu_spec
from tests.support.xla_sim import FAST, env_profile, landscape, spec, sweep_on_sim
from tests.support.xla_verdicts import _base as verdicts_base
from tests.support.xla_verdicts import _inputs as verdicts_inputs
from tests.support.xla_verdicts import _ok as verdicts_ok
from tests.support.xla_verdicts import _timeboxed as timeboxed


@dataclass(frozen=True)
class Case:
    summary: str                   # the sweep's reason: the verdict line every reader shows
    said: Conclusion               # its structure (read back from the store where stored)
    verdict: dict[str, Any] | None = None  # the stored verdict (engine cases)


def _stored(summary: str | None, verdict: dict[str, Any] | None) -> Case:
    assert summary is not None and verdict is not None
    said = from_stored(verdict)
    assert said is not None, verdict
    return Case(summary, said, verdict)


def _tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="xla-verdict-"))


@cache
def demo() -> Case:
    """`sweepd demo --kind xla-tuning`'s sweep: the seed's winner rule with Wave 6 run."""
    async def go() -> Case:
        config = sim_config(_tmp(), DEMO.scenario)
        await run(config, DEMO.specs[0])
        store = await open_store(config)
        try:
            sweep = (await store.sweeps.all())[0]
        finally:
            await store.close()
        return _stored(sweep.reason, sweep.verdict)
    return asyncio.run(go())


@cache
def bounded() -> Case:
    """26 profiles, the best +1 %: structurally bounded (the 8 h timebox moved away)."""
    land = landscape(effects={"NCCL_KNOB_03=1": {"tgs": 1.01}})
    the_spec = spec([env_profile(i) for i in range(26)], thresholds={"max_queue_hours": 48})
    _, swept, _ = asyncio.run(sweep_on_sim(_tmp(), land, the_spec))
    return _stored(swept.sweep.reason, swept.sweep.verdict)


@cache
def timebox() -> Case:
    """~2.5 h jobs: the 8 h of queue time end the sweep with what it has."""
    land = landscape(base_tgs={"default": 50.0}, step_s_at_base=573.0,
                     effects={f"{FAST}=true": {"tgs": 1.03}})
    profiles = [{"name": "fast", "settings": {FAST: "true"}}] + [env_profile(i)
                                                                 for i in range(20)]
    _, swept, _ = asyncio.run(sweep_on_sim(_tmp(), land, spec(profiles), time_scale=0.0002))
    return _stored(swept.sweep.reason, swept.sweep.verdict)


@cache
def max_runs() -> Case:
    """A TPU sweep of the whole catalog capped at 6 runs by the spec."""
    async def go() -> Case:
        config = sim_config(_tmp(), TPU_SCENARIO)
        await run(config, tpu_spec(catalog="extend", profiles=[], max_runs=6))
        store = await open_store(config)
        try:
            sweep = (await store.sweeps.all())[0]
        finally:
            await store.close()
        return _stored(sweep.reason, sweep.verdict)
    return asyncio.run(go())


# The planner on given runs (tests/test_xla_tuning_subbar.py's sub-bar cell: a +3.5 %
# single confirmed on two fresh runs, Wave 6 not run on dense, 2500 s of queue a run).
EV = Evidence(((Cost.ALL_GATHER, 0.4), (Cost.COMPUTE, 0.5)), "job 1002 HLO")
STEP = 2500.0


def _inputs(**kw: Any) -> Inputs:
    par = Parallelism.parse("FSDP=8")
    return Inputs(par, default_catalog(par), tags=("sparse", "dense"), drift=DriftRead.MEAN,
                  **kw)


def _ok(profile: str, tgs: float, wave: int = 2, tag: str = "sparse", rule: str = "") -> Result:
    return Result(profile, tag, Outcome.OK, tgs, 28.0, queue_s=STEP, wave=wave, rule=rule)


def _base() -> list[Result]:
    return [*(_ok("baseline", 1000.0, 1) for _ in range(3)),
            _ok("baseline", 1100.0, 1, "dense"), _ok("evidence", 990.0, 1)]


def _planned(inp: Inputs, results: list[Result]) -> Case:
    v = plan(inp, results, EV)
    assert isinstance(v, Decided), v
    return Case(render.summary(v.said), v.said)


@cache
def sub_bar_selecting() -> Case:
    """One run left at the stop: no report block could finish; the gain is the selecting
    runs' and the verdict says how far such figures overstate."""
    return _planned(_inputs(), [
        *_base(), *(_ok("ovl2", 1001.0) for _ in range(2)), _ok("ag768M", 1040.0),
        _ok("ag768M", 1035.0, 3, rule="noise.confirm"),
        _ok("ag768M", 1034.0, 3, rule="noise.confirm"), _ok("ovl4", 1000.0, 4),
        _ok("ovl8", 1000.0, 5)])


@cache
def sub_bar_block() -> Case:
    """A leader its runs together put above +2 %, none fresh: its report block ran before
    the stop, and the verdict names it on those runs (conditional)."""
    results = [*_base(), _ok("ag768M", 1040.0), _ok("ag768M", 1033.0, 3, rule="noise.rerun"),
               _ok("ag768M", 1032.0, 3, rule="noise.rerun")]
    block = [_ok(name, 1040.0 if name == "ag768M" else 1000.0, 4, rule=REPORT)
             for name in ("ag768M", "baseline", "ag768M", "baseline")]
    return _planned(_inputs(), [*results, *block, _ok("ovl4", 1000.0, 5)])


@cache
def restore_oom() -> Case:
    """restore_default ran out of memory (the env file's memory fraction is what lets the
    job fit); a +0.4 % single at the 8 h stop: no change (tests/test_xla_tuning_verdicts)."""
    oom = Result("restore_default", "sparse", Outcome.OOM, detail="allocation of 3.1 GiB",
                 wave=1)
    v = timeboxed([*verdicts_base(), oom, verdicts_ok("ag768M", 1004.0),
                   verdicts_ok("ag768M", 1003.0, 3)], verdicts_inputs(pp8()))
    assert isinstance(v, Decided)
    return Case(render.summary(v.said), v.said)


CASES: dict[str, Callable[[], Case]] = {
    "demo_winner": demo, "bounded": bounded, "timebox": timebox, "max_runs": max_runs,
    "sub_bar_selecting": sub_bar_selecting, "sub_bar_block": sub_bar_block,
    "restore_oom": restore_oom,
}
