"""The runs so far as the search's probes: which runs count, what each says about its value
(with what its latest job's log said about memory), and which failure contradicts a pass and
is run again."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.params import swept_value
from sweepd.kinds.model_perf.search import MEMORY_MARGIN, Outcome, Probe, Value, memory_fit
from sweepd.kinds.model_perf.search.memory import one_offs
from sweepd.kinds.model_perf.spec import BATCH, ModelPerfSpec
from sweepd.monitor.facts import FailureClass
from sweepd.monitor.signatures import oom_sizes
from sweepd.store.rows import Job, Run

_OUTCOME = {"pass": Outcome.OK, "oom": Outcome.OOM}
# Failures of a node, of the infrastructure or a person's cancel say nothing about the
# value: such a run must not become the search's upper bound (the value is tried again, on
# the nodes left). docs/architecture.md "Failure classes" has the whole table.
NOT_ABOUT_THE_VALUE = frozenset({
    FailureClass.GPU_HARDWARE, FailureClass.ECC, FailureClass.NODE_CRASH, FailureClass.NIC,
    FailureClass.NO_GPU, FailureClass.PULL, FailureClass.CHECKOUT_OUTAGE,
    FailureClass.CONTROLLER_DOWN, FailureClass.CANCELLED, FailureClass.LOG_LOST,
})


def finished_runs(ctx: SweepContext[PerfFacts]) -> list[Run]:
    return [r for r in ctx.runs if r.state in ("passed", "failed")]


def counted_runs(ctx: SweepContext[PerfFacts]) -> list[Run]:
    return [r for r in finished_runs(ctx) if _comparable(r, len(ctx.nodes))
            and (r.outcome == "pass" or r.failure_class not in NOT_ABOUT_THE_VALUE)]


def probes(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> list[Probe]:
    latest = latest_jobs(ctx.jobs)
    return [probe_of(spec, r, latest.get(r.id), len(ctx.nodes)) for r in probe_runs(spec, ctx)]


def probe_runs(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> list[Run]:
    """The runs `probes` reads, in its order: the k-th probe is the k-th of these."""
    runs = counted_runs(ctx)
    spoiled = _below_a_pass(spec, runs, latest_jobs(ctx.jobs))
    return [r for r in runs if r.id not in spoiled]


def _below_a_pass(spec: ModelPerfSpec, runs: Sequence[Run],
                  latest: dict[int, Job]) -> dict[int, str]:
    """Failed runs that name no allocation size (a silent OOM, a one-off compile hang
    counted as one) at a batch size below one that passed on these nodes, or one the
    passes' compiled-memory lines say fits with the margin to spare: memory grows with
    the batch, so such a failure contradicts what was measured and must not cap the
    search; the value is run again, once, on these nodes (run id -> why). A departure
    from SKILL.md's "a compile hang is a silent OOM, never retried", written before
    MaxText printed the compiled memory. Failing twice, or an OOM that names its
    allocation, it stands (`standing`) and is never run again."""
    if spec.parameter != BATCH:
        return {}
    batch = {r.id: int(swept_value(BATCH, r.params) or 0) for r in runs}
    passed = [batch[r.id] for r in runs if r.outcome == "pass"]
    top = max(passed, default=None)
    fits = _fits(spec, [r for r in runs if r.outcome == "pass"], latest)
    failed = [r for r in runs if r.outcome != "pass"]
    times = Counter(batch[r.id] for r in runs)
    ok = set(passed)
    # A silent failure that repeated where the memory line said "fits" shows the line
    # wrong up there: another silent failure is then no contradiction of it, and stands
    # at once (persistent compile hangs from 203 up were each re-run once: 5 of a sweep's
    # 12 runs). One below a pass is still re-run: a pass is a measurement, not a line.
    stood = any(times[batch[r.id]] >= 2 and batch[r.id] not in ok for r in failed)
    out: dict[int, str] = {}
    for r in failed:
        b = batch[r.id]
        if _alloc(r, latest.get(r.id)) is not None or (times[b] >= 2 and b not in ok):
            continue   # it names its allocation, or failed again: it stands
        what = f"{spec.parameter}={b} failed ({r.failure_class or r.outcome}) without an " \
               "allocation size"
        if top is not None and b < top:
            out[r.id] = (f"{what} below {top}, which passed on these nodes: memory grows "
                         "with the batch, so the failure contradicts the pass; re-run once "
                         "on the same nodes (an OOM that names its allocation is never "
                         "re-run)")
        elif (_silent_oom(r, latest.get(r.id)) and not stood
              and (room := fits(b)) is not None):
            out[r.id] = (f"{what} where {room}: the failure contradicts the memory the "
                         "runs measured; re-run once on the same nodes (SKILL.md takes a "
                         "compile hang for a silent OOM, never retried; it predates the "
                         "compiled-memory line)")
    return out


def _how_it_stands(run: Run, job: Job | None) -> str:
    """Why a failure below a pass was not run again, in its own class's words."""
    if run.outcome == "hang":
        return ("it hung past the hang limit twice, after its compiled-memory line said it "
                "fits: too slow there, or a node at fault")
    if _silent_oom(run, job):
        return "a silent OOM that failed twice"
    return "an OOM that names its allocation is never re-run"


def _silent_oom(run: Run, job: Job | None) -> bool:
    """Counted as an OOM before its own log said anything of memory (a compile hang before
    the compiled-memory line): a hang after that line is the hang rule's (too slow)."""
    return run.outcome == "oom" and (job is None or job.mem_total_gb is None)


def _fits(spec: ModelPerfSpec, passes: Sequence[Run], latest: dict[int, Job]
          ) -> Callable[[int], str | None]:
    """What the passes' compiled-memory lines say of a batch: a sentence when it fits with
    MEMORY_MARGIN to spare (one run's line goes through the origin, which over-states
    memory), else None."""
    fit = memory_fit([probe_of(spec, r, latest.get(r.id), r.node_count) for r in passes])

    def room(b: int) -> str | None:
        if fit is None:
            return None
        need = fit.base + fit.slope * b
        if need > fit.limit * (1 - MEMORY_MARGIN):
            return None
        return (f"the passes' compiled memory predicts it needs ~{need:.0f} of the "
                f"{fit.limit:.0f} GB pool ({fit.why})")
    return room


def standing(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> str | None:
    """The verdict's caveat for failures that contradict a pass and stand (an OOM that
    named its allocation, or a silent one that failed again): the value stays unmeasured,
    and may be faster than the best."""
    if spec.parameter != BATCH:
        return None
    runs = counted_runs(ctx)
    latest = latest_jobs(ctx.jobs)
    passed = [int(swept_value(BATCH, r.params) or 0) for r in runs if r.outcome == "pass"]
    top = max(passed, default=0)
    spoiled = _below_a_pass(spec, runs, latest)
    fits = _fits(spec, [r for r in runs if r.outcome == "pass"], latest)
    ok = set(passed)
    kept = [r for r in runs if r.id not in spoiled]
    off = [kept[k] for k in sorted(one_offs(
        [probe_of(spec, r, latest.get(r.id), len(ctx.nodes)) for r in kept]))]
    off_ids = {r.id for r in off}
    stood = [(b, r) for r in kept if r.outcome != "pass" and r.id not in off_ids
             and (b := int(swept_value(BATCH, r.params) or 0)) not in ok]
    below = sorted({b for b, _ in stood if b < top})
    above = sorted({b for b, r in stood if b > top and _silent_oom(r, latest.get(r.id))
                    and fits(b) is not None})
    own = sorted({b for b, r in stood if b > top and r.outcome == "oom"
                  and _own_line_fits(latest.get(r.id)) and fits(b) is not None})
    notes = []
    if below:
        how = sorted({_how_it_stands(r, latest.get(r.id)) for b, r in stood if b < top})
        notes.append(f"{', '.join(map(str, below))} failed below {top}, which passed: the "
                     f"failure stands ({'; '.join(how)}), so it was not measured and may be "
                     "faster")
    if above:
        twice = Counter(int(swept_value(BATCH, r.params) or 0) for r in runs)
        once = [b for b in above if twice[b] < 2]
        notes.append(f"{', '.join(map(str, above))} failed without an allocation size "
                     "where the passes' compiled memory says it fits (" + (
                         "each twice" if not once else
                         f"{', '.join(map(str, once))} once: another had failed twice, so "
                         "the line was wrong up there") + f"): taken as the limit, so "
                     f"nothing above {above[0]} was run; the memory line says larger values "
                     "fit and may be faster")
    if own:
        notes.append(f"{', '.join(map(str, own))} ran out of memory though its own "
                     "compiled-memory line and the passes' fit the pool with the margin to "
                     "spare: a one-off is possible, and an "
                     "OOM is never re-run (SKILL.md), so it was not measured and may be "
                     "faster")
    if off:
        notes.append(_one_offs_note([int(swept_value(BATCH, r.params) or 0) for r in off], ok))
    return "; ".join(notes) or None


def _one_offs_note(values: Sequence[int], ok: set[int]) -> str:
    """OOMs taken as one-offs (search.memory.one_offs): said, for they point at a flaky
    node, allocator or process, with the values the search did not run again."""
    again = [b for b in dict.fromkeys(values) if b not in ok]
    left = (f"; {', '.join(map(str, again))} not run again (the search did not need "
            f"{'it' if len(again) == 1 else 'them'})" if again else "")
    return (f"{len(values)} OOMs ({', '.join(map(str, values))}) came where their own "
            "compiled-memory lines and the passes' fit the pool with the margin to spare: "
            "taken as one-offs, not the limit (a flaky node, allocator or process; SKILL.md "
            "takes an OOM as deterministic), each value run again where the search needed "
            f"it{left}")


def _own_line_fits(job: Job | None) -> bool:
    """The job's own log printed a compiled memory within the pool: the program fit (an
    OOM's failed allocation came on top of it: fragmentation, a runtime buffer)."""
    return (job is not None and job.mem_total_gb is not None
            and job.mem_limit_gb is not None and job.mem_total_gb <= job.mem_limit_gb)


def rerun(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> tuple[Value, str] | None:
    """A silent failure below a pass on these nodes, not yet re-run: (value, why)."""
    runs = counted_runs(ctx)
    spoiled = _below_a_pass(spec, runs, latest_jobs(ctx.jobs))
    times = Counter(swept_value(spec.parameter, r.params, spec.values) for r in runs)
    for run in runs:
        value = swept_value(spec.parameter, run.params, spec.values)
        if run.id in spoiled and times[value] < 2:
            assert value is not None
            return value, spoiled[run.id]
    return None


def _alloc(run: Run, job: Job | None) -> float | None:
    return _gb(job.failure_detail) if run.outcome == "oom" and job is not None else None


def probe_of(spec: ModelPerfSpec, run: Run, job: Job | None, nodes: int) -> Probe:
    """The run's result with what its log said about memory. Memory per GPU changes with
    the node count: an OOM carried over from more nodes keeps its outcome only."""
    value = swept_value(spec.parameter, run.params, spec.values)
    assert value is not None   # every run of this kind was planned with its value
    outcome = _OUTCOME.get(run.outcome or "", Outcome.FAILED)
    if job is not None and _too_slow(run, job):
        outcome = Outcome.SLOW
    probe = Probe(value, outcome, run.tgs)
    if job is None or run.node_count != nodes:
        return probe
    fixed = (job.mem_total_gb - job.mem_temp_gb
             if job.mem_total_gb is not None and job.mem_temp_gb is not None else None)
    sizes = oom_sizes(job.failure_line or "") if run.outcome == "oom" else None
    return Probe(probe.value, probe.outcome, probe.tgs, temp_gb=job.mem_temp_gb,
                 fixed_gb=fixed, limit_gb=job.mem_limit_gb, alloc_gb=_alloc(run, job),
                 required_gb=sizes[0] if sizes else None,
                 available_gb=sizes[1] if sizes else None)


def _too_slow(run: Run, job: Job) -> bool:
    """Hung (twice: the hang rule retries once) before step 0, after the compiled-memory
    line said the program fits: the value is too slow, not out of memory."""
    return run.outcome == "hang" and job.phase == "compile" and _own_line_fits(job)


def latest_jobs(jobs: Sequence[Job]) -> dict[int, Job]:
    """Each run's latest attempt: the one its outcome came from."""
    latest: dict[int, Job] = {}
    for job in sorted(jobs, key=lambda j: (j.attempt, j.id)):
        latest[job.run_id] = job
    return latest


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|bytes|B)?\s*$")
_SCALE = {"KB": 1e-6, "KiB": 1e-6, "MB": 1e-3, "MiB": 1e-3, "GB": 1.0, "GiB": 1.0,
          "TB": 1e3, "TiB": 1e3, "B": 1e-9, "bytes": 1e-9}


def _gb(detail: str | None) -> float | None:
    """An OOM's failed allocation (`12.50GiB`) in GB; GiB and GB are not told apart, as
    Memstats and the compiled-memory line print GB for the same unit."""
    m = _SIZE.match(detail or "")
    return float(m.group(1)) * _SCALE[m.group(2) or "B"] if m else None


def _comparable(run: Run, nodes: int) -> bool:
    """TGS per device and memory per GPU both change with the node count, so after an
    exclusion the search starts over on the nodes left: results from another node set
    never bound this one (not even an OOM on more nodes: the nodes left may differ in
    memory the runtime takes, and a bound carried over is one nobody measured here)."""
    return run.node_count == nodes
