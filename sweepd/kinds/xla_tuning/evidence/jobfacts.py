"""What a tuning job's log and files say, extracted once and kept on the job in the store
(`Kind.job_facts`; `Job.facts`): the gather, planner and report read them there.

- `fold(facts, lines)`, as the monitor reads the log: every `K=V` rank 0 printed (last
  wins; XLA_FLAGS apart, as `xla`), the flags the image rejected (`unknown`, any rank), and
  the simulated cluster's `Cluster time:` span. Every variable is kept, not only the tuned
  families: a profile may set any env var, and which one is known only at the gather (its
  run's params); a log printing more than MAX_KEYS distinct ones keeps the families only,
  and a credential's name (`HF_TOKEN`, `WANDB_API_KEY`, …: no profile tunes one) is never
  kept, so the store holds no secret a job's `printenv` showed.
- `ended(job)`, once, when the job has ended and before it is judged: from its stored steps
  the last loss, the steady window's mean step time and what its steps say of its noise
  (`run_noise`: `measured_noise.run_noise`); where its HLO dump is (`dump`: the
  evidence run is judged by it); and for the evidence run the dump's collectives as shares
  of the step and their count (`evidence`, `logread.hlo_evidence`), the compiled memory
  its memory-usage report totals, and where MaxText's profiler left its trace (`xplane`).

The trace (`<base_output_directory>/<run_name>/tensorboard/plugins/profile/<time>/
<host>.xplane.pb`) is found, not read: it is a protobuf whose schema ships with xprof /
TensorFlow, neither of which a tuning host has (the TPU machine's index lacks xprof); the
HLO dump beside it names the same ops as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from sweepd.kinds.api import EndedJob, Facts
from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence
from sweepd.kinds.xla_tuning.evidence import logread
from sweepd.kinds.xla_tuning.evidence.measured_noise import run_noise
from sweepd.kinds.xla_tuning.evidence.results import EVIDENCE
from sweepd.monitor.parse import CLUSTER_TIME
from sweepd.monitor.steady import steady_window, unperturbed
from sweepd.store.rows import Job, StepRow

MAX_KEYS = 1024   # distinct variables kept per job beyond the tuned families
_CREDENTIAL = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|(?:^|_)KEY$|API_?KEY", re.IGNORECASE)
# Where the toolkit's XLA dump lands (xla-tuning-facts.md): `${OUTPUT_PATH}/xla_dump`, the
# job's output directory `<jobid>-<job name>/` beside its log; the file to read:
DUMP_DIR = "xla_dump"
# `module_0421.jit_train_step.gfx950_gpu_after_optimizations.txt` on GPU,
# `module_0098.jit_train_step.cl_933746096.after_optimizations.txt` from libtpu (seen on the
# v5e chip, JAX 0.10.2), `..._train_step.cpu_after_optimizations.txt` on CPU; not the
# `...after_optimizations-memory-usage-report.txt` and other reports beside it.
DUMP_GLOB = "module_*.jit_train_step.*after_optimizations.txt"
MEMORY_REPORT = "-memory-usage-report.txt"   # beside the dump: `<dump stem>` + this
PROFILE_GLOB = "tensorboard/plugins/profile/*/*.xplane.pb"   # under base_output/run_name
_MAX_DUMP_BYTES = 512 * 1024 * 1024  # a larger dump is read up to here
_TOTAL = re.compile(r"^Total bytes:\s*(\d+)", re.MULTILINE)


def fold(facts: Mapping[str, Any], lines: Sequence[str]) -> Facts | None:
    """`facts` with these log lines folded in; None when they add nothing."""
    out = dict(facts)
    env: dict[str, str] | None = None
    unknown: list[str] = list(facts.get("unknown") or ())
    seen = len(unknown)
    touched = False
    for raw in lines:
        if "nknown flag" in raw:
            unknown += [n for n in logread.unknown_flags(raw) if n not in unknown]
        if "Cluster time:" in raw and (m := CLUSTER_TIME.match(raw)) is not None:
            out["span"] = [float(m[1]), float(m[2])]
            touched = True
        if "=" not in raw or (kv := logread.assignment(raw)) is None:
            continue
        touched = True
        key, value = kv
        if key == logread.XLA_FLAGS:
            out["xla"] = value
            continue
        if env is None:
            env = dict(out.get("env") or {})
        if logread.wanted(key) or (_CREDENTIAL.search(key) is None
                                   and (key in env or len(env) < MAX_KEYS)):
            env[key] = value
    if env is not None:
        out["env"] = env
    if len(unknown) > seen:
        out["unknown"] = unknown
        touched = True
    return out if touched and out != facts else None


def last_loss(steps: Sequence[StepRow]) -> float | None:
    """The loss of the last step that printed one."""
    return next((s.loss for s in sorted(steps, key=lambda s: -s.step) if s.loss is not None),
                None)


def step_seconds(steps: Sequence[StepRow], profiler: bool) -> float | None:
    """Mean step time over the same steady window as the TGS."""
    window = steady_window(profiler)
    timed = {s.step: s for s in steps if s.step in window and s.seconds is not None}
    if profiler:   # the profiler's start and stop steps, left out of the TGS, too
        kept = unperturbed({n: s.tgs for n, s in timed.items()}, {s.step: s.tgs for s in steps})
        timed = {n: s for n, s in timed.items() if n in kept}
    secs = [s.seconds for s in timed.values() if s.seconds is not None]
    return fmean(secs) if secs else None


def ended(e: EndedJob) -> Facts | None:
    """The facts completed at the job's end (once: a job concluded again adds nothing)."""
    facts = e.job.facts
    if facts.get("ended"):
        return None
    step_s = step_seconds(e.steps, bool(e.job.profiler))
    path = dump_file(e.job, effective_of(facts), e.params.env)
    out: Facts = {**facts, "ended": True, "loss": last_loss(e.steps), "step_s": step_s,
                  "run_noise": run_noise(e.steps, bool(e.job.profiler)),
                  "dump": None if path is None else str(path)}
    if e.params.profile == EVIDENCE:
        trace = profile_trace(e.params.overrides)
        if trace is not None:
            out["xplane"] = str(trace)
    if path is not None and e.params.profile == EVIDENCE:
        found = read_evidence(path, step_s, e.job)
        out["evidence"] = None if found is None else {
            "shares": [[str(c), s] for c, s in found.shares], "source": found.source,
            "collectives": found.collectives, "memory_bytes": memory_bytes(path)}
    return out


def effective_of(facts: Mapping[str, Any], keys: Sequence[str] = ()) -> logread.Effective:
    """The job's effective flags and env as its stored facts hold them."""
    return logread.resolved(facts.get("xla"), facts.get("env") or {}, keys)


def evidence_of(facts: Mapping[str, Any]) -> Evidence | None:
    """The evidence run's HLO shares as stored at its end."""
    found = facts.get("evidence")
    if not found:
        return None
    count = found.get("collectives")
    return Evidence(tuple((Cost(c), float(s)) for c, s in found["shares"]),
                    source=str(found.get("source", "")),
                    collectives=int(count) if isinstance(count, int) else None)


# ---- the HLO dump ---------------------------------------------------------------------------

def dump_dirs(job: Job, eff: logread.Effective, env: Mapping[str, str] | None = None
              ) -> list[Path]:
    """Where the job's XLA dump may be: the `--xla_dump_to` its log printed (the effective
    flags), the one its run sent in XLA_FLAGS (`env`: a TPU evidence run's; a trainer that
    prints no environment, as MaxText, shows none), else the toolkit's
    `${OUTPUT_PATH}/xla_dump` (the job's directory beside its log)."""
    out: list[Path] = []
    base = Path(job.log_path).parent if job.log_path else None
    sent = logread.parse_flags((env or {}).get(logread.XLA_FLAGS, ""))
    for to in (eff.xla.get("xla_dump_to", ""), sent.get("xla_dump_to", "")):
        to = to.strip("'\"")
        if to:
            given = Path(to)
            out.append(given if given.is_absolute() or base is None else base / given)
    if base is not None and job.backend_id:
        out.append(base / f"{job.backend_id}-{job.job_name}" / DUMP_DIR)
    return out


def dump_file(job: Job, eff: logread.Effective, env: Mapping[str, str] | None = None
              ) -> Path | None:
    """The after-optimizations text of `jit_train_step` (the last one, by name)."""
    for d in dump_dirs(job, eff, env):
        try:
            found = sorted(d.glob(DUMP_GLOB))
        except OSError:
            continue
        if found:
            return found[-1]
    return None


def read_evidence(path: Path, step_s: float | None, job: Job) -> Evidence | None:
    """`logread.hlo_evidence` of a dump (None: unreadable, or no collective in it)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            text = f.read(_MAX_DUMP_BYTES)
    except OSError:
        return None
    if not logread.is_hlo_module(text):
        return None
    ev = logread.hlo_evidence(text, step_s, f"HLO dump of job {job.backend_id or job.id}")
    return ev if ev.shares else None


def memory_bytes(dump: Path) -> int | None:
    """The compiled program's total bytes, from the memory-usage report XLA writes beside
    its after-optimizations dump (`Total bytes: N`); None: no report."""
    report = dump.with_name(dump.name.removesuffix(".txt") + MEMORY_REPORT)
    try:
        with report.open("r", encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return None
    m = _TOTAL.search(head)
    return int(m.group(1)) if m else None


def profile_trace(overrides: Mapping[str, Any]) -> Path | None:
    """The newest `*.xplane.pb` MaxText's profiler left under the run's
    `base_output_directory/run_name` (None: no such directory, or no trace in it)."""
    base, name = overrides.get("base_output_directory"), overrides.get("run_name")
    if not base or not name or str(base).startswith("gs://"):
        return None
    try:
        found = list((Path(str(base)) / str(name)).glob(PROFILE_GLOB))
        return max(found, key=lambda p: p.stat().st_mtime, default=None)
    except OSError:
        return None
