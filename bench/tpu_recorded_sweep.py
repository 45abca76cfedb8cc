"""The model perf search on the real TPU v5e chip's recorded runs, judged against every value
once on that chip (tests/fixtures/tpu_v5e/: real MaxText, the 0.27 B model, batches 4-48 pass,
80 out of memory at compile).

Each sweep is `sweepd run` on the local backend, whose train command is
scripts/tpu/replay_trainer.py: every job prints the recorded run of its batch line for line,
so the search reads the chip's own log lines (absl-prefixed steps, the `Total estimated memory
size` line, the HBM out-of-memory). Its cost is counted as the chip paid it: the recorded
wall seconds of each run it made (a process: imports, chip start, compile, 15 steps), a run
made twice counted twice. The truth is every value once: its best TGS and its chip-seconds.

    python bench/tpu_recorded_sweep.py [--smoke]
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The replay of a sweep through the local backend is recorded_curves.py's, beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from recorded_curves import replay_report  # noqa: E402

RUNS = ROOT / "tests" / "fixtures" / "tpu_v5e"
TRAINER = ROOT / "scripts" / "tpu" / "replay_trainer.py"
VALUES = [4, 8, 12, 16, 24, 32, 48, 80]
# The spec's options measured here: the default, and the noise floor a quiet chip allows.
METHODS: dict[str, dict[str, object]] = {
    "sweepd default (noise floor 1 %)": {},
    "sweepd measured_noise": {"measured_noise": True},
    "sweepd noise_floor 0.001": {"noise_floor": 0.001},
}
_HEADER = re.compile(r"^########## RUN tag=\S+ batch=(\d+) .*\brc=(-?\d+) wall_s=([0-9.]+)")
_STEP = re.compile(r"completed step: (\d+), seconds: [0-9.]+, TFLOP/s/device: [0-9.]+, "
                   r"Tokens/s/device: ([0-9.]+)")


def recorded() -> dict[int, tuple[float | None, float]]:
    """batch -> (steady TGS, mean of steps 5-14, None if it failed; wall seconds)."""
    out: dict[int, tuple[float | None, float]] = {}
    for path in sorted(RUNS.glob("2026-12-06-b*.log.gz")):
        with gzip.open(path, "rt") as f:
            text = f.read()
        head = _HEADER.match(text)
        assert head, path
        batch, rc, wall = int(head[1]), int(head[2]), float(head[3])
        steps = {int(m[1]): float(m[2]) for m in _STEP.finditer(text)}
        window = [steps[s] for s in range(5, 15) if s in steps]
        out[batch] = (sum(window) / len(window) if rc == 0 and window else None, wall)
    return out


def sweep(options: dict[str, object], work: Path) -> tuple[list[int], int | None, str]:
    """The batches the search ran, in order, the batch its verdict names and its caveat."""
    data = replay_report(work, f"{sys.executable} {TRAINER}", VALUES, options)
    verdict = data.get("verdict")
    caveat = str(verdict.get("caveat") or "") if isinstance(verdict, dict) else ""
    return _ran(data), _best(data), caveat


def _ran(data: dict[str, object]) -> list[int]:
    """Each job's batch, in job order (a run made again is a job more)."""
    rows = data.get("rows")
    assert isinstance(rows, list), data.keys()
    return [int(r["value"]) for r in sorted(rows, key=lambda r: int(r["job"]))]


def _best(data: dict[str, object]) -> int | None:
    verdict = data.get("verdict")
    if isinstance(verdict, dict) and verdict.get("best") is not None:
        return int(verdict["best"])
    return None


def tpe(truth: dict[int, tuple[float | None, float]], trials: int, seeds: int
        ) -> tuple[float, float, float]:
    """Optuna's TPE over the same values, `trials` runs each (a value it asks for again is
    looked up, not run: generous to it), its best measured value taken: (share of seeds that
    found the true best, mean shortfall against it, mean chip-seconds)."""
    import optuna  # a bench dependency (pyproject's `bench` extra)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tgs = {b: t for b, (t, _) in truth.items() if t is not None}
    best = max(tgs.values())
    found = short = cost = 0.0
    for seed in range(seeds):
        ran: dict[int, float] = {}
        study = optuna.create_study(direction="maximize",
                                    sampler=optuna.samplers.TPESampler(seed=seed))
        for _ in range(trials):
            trial = study.ask()
            b = int(trial.suggest_categorical("batch", VALUES))
            if b not in ran:
                cost += truth[b][1]
            ran[b] = tgs.get(b, 0.0)
            study.tell(trial, ran[b])
        top = max(ran.values())
        found += top == best
        short += 1 - top / best
    return found / seeds, short / seeds, cost / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="the default method only (CI)")
    args = parser.parse_args()
    truth = recorded()
    tgs = {b: t for b, (t, _) in truth.items() if t is not None}
    best = max(tgs, key=lambda b: tgs[b])
    every = sum(wall for b, (_, wall) in truth.items() if b in VALUES)
    print(f"every value once: best {best} at {tgs[best]:,.0f} tokens/s/device, "
          f"{len(VALUES)} runs, {every:.0f} chip-seconds")
    methods = dict(list(METHODS.items())[:1]) if args.smoke else METHODS
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, options) in enumerate(methods.items()):
            ran, chosen, _ = sweep(options, Path(tmp) / str(i))
            cost = sum(truth[b][1] for b in ran)
            got = tgs.get(chosen) if chosen is not None else None
            gap = f"{got / tgs[best] - 1:+.1%}" if got is not None else "no verdict"
            print(f"{name}: chose {chosen} ({gap} against the best), {len(ran)} runs "
                  f"{ran}, {cost:.0f} chip-seconds ({cost / every:.0%} of every value once)")
    for trials in ([5] if args.smoke else [5, 7]):
        share, short, cost = tpe(truth, trials, 5 if args.smoke else 200)
        print(f"Optuna TPE, {trials} runs: found the best in {share:.0%} of seeds, "
              f"{short:.1%} short of it on average, {cost:.0f} chip-seconds "
              f"({cost / every:.0%})")


if __name__ == "__main__":
    main()
