"""A job's recorded log facts in, one Verdict out. Pure: no I/O, no clock.

The rules (maxtext-slurm-facts.md §3, batch-sweep.SKILL.md "Monitoring policy"):
1. Success: a SUCCESS summary, or a stop by signal (exit 130/143, scancel, our cancel)
   after `completed step: expected_steps-1` (the benign cleanup exit).
2. Otherwise every piece of evidence becomes a candidate with a tier from `SIGNAL_TIER`
   (`classify_tables`: the tiers, hang phases, exit codes and scheduler causes); the
   cause is the strongest tier's EARLIEST candidate (cascades: an OOM on one node is
   followed by collective timeouts and heartbeat kills on the others; the first error in
   time is the root cause, the timeouts are consequences).
3. A node-looking failure seen on every node of a multi-node job is a config error.
4. With no candidate: cancelled (by us, scancel, exit 130/143, preempted), what the
   scheduler's state says (NODE_FAIL, OUT_OF_MEMORY), a kill by a signal (the summary's
   `Status: FAILED (exit 137)` or `(killed by signal 9)`, the scheduler's exit code 137,
   Slurm's `0:9`: SIGKILL is the host's OOM killer or a person), a lost log, or UNKNOWN.
5. A broken environment (an import, a missing script or file, a syntax error, a command
   not found) is ENVIRONMENT: the same at every value. Python's own lines say so at root
   tier; the exception lines only as a traceback's end (or alone, for the script Python
   runs), at the traceback's tier, so a cause a signature names still wins.
A cancelled job's exit codes (143, or 137 when the kill follows) are the cancel's doing:
they are no evidence of a crash or a host OOM.
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import hostlist

from sweepd.monitor.classify_tables import (
    ALL_NODES_MEANS_CONFIG,
    BENIGN_EXITS,
    CANCEL_EXITS,
    HANG_BY_PHASE,
    NOT_A_NODE,
    OOM_KILL_EXIT,
    SCHEDULER_CAUSE,
    SIGNAL_TIER,
    Tier,
)
from sweepd.monitor.facts import (
    FailureClass,
    NodeExitFact,
    Phase,
    SignalFact,
    SummaryFact,
    Verdict,
)
from sweepd.monitor.signatures import (
    ENV_EXCEPTION_DETAIL,
    EXCEPTION_DETAIL,
    HEARTBEAT_DETAIL,
    KILLED_DETAIL,
)

_F = FailureClass


@dataclass(frozen=True)
class JobFacts:
    signals: Sequence[tuple[int, SignalFact]] = ()   # (byte offset, fact): offset order = time
    node_map: Mapping[int, str] = field(default_factory=dict)  # rank -> node
    phase: Phase = Phase.PROLOG
    last_step: int | None = None
    expected_steps: int = 15
    summary: SummaryFact | None = None
    node_exits: Sequence[NodeExitFact] = ()
    scheduler_state: str | None = None   # COMPLETED, FAILED, CANCELLED, GONE, RUNNING, ...
    exit_code: int | None = None
    hung: bool = False                   # the caller decided it hung
    cancelled_by_us: bool = False
    log_lost: bool = False               # the log could not be read to the job's end
    # (total, pool) GB: the compiled-memory line's total and Memstats' pool, when the log
    # printed both. None: no compiled-memory line (XLA had not finished compiling).
    compiled_gb: tuple[float, float] | None = None


@dataclass(frozen=True, order=True)
class _Candidate:
    tier: Tier
    offset: float          # inf: evidence without a position (NODE_EXIT, hang)
    seq: int
    klass: FailureClass = field(compare=False)
    rank: int | None = field(compare=False)
    node: str | None = field(compare=False)
    evidence: str | None = field(compare=False)
    detail: str | None = field(compare=False)


def node_map_from_nodelist(expr: str) -> dict[int, str]:
    """Rank -> node for a JOB_NODELIST: one task per node, ranks in nodelist order."""
    try:
        hosts: list[str] = hostlist.expand_hostlist(expr.strip().strip("\"'"))
    except (hostlist.BadHostlist, ValueError, TypeError):
        return {}
    return dict(enumerate(hosts))


def classify(facts: JobFacts) -> Verdict:
    if _succeeded(facts):
        return Verdict(klass=None, evidence=_summary_line(facts.summary))
    candidates = _signal_candidates(facts) + _exit_candidates(facts) + _hang_candidates(facts)
    if candidates:
        return _verdict(min(candidates), facts)
    if _cancelled(facts):
        return Verdict(klass=_F.CANCELLED, evidence=_summary_line(facts.summary) or _sched(facts),
                       detail="cancelled with no failure before it")
    return _by_scheduler(facts) or _by_signal(facts) or _unknown(facts)


def _by_scheduler(f: JobFacts) -> Verdict | None:
    cause = SCHEDULER_CAUSE.get(f.scheduler_state or "")
    if cause is not None:
        return Verdict(klass=cause[0], evidence=_sched(f), detail=cause[1])
    if f.log_lost and f.scheduler_state == "COMPLETED" and f.exit_code in (0, None):
        return Verdict(klass=_F.LOG_LOST, evidence=_sched(f),
                       detail="the job completed, but its log could not be read to measure it")
    return None


def _finished_steps(f: JobFacts) -> bool:
    return f.last_step is not None and f.expected_steps > 0 and f.last_step >= f.expected_steps - 1


def _succeeded(f: JobFacts) -> bool:
    if f.summary is not None and f.summary.status == "SUCCESS":
        return True
    if not _finished_steps(f):
        return False
    completed = f.scheduler_state == "COMPLETED" and f.exit_code in (0, None)
    node_stops = bool(f.node_exits) and all(e.exit_code in BENIGN_EXITS for e in f.node_exits)
    return completed or node_stops or _cancelled(f)


def _cancelled(f: JobFacts) -> bool:
    s = f.summary
    by_summary = s is not None and (s.status == "CANCELLED" or s.exit_code in CANCEL_EXITS
                                    or _summary_signal(s) in _CANCEL_SIGNALS)
    return (f.cancelled_by_us or by_summary or f.scheduler_state == "CANCELLED"
            or f.exit_code in CANCEL_EXITS)


def _killed_by_cancel(f: JobFacts) -> bool:
    """The job was cancelled: its SIGKILLs (exit 137, a bare `Killed`) are the cancel's."""
    return f.cancelled_by_us or f.scheduler_state == "CANCELLED"


def _signal_candidates(f: JobFacts) -> list[_Candidate]:
    out = []
    for seq, (offset, sig) in enumerate(f.signals):
        if sig.detail == EXCEPTION_DETAIL:
            continue   # evidence for a traceback, not a failure of its own
        if sig.detail == KILLED_DETAIL and _killed_by_cancel(f):
            continue
        klass, tier, detail = sig.klass, SIGNAL_TIER.get(sig.klass, Tier.ROOT), sig.detail
        if sig.detail == ENV_EXCEPTION_DETAIL:
            # An exception line: a traceback's weight, never above a named cause.
            tier, detail = Tier.PYTHON, _environment_detail(sig.text)
        if sig.klass is _F.COORD_TIMEOUT and sig.detail == HEARTBEAT_DETAIL:
            # The heartbeat kill ends a hang: classify it as the hang of its phase.
            klass, hang_detail = hang_class(f)
            tier, detail = Tier.HEARTBEAT, f"{hang_detail}; killed by the heartbeat timeout"
        out.append(_Candidate(tier, offset, seq, klass, sig.rank, None, sig.text, detail))
    return out


def _exit_codes(f: JobFacts) -> dict[str, int]:
    """Host -> its exit code; a failing code wins over a benign one printed for the host."""
    codes: dict[str, int] = {}
    for e in f.node_exits:
        if codes.get(e.host, 0) in BENIGN_EXITS:
            codes[e.host] = e.exit_code
    return codes


def _exit_candidates(f: JobFacts) -> list[_Candidate]:
    if _killed_by_cancel(f):
        return []   # the cancel's own SIGTERM/SIGKILL: no crash, no host OOM
    codes = _exit_codes(f)
    failing = {h: c for h, c in codes.items() if c not in BENIGN_EXITS}
    out = [
        _Candidate(Tier.ROOT, math.inf, i, _F.HOST_OOM, None, h, _node_exit_line(h, c),
                   killed_by(OOM_KILL_EXIT - 128))
        for i, (h, c) in enumerate(failing.items()) if c == OOM_KILL_EXIT
    ]
    crashed = {h: c for h, c in failing.items() if c != OOM_KILL_EXIT}
    nodes = set(f.node_map.values()) | set(codes)
    if not crashed or len(nodes) < 2:
        return out
    if set(crashed) == nodes and len(set(crashed.values())) == 1:
        host, code = next(iter(crashed.items()))
        out.append(_Candidate(Tier.ALL_EXITED, math.inf, len(out), _F.CONFIG, None, None,
                              _node_exit_line(host, code),
                              f"all {len(nodes)} nodes exited with code {code}"))
    elif set(crashed) < nodes:
        out.extend(
            _Candidate(Tier.CRASH, math.inf, len(out) + i, _F.NODE_CRASH, None, h,
                       _node_exit_line(h, c), f"exit {c} while other nodes went on")
            for i, (h, c) in enumerate(crashed.items())
        )
    return out


# The SKILL.md's phase table calls any hang after Memstats and before step 0 a silent
# compile OOM. It predates the compiled-memory line, which MaxText prints once XLA has
# compiled the program and which says whether it fits the pool. After a line that fits,
# the program did not run out of memory compiling: the first step is just slower than the
# hang limit. That is a departure from the seed, and the detail says so (`explain`).
TOO_SLOW = ("hang after the compiled-memory line said the program fits ({total:.1f} of "
            "{pool:.1f} GB), before step 0: not a silent compile OOM (the SKILL.md's phase "
            "table predates that line); step 0 is slower than the hang limit at this value")


def hang_class(f: JobFacts) -> tuple[FailureClass, str]:
    """What a hang in the job's phase is (batch-sweep.SKILL.md "Hang detection", but a
    hang after a compiled-memory line that fits is no OOM: TOO_SLOW)."""
    if f.phase is Phase.COMPILE and f.compiled_gb is not None \
            and f.compiled_gb[0] <= f.compiled_gb[1]:
        total, pool = f.compiled_gb
        return _F.HANG, TOO_SLOW.format(total=total, pool=pool)
    return HANG_BY_PHASE[f.phase]


def _hang_candidates(f: JobFacts) -> list[_Candidate]:
    if not f.hung:
        return []
    klass, detail = hang_class(f)
    evidence = f"no new log output while the job was RUNNING (phase: {f.phase.value})"
    return [_Candidate(Tier.HANG, math.inf, 0, klass, None, None, evidence, detail)]


def _verdict(best: _Candidate, f: JobFacts) -> Verdict:
    klass, detail, evidence = best.klass, best.detail, best.evidence
    if best.klass is _F.PYTHON:
        # "Traceback (most recent call last):" says nothing; the line it ends with does,
        # and where that is an import, a missing file or a syntax error, the environment.
        end = next((sig for offset, sig in f.signals
                    if sig.detail in (EXCEPTION_DETAIL, ENV_EXCEPTION_DETAIL)
                    and sig.rank == best.rank and offset > best.offset), None)
        if end is not None:
            evidence = end.text
            if end.detail == ENV_EXCEPTION_DETAIL:
                klass, detail = _F.ENVIRONMENT, _environment_detail(end.text)
    if klass in ALL_NODES_MEANS_CONFIG and _on_every_node(klass, f):
        detail = f"same {klass.value} failure on all {len(f.node_map)} nodes"
        klass = _F.CONFIG
    node = None if klass in NOT_A_NODE else best.node or _node_of(best.rank, f)
    return Verdict(klass=klass, node=node, evidence=evidence, detail=detail)


_EXCEPTION_NAME = re.compile(r"(?:^|: )(\w+Error):")


def _environment_detail(line: str) -> str:
    m = _EXCEPTION_NAME.search(line)
    what = m.group(1) if m else "an error"
    return f"{what}: the trainer's environment or its code"


# A summary's `Status: FAILED (killed by signal 9)` (the local backend's wrapper).
_KILLED_BY = re.compile(r"\bkilled by signal (\d{1,3})\b")
# What each signal says about who sent it, where it says anything.
_SENDER = {signal.SIGKILL: "the host's out-of-memory killer or a person",
           signal.SIGSEGV: "a crash in native code", signal.SIGABRT: "the program aborted"}


def killed_by(number: int) -> str:
    """`killed by signal 9 (SIGKILL): the host's out-of-memory killer or a person`."""
    try:
        sig: signal.Signals | None = signal.Signals(number)
    except ValueError:
        sig = None
    name = f" ({sig.name})" if sig is not None else ""
    sender = _SENDER.get(sig) if sig is not None else None
    return f"killed by signal {number}{name}" + (f": {sender}" if sender else "")


# SIGINT, SIGTERM: a stop (CANCEL_EXITS are 128 + these).
_CANCEL_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def _summary_signal(s: SummaryFact) -> int | None:
    m = _KILLED_BY.search(s.detail)
    return int(m.group(1)) if m else None


def _signal_number(f: JobFacts) -> tuple[int, str] | None:
    """The signal that ended the job, as its summary or the scheduler says (the shell's
    128 + N; Slurm's `0:9` reaches here as 137), with the line that says so."""
    s = f.summary
    if s is not None and (number := _summary_signal(s)) is not None:
        return number, _summary_line(s) or ""
    for code, line in ((s.exit_code if s else None, _summary_line(s)),
                       (f.exit_code, _sched(f))):
        if code is not None and 128 < code <= 128 + 64:
            return code - 128, line or _sched(f)
    return None


def _by_signal(f: JobFacts) -> Verdict | None:
    """A job a signal ended, nothing in its log saying why: SIGKILL is the host's OOM
    killer or a person (`kill -9`), named as such; any other signal is named in an
    unrecognised failure's detail (`_unknown`)."""
    found = _signal_number(f)
    if found is None or found[0] != signal.SIGKILL:
        return None
    return Verdict(klass=_F.HOST_OOM, node=_node_of(None, f), evidence=found[1],
                   detail=killed_by(found[0]))


def _on_every_node(klass: FailureClass, f: JobFacts) -> bool:
    ranks = {sig.rank for _, sig in f.signals
             if sig.klass is klass and sig.detail != EXCEPTION_DETAIL}
    return len(f.node_map) >= 2 and set(f.node_map) <= ranks


def _node_of(rank: int | None, f: JobFacts) -> str | None:
    if rank is not None:
        return f.node_map.get(rank)
    if len(f.node_map) == 1:
        return next(iter(f.node_map.values()))
    failing = [h for h, c in _exit_codes(f).items() if c not in BENIGN_EXITS]
    return failing[0] if len(failing) == 1 else None


def _unknown(f: JobFacts) -> Verdict:
    parts = ["no failure signature recognised"]
    if (found := _signal_number(f)) is not None:
        parts.insert(0, killed_by(found[0]))
    if f.log_lost:
        parts.append("the log could not be read")
    elif f.summary is None and f.scheduler_state not in (None, "RUNNING"):
        parts.append("no job summary: the job died without one (SIGKILL, host OOM, preemption?)")
    parts.append(_sched(f))
    return Verdict(klass=_F.UNKNOWN, evidence=_summary_line(f.summary), detail="; ".join(parts))


def _sched(f: JobFacts) -> str:
    return f"scheduler state {f.scheduler_state or '?'}, exit code {f.exit_code}"


def _node_exit_line(host: str, code: int) -> str:
    return f"NODE_EXIT host={host} exit={code}"


def _summary_line(s: SummaryFact | None) -> str | None:
    """The summary's Status line, rebuilt in the toolkit's shape."""
    if s is None:
        return None
    inner = f"exit {s.exit_code}" if s.exit_code is not None else s.detail
    tail = f" \u2014 {s.detail}" if s.exit_code is not None and s.detail else ""
    return f"Status: {s.status} ({inner}){tail}"
