"""The timeline of one simulated job: every log line with its time, rank and the ending.

Pure: the same job (scenario seed + job id) always yields the same timeline, so every rank
of a Slurm-mode job, each in its own process, agrees on what happens and when.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from sweepd.monitor.steady import STEADY_FIRST, STEADY_FIRST_PROFILER, STEADY_LAST
from sweepd.sim import logfmt, replay
from sweepd.sim.jobinput import JobInput
from sweepd.sim.scenario import FaultKind, MeasuredCurve
from sweepd.sim.signatures import Failure, failure_events, hang_events
from sweepd.sim.timeline import BANNER, SRUN, Event, Plan
from sweepd.sim.truth import Truth
from sweepd.util.model_shapes import resolve_model

TEARDOWN_S = 10.0
REPLAY_STAGE_S = 1.0 / 3       # each wrapper stage of a replayed run (three: one second)
REPLAY_INIT_SHARE = 0.6        # of a replayed run's fixed cost: imports and chip start ...
                               # ... the rest is the compile


@dataclass
class _Timeline:
    job: JobInput
    rng: random.Random
    events: list[Event] = field(default_factory=list)
    files: list[tuple[float, Path, str]] = field(default_factory=list)

    def add(self, t: float, rank: int | None, text: str) -> None:
        self.events.append(Event(t, rank, text))

    def all(self, t: float, text: str, spacing: float = 0.05) -> None:
        for rank in range(len(self.job.nodes)):
            self.add(t + rank * spacing, rank, text.format(host=self.job.nodes[rank]))

    def stage(self, name: str, start: float, length: float, lines: list[str],
              timeout: str) -> float:
        self.add(start, BANNER, logfmt.banner(name, "BEGIN", f"timeout={timeout}"))
        pad = min(1.0, length / 4)   # a short stage (a replay's) keeps its lines inside it
        for i, line in enumerate(lines):
            self.all(start + pad + i * (length - 2 * pad) / max(1, len(lines)), line,
                     spacing=min(0.05, pad / max(1, len(self.job.nodes))))
        self.add(start + length, BANNER, logfmt.banner(name, "END", f"{round(length)}s"))
        return start + length

    def plan(self, end_t: float, failure: Failure | None = None, hang: bool = False) -> Plan:
        events = sorted(self.events, key=lambda e: (e.t, -2 if e.rank is None else e.rank))
        files = tuple(self.files)
        if failure is None:
            exits = dict.fromkeys(range(len(self.job.nodes)), 0)
            return Plan(events, end_t, 0, None, exits, hang, files)
        return Plan(events, end_t, failure.exit_code, failure.text, failure.rank_exits, hang,
                    files)


def _fault_rank(job: JobInput) -> int:
    node = job.fault.node if job.fault else None
    return job.nodes.index(node) if node in job.nodes else 0


def _replayed(job: JobInput) -> MeasuredCurve | None:
    return job.truth.replay if job.truth is not None else None


def _wrapper_s(tl: _Timeline, low: float, high: float) -> float:
    """A maxtext-slurm wrapper stage's length: a replayed chip run has none of them (its
    cost is the table's fixed_cost_s), so they take a token second there."""
    return REPLAY_STAGE_S if _replayed(tl.job) is not None else tl.rng.uniform(low, high)


def _preflight(tl: _Timeline) -> float | Plan:
    fault = tl.job.fault
    if fault is not None and fault.kind is FaultKind.CHECKOUT_OUTAGE:
        tl.add(0.0, BANNER, logfmt.banner("Preflight", "BEGIN", "timeout=900s"))
        tl.all(5.0, "remote: Internal Server Error")
        tl.all(5.5, "fatal: unable to access 'https://code.example/maxtext.git/': "
                    "RPC failed; HTTP 500 curl 22 The requested URL returned error: 500")
        exits = dict.fromkeys(range(len(tl.job.nodes)), 128)
        return _fail(tl, "Preflight", 0.0, 7.0, Failure(exits, 128, "Preflight failed"))
    t = tl.stage("Preflight", 0.0, _wrapper_s(tl, 60, 120), [
        "=== Pre-flight GPU cleanup ===",
        "[INFO] Stopping stale containers on {host}",
        "OCI runtime exec failed: exec failed: unable to start container process: "
        "exec: \"pkill\": executable file not found in $PATH: unknown",
        "WARNING: AMD GPU device(s) is/are in a low-power state",
        "[INFO] 8 GPUs detected on {host}",
        "[INFO] Preflight OK on {host}",
    ], "900s")
    return tl.stage("Docker pull", t, _wrapper_s(tl, 15, 40),
                    ["[INFO] Image up to date: rocm/jax-training:maxtext"], "900s")


def _ecc(tl: _Timeline, start: float) -> Plan | None:
    length = _wrapper_s(tl, 10, 20)
    job = tl.job
    if job.fault is None or job.fault.kind is not FaultKind.ECC:
        tl.stage("ECC check", start, length,
                 ["[INFO] ECC check: 0 uncorrectable errors on {host}"], "300s")
        return None
    tl.add(start, BANNER, logfmt.banner("ECC check", "BEGIN", "timeout=300s"))
    rank = _fault_rank(job)
    tl.add(start + length * 0.8, rank,
           f"[ERROR] ECC check: 2 uncorrectable ECC errors on GPU 5 ({job.nodes[rank]})")
    failure = Failure({**dict.fromkeys(range(len(job.nodes)), 0), rank: 1}, 1, "ECC check failed")
    return _fail(tl, "ECC check", start, start + length, failure)


def _fail(tl: _Timeline, stage: str, start: float, t: float, failure: Failure) -> Plan:
    for rank, code in sorted(failure.rank_exits.items()):
        if code:
            tl.add(t, rank, logfmt.node_exit(tl.job.nodes[rank], code))
            tl.add(t + 0.5, SRUN, f"srun: error: {tl.job.nodes[rank]}: task {rank}: "
                                  f"Exited with exit code {code}")
    tl.add(t + 1, BANNER,
           logfmt.banner(stage, "FAILED", f"exit={failure.exit_code}, {round(t + 1 - start)}s"))
    return tl.plan(t + 2, failure)


def _training_preamble(tl: _Timeline, t0: float, scale: float = 1.0) -> None:
    """The known false positives every run prints; `scale` < 1 packs them into a short
    init (a replayed chip run's)."""
    sc = tl.job.scenario.cluster
    tl.all(t0 + 3 * scale, logfmt.mfu_line(sc.gpu, sc.peak_tflops))
    tl.all(t0 + 6 * scale, "Failed call to cuInit: UNKNOWN ERROR (303)")
    tl.all(t0 + 8 * scale, f"[INFO] Initializing JAX distributed: coordinator "
                           f"{tl.job.nodes[0]}:12345, {len(tl.job.nodes)} processes")
    tl.all(t0 + 20 * scale, "NCCL WARN MSCCL++: Feature not enabled")
    tl.all(t0 + 21 * scale, "NCCL WARN LL cutoff points not detected for a supported arch")
    tl.all(t0 + 30 * scale, "Token indices sequence length is longer than the specified maximum "
                    "sequence length for this model (5012 > 4096). Running this sequence "
                    "through the model will result in indexing errors")


def _jitter(job: JobInput, steps: int, profiling: bool) -> list[float] | None:
    """The kind's per-step deviations, when a kind models the job."""
    if job.kind_job is None:
        return None
    return job.kind_job.jitter(steps, profiling, f"{job.scenario.cluster.seed}:{job.job_id}:steps")


def _steps(tl: _Timeline, truth: Truth, t: float, compile_s: float) -> list[float]:
    """Step lines from time t; returns each step's completion time."""
    job = tl.job
    steps = int(job.overrides.get("steps", "15"))
    noise = job.scenario.cluster.noise
    profiling = job.overrides.get("profiler", "") == "xplane"
    tokens = truth.tokens_per_step
    weights = tokens * 8 * len(job.nodes)
    jitter = _jitter(job, steps, profiling)
    times: list[float] = []
    for step in range(steps):
        if jitter is not None:
            tgs = truth.tgs * max(0.2, 1 + jitter[step])
        else:
            tgs = truth.tgs * max(0.2, 1 + tl.rng.gauss(0, noise))
        seconds = tokens / tgs
        if step == 0:
            seconds += compile_s / truth.factor
        elif profiling and 5 <= step <= 7:
            seconds *= tl.rng.uniform(1.1, 1.3)
        elif profiling and step == 8:
            seconds *= tl.rng.uniform(6, 10)
        tgs = tokens / seconds
        tflops = tgs * truth.tflops / truth.tgs
        loss = 10.9 - 1.6 * (1 - math.exp(-step / 4)) + tl.rng.gauss(0, 0.02)
        t += seconds
        tl.all(t, logfmt.step_line(step, seconds, tflops, 100 * tflops / job.scenario.cluster
                                   .peak_tflops, tgs, weights, loss))
        times.append(t)
    return times


def _kind_env(tl: _Timeline, t0: float) -> None:
    """What each rank prints of its environment before JAX starts (a kind's job)."""
    run = tl.job.kind_job
    if run is None:
        return
    for rank in range(len(tl.job.nodes)):
        for i, line in enumerate(run.env_lines(rank)):
            tl.add(t0 + 1 + 0.01 * i + 0.001 * rank, rank, line)


def _dump(tl: _Timeline, t: float) -> None:
    """A file a kind's job writes after compilation, on rank 0 (e.g. an HLO dump)."""
    run = tl.job.kind_job
    if run is None:
        return
    truth = tl.job.truth
    step_s = truth.tokens_per_step / truth.tgs if truth is not None and truth.tgs > 0 else None
    written = run.dump(len(tl.job.nodes), resolve_model(tl.job.model).layers, step_s)
    if written is not None:
        tl.files.append((t, *written))


def _training(tl: _Timeline, t0: float) -> Plan:
    job = tl.job
    tl.add(t0, BANNER, logfmt.banner("Training", "BEGIN", "timeout=none"))
    _kind_env(tl, t0)
    fault = job.fault
    kind = fault.kind if fault else None
    if job.error is not None or kind in (FaultKind.CONFIG_ERROR, FaultKind.UNKNOWN_FLAG,
                                         FaultKind.ENVIRONMENT):
        return _fail(tl, "Training", t0, *failure_events(tl.add, job, t0 + 5, 0))
    assert job.truth is not None
    truth = job.truth
    if truth.replay is not None:
        return _replayed_training(tl, t0, truth, truth.replay)
    _training_preamble(tl, t0)
    shape = resolve_model(job.model)
    init = tl.rng.uniform(130, 170)
    compile_s = (60 + 1.5 * shape.layers) * (1.3 if shape.moe else 1.0)
    if kind in (FaultKind.COORD_TIMEOUT,):
        return _fail(tl, "Training", t0, *failure_events(tl.add, job, t0 + 0.9 * init, 0))
    if kind is FaultKind.RCCL_FLAKE or (fault and kind is FaultKind.HANG
                                        and fault.hang_phase == "before_memstats"):
        return tl.plan(hang_events(tl.add, job, t0 + 0.4 * init), hang=True)
    if kind is FaultKind.NIC:
        rank = _fault_rank(job)
        tl.add(t0 + 0.5 * init, rank, f"[{job.nodes[rank]}] ionic_comp_msn cqe with error: "
                                      "status 0x6 (remote access error)")
        return tl.plan(t0 + 0.5 * init + 1, hang=True)
    tm = t0 + init
    for line in logfmt.memstats_lines(truth.mem_used_gb, truth.mem_limit_gb):
        tl.all(tm, line, spacing=0.0)
    if fault and kind is FaultKind.HANG and fault.hang_phase == "compile":
        return tl.plan(tm + 5, hang=True)
    # After compilation, before the first step allocates: an OOM run prints it too.
    tl.all(tm + 0.5 * compile_s, logfmt.compiled_memory_line(
        truth.output_gb, truth.temp_gb, truth.argument_gb), spacing=0.0)
    _dump(tl, tm + 0.5 * compile_s)
    if not truth.fits or kind is FaultKind.OOM:
        rank = _fault_rank(job) if kind is FaultKind.OOM else tl.rng.randrange(len(job.nodes))
        return _fail(tl, "Training", t0, *failure_events(tl.add, job, tm + 0.6 * compile_s, rank))
    times = _steps(tl, truth, tm, compile_s)
    if kind is FaultKind.CLEANUP_143:
        end = times[-1] + TEARDOWN_S / 2
        for rank, host in enumerate(job.nodes):
            tl.add(end, rank, logfmt.node_exit(host, 143))
        tl.add(end + 1, BANNER, logfmt.banner("Training", "FAILED",
                                              f"exit=143, {round(end + 1 - t0)}s"))
        return tl.plan(end + 2, Failure(dict.fromkeys(range(len(job.nodes)), 143), 143,
                                        "Training cleanup"))
    if fault and kind in (FaultKind.HSA_ERROR, FaultKind.NODE_CRASH, FaultKind.HANG,
                          FaultKind.HOST_OOM):
        step = min(fault.step, len(times) - 1)
        cut = times[step] + 0.05 * len(job.nodes)    # step lines are staggered per rank
        tl.events = [e for e in tl.events if e.t <= cut]
        after = cut + 0.5 * (times[-1] - times[0]) / max(1, len(times) - 1) + 1
        if kind is FaultKind.HANG:
            return tl.plan(after, hang=True)
        return _fail(tl, "Training", t0, *failure_events(tl.add, job, after, _fault_rank(job)))
    end = (times[-1] if times else tm) + TEARDOWN_S / 2
    tl.add(end, BANNER, logfmt.banner("Training", "END", f"{round(end - t0)}s"))
    return tl.plan(end + TEARDOWN_S / 2)


def _replayed_training(tl: _Timeline, t0: float, truth: Truth, curve: MeasuredCurve) -> Plan:
    """A recorded run: its fixed cost before step 0, its memory line as the chip printed it
    (over the device memory or not), its OOM at compile, its warm-up steps and noise.
    Faults beyond an OOM are the formula's business: a replay is a healthy chip."""
    job = tl.job
    init = REPLAY_INIT_SHARE * curve.fixed_cost_s
    compile_s = curve.fixed_cost_s - init
    tpu = curve.log_format == "tpu"
    if not tpu:
        _training_preamble(tl, t0, scale=init / 40)
    memstats = logfmt.memstats_lines(truth.mem_used_gb, truth.mem_limit_gb,
                                     device="TPU_0(process=0,(0,0,0,0))" if tpu else "rocm:0",
                                     digits=2)
    compiled = t0 + init + compile_s
    if not tpu:
        for line in memstats:
            tl.all(t0 + init, line, spacing=0.0)
    if not truth.fits or (job.fault is not None and job.fault.kind is FaultKind.OOM):
        # The chip ran out of memory compiling: no memory line, no Memstats after it.
        required, available = replay.oom_sizes(curve, truth.batch)
        text = logfmt.tpu_oom_line(required, available) if tpu else logfmt.oom_line(
            max(replay.MIN_SHORTFALL_GIB, required - available))
        tl.all(compiled, text, spacing=0.0)
        return _fail(tl, "Training", t0, compiled + 1,
                     Failure(dict.fromkeys(range(len(job.nodes)), 1), 1, "Training failed"))
    if truth.line_total_gb is not None:
        total, fixed = truth.line_total_gb, truth.argument_gb
        line = logfmt.tpu_memory_line(total, fixed, total - fixed, fixed) if tpu else \
            logfmt.compiled_memory_line(0.0, total - fixed, fixed)
        tl.all(compiled - 0.5 * compile_s, line, spacing=0.0)
    if tpu:
        for line in memstats:
            tl.all(compiled + 0.5, line, spacing=0.0)
    times = _replayed_steps(tl, truth, curve, compiled + 1.0)
    end = times[-1] + TEARDOWN_S / 2
    tl.add(end, BANNER, logfmt.banner("Training", "END", f"{round(end - t0)}s"))
    return tl.plan(end + TEARDOWN_S / 2)


def _replayed_steps(tl: _Timeline, truth: Truth, curve: MeasuredCurve, t: float) -> list[float]:
    """Step lines as the chip printed them: step 0 ~1.8 s, step 1 ~0.6 s, step 2 a fraction
    of a step (a very high tokens/s: it returns before the device is done), then steps at
    the run's TGS (the recorded one times the run-to-run noise), each with the step-to-step
    noise centred on the steady window sweepd reads, whose mean is the run's TGS exactly."""
    job = tl.job
    steps = int(job.overrides.get("steps", "15"))
    profiling = job.overrides.get("profiler", "") == "xplane"
    first = STEADY_FIRST_PROFILER if profiling else STEADY_FIRST
    run_tgs = truth.tgs * (1 + tl.rng.gauss(0, curve.run_noise))
    jitter = [tl.rng.gauss(0, curve.step_noise) for _ in range(steps)]
    window = [jitter[s] for s in range(first, min(STEADY_LAST, steps - 1) + 1)]
    shift = sum(window) / len(window) if window else 0.0
    tokens = truth.tokens_per_step
    steady_s = tokens / run_tgs
    tpu = curve.log_format == "tpu"
    times: list[float] = []
    for step in range(steps):
        # Steps 0 and 1 as recorded, never shorter than a steady step (the recording was
        # at a batch whose step took 0.047 s; a larger batch's first steps do its work too).
        if step == 0:
            seconds = max(curve.warmup.step0_s, steady_s)
        elif step == 1:
            seconds = max(curve.warmup.step1_s, steady_s)
        elif step == 2:
            seconds = curve.warmup.step2_share * steady_s
        else:
            seconds = tokens / (run_tgs * max(0.2, 1 + jitter[step] - shift))
        tgs = tokens / seconds
        tflops = tgs * truth.tflops / truth.tgs
        loss = 10.9 - 1.6 * (1 - math.exp(-step / 4)) + tl.rng.gauss(0, 0.02)
        t += seconds
        line = logfmt.tpu_step_line(step, seconds, tflops, tgs, tokens, loss) if tpu else \
            logfmt.step_line(step, seconds, tflops,
                             100 * tflops / job.scenario.cluster.peak_tflops, tgs,
                             tokens * len(job.nodes), loss)
        tl.all(t, line)
        times.append(t)
    return times


def plan_job(job: JobInput) -> Plan:
    rng = random.Random(f"{job.scenario.cluster.seed}:{job.job_id}")
    tl = _Timeline(job, rng)
    t = _preflight(tl)
    if isinstance(t, Plan):
        return t
    ecc_failed = _ecc(tl, t)
    if ecc_failed is not None:
        return ecc_failed
    ecc_end = max(e.t for e in tl.events)
    return _training(tl, ecc_end)
