"""Rule `verdict.quiet`: where an xla-tuning sweep's runs measured a quarter or less of the
noise the rules assume (`thresholds.noise`, 0.8 %), its verdict says so as a typed caveat
(QUIET): the figure, how much too wide the intervals are, the `thresholds: {noise: ...}` that
would let the search read such gains, and which gains read clear of it. It decides nothing.
The real TPU v5e chip's runs agreed within 0.03 % while its report printed a real +0.79 % as
"+0.78 % ± 1.13 %" (tests/fixtures/tpu_v5e/2026-12-06-xla-sweep-fixed/); the simulated chip
replays it."""

from __future__ import annotations

import gzip
import math
import re
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.demo import DEMO
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.measured_noise import READINGS, measured, run_noise
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import plan
from sweepd.kinds.xla_tuning.sim.tuning import TPU_SCENARIO
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS
from sweepd.kinds.xla_tuning.verdict.quiet import quiet_caveat
from sweepd.kinds.xla_tuning.verdict.structure import CaveatKind, Decided, from_stored
from sweepd.monitor.reading import read_log
from sweepd.store.rows import StepRow
from tests.golden_files import GOLDEN, check_golden_cases
from tests.simrun import open_store, run, sim_config
from tests.support.xla import tpu_spec
from tests.xla_verdict_cases import EV, _base, _inputs, _ok

QUIET = str(CaveatKind.QUIET)


async def _swept(tmp_path: Path, scenario: Path, spec: dict[str, Any]
                 ) -> tuple[dict[str, Any], list[float]]:
    """The stored verdict of a sweep on the simulated cluster, and its jobs' `run_noise`."""
    config = sim_config(tmp_path, scenario)
    await run(config, spec)
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        jobs = await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    assert sweep.verdict is not None
    return sweep.verdict, [float(j.facts["run_noise"]) for j in jobs
                           if j.facts.get("run_noise") is not None]


def _quiet(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in verdict["caveats"] if c["kind"] == QUIET]


async def test_a_tpu_sweep_says_its_runs_measured_far_less_noise(tmp_path: Path) -> None:
    """The chip's sweep replayed: the verdict names the ~0.03 % the runs measured, the noise
    that would read them, and vmem32k's +0.79 % as real (below the +2 % bar); at
    `thresholds.noise: 0.0005` the same sweep decides the same and says nothing of it."""
    verdict, steps = await _swept(tmp_path / "prior", TPU_SCENARIO, tpu_spec(max_runs=8))
    said = from_stored(verdict)
    assert said is not None and CaveatKind.QUIET in said.kinds()
    (q,) = _quiet(verdict)
    assert q["rule"] == rule_book.QUIET.id == "verdict.quiet"
    assert 0.0001 < q["measured"] < 0.0006, q          # the chip's 0.03 %
    assert len(steps) == q["step_runs"] == 3           # the evidence run's profiler: no reading
    assert q["assumed"] == THRESHOLDS.noise and q["factor"] > 10
    assert q["measured"] <= THRESHOLDS.quiet * THRESHOLDS.noise
    assert 0.0005 <= q["suggest"] < THRESHOLDS.noise
    text = q["text"]
    assert f"about {q['measured'] * 100:.2g}% run-to-run noise" in text
    assert "far below the 0.8% the rules assume" in text
    assert f"`thresholds: {{noise: {q['suggest']:g}}}`" in text
    assert [c["profile"] for c in q["clear"]] == ["vmem32k"]   # vmem96k: a loss; 64k unrun
    assert re.search(r"vmem32k \+0\.7\d% is real, below the \+2% bar", text), text
    assert text in verdict["reason"]
    # Nothing decided on it: at the noise it suggests, the same runs, the same verdict.
    tuned, _ = await _swept(tmp_path / "tuned", TPU_SCENARIO,
                            tpu_spec(max_runs=8, thresholds={"noise": 0.0005}))
    assert _quiet(tuned) == []   # the spec already asks for as little as it would suggest
    for key in ("rule", "kind", "recipe", "gain", "outcome", "runs"):
        assert tuned[key] == verdict[key], key
    assert [t["tgs"] for t in tuned["top"]] == [t["tgs"] for t in verdict["top"]]


async def test_a_gpu_facts_cell_at_its_noise_gets_no_quiet_caveat(tmp_path: Path) -> None:
    """The demo's cell (xla-tuning-facts.md, 0.8 % a run): its steps read about that, so
    nothing is said."""
    verdict, steps = await _swept(tmp_path, DEMO.scenario, DEMO.specs[0])
    assert len(steps) >= READINGS
    assert statistics.median(steps) > THRESHOLDS.quiet * THRESHOLDS.noise   # read, and loud
    assert _quiet(verdict) == []
    said = from_stored(verdict)
    assert said is not None and CaveatKind.QUIET not in said.kinds()


def _steps(tgs: list[float], first: int = 5) -> list[StepRow]:
    return [StepRow(job_id=1, step=first + i, seconds=1.0, tflops=None, mfu=None, tgs=x,
                    loss=None) for i, x in enumerate(tgs)]


def test_a_runs_noise_is_its_steady_steps_standard_error() -> None:
    tgs = [1000.0, 1002.0, 998.0, 1001.0, 999.0, 1000.0, 1003.0, 997.0, 1000.0, 1000.0]
    warm = _steps([500.0, 700.0, 900.0], first=0)   # compilation: outside the window
    got = run_noise([*warm, *_steps(tgs)], profiler=False)
    assert got == pytest.approx(statistics.stdev(tgs) / 1000.0 / math.sqrt(10))
    assert run_noise(_steps(tgs), profiler=True) is None     # the profiler times its steps
    assert run_noise(_steps(tgs[:3]), profiler=False) is None


def _with_noise(results: list[Result], noise: float | None) -> list[Result]:
    return [replace(r, run_noise=noise) if r.outcome is Outcome.OK else r for r in results]


def _cell() -> list[Result]:
    """A cell whose repeats differ ~1 %: the spread between its runs reads loud."""
    return [*(_ok("baseline", x, 1) for x in (990.0, 1000.0, 1010.0)),
            _ok("baseline", 1100.0, 1, "dense"), _ok("evidence", 990.0, 1),
            *(_ok("ovl2", x) for x in (995.0, 1012.0)), _ok("ovl4", 1000.0, 4),
            _ok("ovl8", 1000.0, 5, rule="")]


def test_the_larger_reading_counts_once_it_has_enough_runs() -> None:
    results = _cell()
    inp = _inputs()
    loud = build(_with_noise(results, 0.0002), inp.noise, inp.max_flakes)
    m = measured(loud)
    assert m is not None and m.between is not None and m.df >= READINGS
    assert m.value == m.between > 0.005      # quiet steps, loud repeats: not quiet
    steps_only = build(_with_noise(results[:2], 0.0002), inp.noise, inp.max_flakes)
    assert measured(steps_only) is None      # two runs and one degree of freedom: too few
    quiet = build(_with_noise(_base(), 0.0003), inp.noise, inp.max_flakes)
    m = measured(quiet)
    assert m is not None and m.value == pytest.approx(0.0003)


def test_the_caveat_decides_nothing_in_the_planners_verdict() -> None:
    """The same runs with and without their steps' readings: the same verdict, but for the
    caveat; and loud steps say nothing."""
    results = [*_base(), *(_ok("ovl2", 1001.0) for _ in range(2)), _ok("ag768M", 1038.0),
               _ok("ag768M", 1036.0, 3, rule="noise.confirm"),
               _ok("ag768M", 1035.0, 3, rule="noise.confirm"), _ok("ovl4", 1000.0, 4),
               _ok("ovl8", 1000.0, 5)]
    said = {}
    for name, noise in (("quiet", 0.0003), ("loud", 0.008)):
        v = plan(_inputs(), _with_noise(results, noise), EV)
        assert isinstance(v, Decided)
        said[name] = v
    quiet, loud = said["quiet"], said["loud"]
    assert CaveatKind.QUIET in quiet.said.kinds() and CaveatKind.QUIET not in loud.said.kinds()
    for key in ("kind", "rule", "recipe", "gain", "interval", "conditional", "win", "n"):
        assert getattr(quiet, key) == getattr(loud, key), key
    assert quiet.said.outcome is loud.said.outcome
    (q,) = [c for c in quiet.said.caveats if c.kind is CaveatKind.QUIET]
    assert q.data["clear"][0]["profile"] == "ag768M"
    check_golden_cases(GOLDEN / "xla_quiet" / "planner_caveat.txt", {"quiet": q.text})


def test_the_real_chips_sweep_reads_quiet_on_its_own_steps() -> None:
    """The chip's sweep (tests/fixtures/tpu_v5e/2026-12-06-xla-sweep-fixed/: one run each, no
    repeat) read by the rule: its steps spread ~0.3 % a step, ~0.1 % a run (3x the 0.03 % its
    runs agreed within), a quarter of the 0.8 % or less: vmem32k's +0.8 % reads real."""
    chip = Path(__file__).parent / "fixtures" / "tpu_v5e" / "2026-12-06-xla-sweep-fixed"
    jobs = {1: "baseline", 2: "evidence", 3: "vmem32k", 4: "vmem64k", 5: "vmem96k"}
    results = []
    for n, profile in jobs.items():
        with gzip.open(chip / f"job{n}.log.gz", "rt", encoding="utf-8", errors="replace") as f:
            reading = read_log(f.read().splitlines())
        steps = [StepRow(job_id=n, step=s.step, seconds=s.seconds, tflops=None, mfu=None,
                         tgs=s.tgs, loss=None) for s in reading.steps.values()]
        profiler = profile == "evidence"
        tgs = statistics.fmean(reading.steps[s].tgs for s in reading.window)
        results.append(Result(profile, "default", Outcome.OK, tgs, wave=1 if n < 3 else 2,
                              run_noise=run_noise(steps, profiler)))
    inp = Inputs(Parallelism.parse("FSDP=1"), ())
    board = build(results, inp.noise, inp.max_flakes)
    assert len(board.step_noise) == 4                      # the profiler's run: none
    q = quiet_caveat(inp, board)
    assert q is not None and q.kind is CaveatKind.QUIET
    assert 0.0005 < q.data["measured"] < 0.0015            # ~0.1 %: the steps alone
    assert [c["profile"] for c in q.data["clear"]] == ["vmem32k"]
    assert re.search(r"vmem32k \+0\.8\d% is real, below the \+2% bar", q.text), q.text
