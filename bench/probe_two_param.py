"""Two-parameter model perf sweeps: runs and node-hours to the best (second knob, batch)
combination, against the seed's "fix one, sweep the other" and the peers' strategies (not
a test).

    python bench/probe_two_param.py [--cases N] [--seed S] [--smoke]

Ground truth reuses bench/probe_efficiency.py's curve families, memory model, noise and
cost model (node-hours from the simulator's timing). A case is one TGS-vs-batch curve g and
one memory model, and three values of a second knob:

* remat_policy (config `full`; `save_dot_except_mlp` and `minimal` keep more activations:
  the temp slope x1.3-2.0 and x1.8-3.0, a step faster x1.02-1.12 and x1.05-1.20);
* XLA_PYTHON_CLIENT_MEM_FRACTION (config 0.93; 0.85 and 0.98): the pool is the fraction of
  192 GiB, the compiled program and so the TGS at a batch are the same;
* a third block, "remat peak moves" (remat_policy only, the tuned families, its own seed):
  each faster policy's curve is g stretched to peak at a smaller batch (its memory factor
  ** 0.5-1.0), so its speed against the config's differs from batch to batch;
* a fourth block, "config fraction above 0.95" (the tuned families, its own seed): the
  fraction at 0.97 (config), 0.93 and 0.90, modelled as the simulator does (sweepd/sim/
  truth.py): above 0.95 a job runs x0.97 (RCCL starved), above 0.93 the temp is inflated
  x(1 + 2 (f - 0.93)) (XLA fills the larger pool). Red team t05b.

TGS at (setting, batch) is the setting's speed x g(batch x its stretch, 1 but in the third
block), where the batch fits its pool.
"found" is a verdict whose TRUE TGS is within 1 % of the best TRUE TGS of any combination
that runs.

Methods:
* sweepd: grid.next_pair (one memory-aware batch search per setting, each from what the
  others taught), a budget of 24 runs;
* seed, fix one sweep the other: the batch searched by batch-sweep.SKILL.md's procedure
  done literally with the knob at its config value, then each other value run at the batch
  found (and the same with sweepd's one-parameter search for the first half);
* the seed, then its batch search again at the second knob's winning value (one round of
  coordinate search: what the seed needs to reach a batch the config's value cannot fit);
* DeepSpeed Autotuner-style: for each value of the knob, grow the micro-batch (doubling)
  until OOM, bisect to the largest fit, keep the fastest run;
* NeMo AutoConfigurator-style: a grid of batches (powers of two) x every knob value, pruned
  by the memory estimate (the setting's largest fit x the case's estimate error), one short
  run each, keep the fastest;
* every batch of every setting once, up to its OOM: the noise ceiling, not a contender.

Each case has its own noise stream, the same for every method.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_efficiency import (
    BANDS,
    COMPILE_S,
    ERROR,
    FAMILIES,
    HANG_ATTEMPTS,
    HANG_S,
    HOLDOUT_FAMILIES,
    INIT_S,
    NODES,
    NOISE,
    POOL_GB,
    STEP_AT_MAX_S,
    STEPS,
    Cluster,
    Memory,
    _memory,
    _tgs,
    power_binsearch,
    skill_literal,
    sweepd,
)

from sweepd.kinds.model_perf.search import Outcome, Probe, Value, batch_space
from sweepd.kinds.model_perf.two_param.grid import next_pair
from sweepd.kinds.model_perf.two_param.pairs import Pair, best_pair

FOUND = 0.01
BUDGET = 24  # runs for a two-parameter sweep
GPU_GB = POOL_GB / 0.93  # 192 GiB as GB
REMAT = ("full", "save_dot_except_mlp", "minimal")
FRACTIONS = (0.93, 0.85, 0.98)
HIGH_FRACTIONS = (0.97, 0.93, 0.90)  # the config above 0.95 (the fourth block)
KNOBS = {"remat_policy": REMAT, "_env_XLA_PYTHON_CLIENT_MEM_FRACTION": FRACTIONS}


@dataclass(frozen=True)
class Setting:
    value: Value
    pool: float  # GB the allocator may use
    act: float  # activation (temp slope) multiplier
    speed: float  # TGS multiplier
    # The curve at this setting is g read at batch x stretch: it peaks at the peak / stretch
    # (the "remat peak moves" family: a policy keeping more activations turns earlier).
    stretch: float = 1.0


@dataclass(frozen=True)
class Case:
    family: str
    knob: str
    mem: Memory
    g: tuple[float, ...]  # TGS of batch b at g[b - 1], at speed 1
    settings: tuple[Setting, ...]  # the config's first
    error: float  # the memory estimate's error factor

    def temp(self, s: Setting, b: int) -> float:
        m = self.mem
        return m.const + s.act * m.slope * b * (1 + m.curve * (b / m.m - 0.5))

    def fits(self, s: Setting, b: int) -> bool:
        return b <= len(self.g) and \
            self.mem.fixed + self.temp(s, b) + self.mem.headroom <= s.pool

    def max_fit(self, s: Setting) -> int:
        return max((b for b in range(1, len(self.g) + 1) if self.fits(s, b)), default=0)

    def true(self, s: Setting, b: int) -> float:
        if s.stretch == 1.0:
            return s.speed * self.g[b - 1]
        return s.speed * self.g[min(len(self.g), max(1, round(b * s.stretch))) - 1]

    @property
    def peak(self) -> float:
        return max(s.speed * max(self.g) for s in self.settings)

    def step_s(self, s: Setting, b: int) -> float:
        ref = max(1, self.max_fit(self.settings[0]))
        return STEP_AT_MAX_S * b / ref / max(self.true(s, b) / self.peak, 1e-6)

    def hangs(self, s: Setting, b: int) -> bool:
        return self.step_s(s, b) > HANG_S

    def runs(self, s: Setting, b: int) -> bool:
        return self.fits(s, b) and not self.hangs(s, b)

    @property
    def optimum(self) -> float:
        return max((self.true(s, b) for s in self.settings
                    for b in range(1, self.max_fit(s) + 1) if self.runs(s, b)), default=0.0)

    def setting(self, value: Value) -> Setting:
        return next(s for s in self.settings if s.value == value)

    @property
    def estimate(self) -> int:
        return max(1, round(self.max_fit(self.settings[0]) * self.error))


class Cluster2:
    """Runs (setting, batch) as probe_efficiency.Cluster runs a batch, with its costs."""

    def __init__(self, case: Case, rng: random.Random, noise: float) -> None:
        self.case, self.rng, self.noise, self.runs, self.seconds = case, rng, noise, 0, 0.0
        self.config_seconds = 0.0  # of which at the config's setting

    @property
    def node_hours(self) -> float:
        return self.seconds * NODES / 3600

    def run(self, value: Value, b: int, hang_attempts: int = 1) -> Probe:
        """`hang_attempts`: what a hang costs by the method's own rule (sweepd retries one
        after a memory line that fits; the seed and the peers do not)."""
        before = self.seconds
        probe = self._run(value, b, hang_attempts)
        if value == self.case.settings[0].value:
            self.config_seconds += self.seconds - before
        return probe

    def _run(self, value: Value, b: int, hang_attempts: int) -> Probe:
        c, s = self.case, self.case.setting(value)
        self.runs += 1
        noise = self.rng.uniform(1 - self.noise, 1 + self.noise)
        temp, fixed = round(c.temp(s, b), 1), round(c.mem.fixed, 1)
        if not c.fits(s, b):
            self.seconds += INIT_S + COMPILE_S
            short = max(0.0, c.mem.fixed + c.temp(s, b) + c.mem.headroom - s.pool)
            alloc = short + self.rng.uniform(0, 1) * c.mem.slope * s.act
            return Probe(b, Outcome.OOM, None, temp_gb=temp, fixed_gb=fixed, limit_gb=s.pool,
                         alloc_gb=round(alloc, 2))
        if c.hangs(s, b):
            self.seconds += hang_attempts * (INIT_S + COMPILE_S + HANG_S)
            return Probe(b, Outcome.SLOW, None, temp_gb=temp, fixed_gb=fixed, limit_gb=s.pool)
        self.seconds += INIT_S + COMPILE_S + STEPS * c.step_s(s, b)
        return Probe(b, Outcome.OK, c.true(s, b) * noise, temp_gb=temp, fixed_gb=fixed,
                     limit_gb=s.pool)


class At(Cluster):
    """One setting of a Cluster2, for the one-parameter methods of probe_efficiency."""

    def __init__(self, cluster: Cluster2, value: Value, pairs: list[Pair]) -> None:
        self.cluster, self.value, self.pairs = cluster, value, pairs
        self.noise = cluster.noise  # the one-parameter search is told it (as the kind reads it)
        self.hang_attempts = 1  # sweepd's search sets 2 (it retries a hang once)
        self.memory_line = True  # Cluster2 prints the compiled-memory line

    def run(self, b: int) -> Probe:
        probe = self.cluster.run(self.value, b, self.hang_attempts)
        self.pairs.append((self.value, probe))
        return probe


def _starved(f: float) -> Setting:
    """The simulator's fraction (sweepd/sim/truth.py): above 0.95 RCCL is starved (x0.97),
    above 0.93 XLA inflates the temp to fill the larger pool."""
    return Setting(f, f * GPU_GB, 1 + 2 * max(0.0, f - 0.93), 0.97 if f > 0.95 else 1.0)


def make_case(rng: random.Random, family: str, knob: str, curvature: float,
              error: float, shift: bool = False, starved: bool = False) -> Case:
    low = 16 if family == "steep-interior" else 4
    mem, m = _memory(rng, rng.randint(low, 64), curvature)
    settings: tuple[Setting, ...]
    if starved:
        settings = tuple(_starved(f) for f in HIGH_FRACTIONS)
    elif knob == "remat_policy":
        settings = (Setting("full", POOL_GB, 1.0, 1.0),
                    Setting("save_dot_except_mlp", POOL_GB, rng.uniform(1.3, 2.0),
                            rng.uniform(1.02, 1.12)),
                    Setting("minimal", POOL_GB, rng.uniform(1.8, 3.0), rng.uniform(1.05, 1.2)))
    else:
        settings = tuple(Setting(f, f * GPU_GB, 1.0, 1.0) for f in FRACTIONS)
    if shift:  # each faster policy's curve peaks earlier: its memory factor ** 0.5-1.0
        settings = (settings[0], *(replace(s, stretch=s.act ** rng.uniform(0.5, 1.0))
                                   for s in settings[1:]))
    top_pool = max(s.pool for s in settings)
    big = m
    while mem.fixed + mem.const + mem.slope * (big + 1) * (
            1 + mem.curve * ((big + 1) / mem.m - 0.5)) + mem.headroom <= top_pool:
        big += 1
    return Case(family, knob, mem, tuple(_tgs(rng, family, big)), settings, error)


def _error(rng: random.Random, i: int, families: int) -> float:
    """The i-th case's estimate error: log-uniform in its band (the bands taken in turn)."""
    lo, hi = ERROR[BANDS[(i // families) % len(BANDS)]]
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def workload(count: int, seed: int, families: Sequence[str], curvature: float) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        error = _error(rng, i, len(families))
        knob = tuple(KNOBS)[i % 2]
        cases.append(make_case(rng, families[(i // 2) % len(families)], knob, curvature, error))
    return cases


def shifted_workload(count: int, seed: int, curvature: float) -> list[Case]:
    """remat_policy cases whose faster policies peak at a smaller batch than the config's
    (the curve stretched by the policy's memory factor ** 0.5-1.0): one speed ratio read at
    the config's best batch no longer holds at the policy's own best."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        error = _error(rng, i, len(FAMILIES))
        cases.append(make_case(rng, FAMILIES[i % len(FAMILIES)], "remat_policy", curvature,
                               error, shift=True))
    return cases


def starved_workload(count: int, seed: int, curvature: float) -> list[Case]:
    """Fraction cases with the config at 0.97, where the simulator starves RCCL: a smaller
    pool runs the same batch faster."""
    rng = random.Random(seed)
    knob = "_env_XLA_PYTHON_CLIENT_MEM_FRACTION"
    return [make_case(rng, FAMILIES[i % len(FAMILIES)], knob, curvature,
                      _error(rng, i, len(FAMILIES)), starved=True) for i in range(count)]


# -- methods: each returns every (setting, probe) it ran --------------------------------


def two_param(cluster: Cluster2) -> list[Pair]:
    c = cluster.case
    values = [s.value for s in c.settings]
    space = batch_space(c.estimate)
    pairs: list[Pair] = []
    while len(pairs) < BUDGET and (step := next_pair(
            space, c.knob, values, pairs, runs_left=BUDGET - len(pairs))) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, cluster.run(step.second, step.value, HANG_ATTEMPTS)))
    return pairs


def _fix_one(first: Callable[[Cluster, int], list[Probe]]) -> Callable[[Cluster2], list[Pair]]:
    def method(cluster: Cluster2) -> list[Pair]:
        c = cluster.case
        pairs: list[Pair] = []
        config = c.settings[0].value
        at = At(cluster, config, pairs)
        first(at, c.estimate)
        top = best_pair(pairs)
        if top is None:
            return pairs
        for s in c.settings[1:]:  # by the first search's hang rule
            pairs.append((s.value, cluster.run(s.value, int(top[1].value), at.hang_attempts)))
        return pairs
    return method


def _fix_one_twice(cluster: Cluster2) -> list[Pair]:
    """The seed, then its batch search again (SKILL.md literal) at the second knob's
    winning value when that is not the config's: one round of coordinate search, the least
    the seed needs to reach a combination whose batch the config's value does not fit."""
    pairs = _fix_one(skill_literal)(cluster)
    top = best_pair(pairs)
    if top is not None and top[0] != cluster.case.settings[0].value:
        skill_literal(At(cluster, top[0], pairs), int(top[1].value))
    return pairs


def deepspeed(cluster: Cluster2) -> list[Pair]:
    pairs: list[Pair] = []
    for s in cluster.case.settings:
        power_binsearch(At(cluster, s.value, pairs), 0)
    return pairs


def nemo(cluster: Cluster2) -> list[Pair]:
    c = cluster.case
    pairs: list[Pair] = []
    for s in c.settings:
        limit = max(1, round(c.max_fit(s) * c.error))
        b = 1
        while b <= limit:
            pairs.append((s.value, cluster.run(s.value, b)))
            b *= 2
    return pairs


def every_combination(cluster: Cluster2) -> list[Pair]:
    """Reference ceiling, not a contender: every batch of every setting up to its OOM."""
    pairs: list[Pair] = []
    for s in cluster.case.settings:
        for b in range(1, 4097):
            pairs.append((s.value, probe := cluster.run(s.value, b)))
            if probe.outcome is Outcome.OOM:
                break
    return pairs


ORACLE = "oracle: best combination + 2 neighbours"


def oracle(cluster: Cluster2) -> list[Pair]:
    """A floor, not a method: it knows the best combination and runs only it and the batch
    on each side at its setting (above that setting's largest fit: its OOM), the least
    that shows a measured best is a local peak. It runs nothing at the other settings, so
    no search that checks them spends less."""
    c = cluster.case
    top = max(((c.true(s, b), s, b) for s in c.settings for b in range(1, c.max_fit(s) + 1)
               if c.runs(s, b)), key=lambda t: t[0], default=None)
    if top is None:
        return []
    _, s, b = top
    return [(s.value, cluster.run(s.value, v)) for v in (b, b - 1, b + 1) if v >= 1]


METHODS: dict[str, Callable[[Cluster2], list[Pair]]] = {
    "sweepd two-parameter": two_param,
    "seed: fix one (SKILL.md literal), sweep other": _fix_one(skill_literal),
    "fix one (sweepd search), sweep other": _fix_one(sweepd),
    "seed, then the batch again at the winner": _fix_one_twice,
    "DeepSpeed Autotuner-style": deepspeed,
    "NeMo AutoConfigurator-style": nemo,
    "every combination once (noise ceiling)": every_combination,
    ORACLE: oracle,
}
SEED = "seed: fix one (SKILL.md literal), sweep other"


@dataclass(frozen=True)
class Result:
    runs: int
    found: bool
    hours: float
    config_hours: float = 0.0  # node-hours at the config's setting


def evaluate(cases: Sequence[Case], seed: int, noise: float) -> dict[str, list[Result]]:
    out: dict[str, list[Result]] = {}
    for name, method in METHODS.items():
        out[name] = []
        for i, case in enumerate(cases):
            # Each case its own noise stream: a method's extra runs on one case do not
            # shift the noise every later case sees.
            cluster = Cluster2(case, random.Random(seed + 1 + i), noise)
            top = best_pair(method(cluster))
            true = case.true(case.setting(top[0]), int(top[1].value)) if top else 0.0
            out[name].append(Result(cluster.runs, true >= (1 - FOUND) * case.optimum,
                                    cluster.node_hours,
                                    cluster.config_seconds * NODES / 3600))
    return out


def report(title: str, cases: Sequence[Case], results: dict[str, list[Result]]) -> None:
    for knob in KNOBS:
        keep = [c.knob == knob for c in cases]
        if not any(keep):
            continue
        print(f"\n[{title}, {knob.removeprefix('_env_')}: {sum(keep)} cases]")
        print(f"{'method':46} {'runs':>5} {'p95':>4} {'found 1%':>9} {'node-h':>7} "
              f"{'vs seed':>8} {'at config':>9}")
        seed_h = statistics.mean(r.hours for r, k in zip(results[SEED], keep, strict=True)
                                 if k)
        for name, rs in results.items():
            mine = [r for r, k in zip(rs, keep, strict=True) if k]
            runs = sorted(r.runs for r in mine)
            hours = statistics.mean(r.hours for r in mine)
            print(f"{name:46} {statistics.mean(runs):5.2f} "
                  f"{runs[math.ceil(0.95 * len(runs)) - 1]:4d} "
                  f"{sum(r.found for r in mine) / len(mine):9.1%} {hours:7.2f} "
                  f"{hours / seed_h:8.1%} "
                  f"{statistics.mean(r.config_hours for r in mine):9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--holdout-seed", type=int, default=99173)
    parser.add_argument("--shift-seed", type=int, default=31337)
    parser.add_argument("--starve-seed", type=int, default=4242)
    parser.add_argument("--noise", type=float, default=NOISE)
    parser.add_argument("--smoke", action="store_true", help="a few cases (CI)")
    a = parser.parse_args()
    count = 20 if a.smoke else a.cases
    print(f"noise +-{a.noise:.2%} uniform; budget {BUDGET} runs; node-hours on {NODES} "
          f"nodes; found = true TGS within {FOUND:.0%} of the best combination")
    tuned = workload(count, a.seed, FAMILIES, 0.03)
    report("tuned families", tuned, evaluate(tuned, a.seed, a.noise))
    held = workload(count, a.holdout_seed, HOLDOUT_FAMILIES, 0.08)
    report("held-out families", held, evaluate(held, a.holdout_seed, a.noise))
    moved = shifted_workload(count // 2, a.shift_seed, 0.03)
    report("remat peak moves (tuned families)", moved, evaluate(moved, a.shift_seed, a.noise))
    high = starved_workload(count // 2, a.starve_seed, 0.03)
    report("config fraction above 0.95 (tuned families)", high,
           evaluate(high, a.starve_seed, a.noise))


if __name__ == "__main__":
    main()
