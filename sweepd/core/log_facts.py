"""What a job's new log lines say, as a LogChunk: its steps, signals, memory and node map,
the phase it reached, its last step and its span on the cluster's own clock where its log
prints one. Pure: the reading, offsets and lost logs are `core/follow.py`'s."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sweepd.monitor.classify import node_map_from_nodelist
from sweepd.monitor.facts import (
    ClusterTimeFact,
    CompiledMemoryFact,
    HeaderFact,
    LineFact,
    MemstatsFact,
    NodeExitFact,
    Phase,
    SignalFact,
    StepFact,
    SummaryFact,
)
from sweepd.monitor.parse import parse_line
from sweepd.store.rows import Job
from sweepd.store.states import JobState

NODE_EXIT = "node_exit"  # signals.klass for NODE_EXIT lines (not a failure by itself)


_PHASE_RANK = {str(p): i for i, p in enumerate(Phase)}
# Plain strings of the phases the pass moves most jobs to (the rows hold plain strings).
_PROLOG, _PREFLIGHT, _TRAINING = str(Phase.PROLOG), str(Phase.PREFLIGHT), str(Phase.TRAINING)
_TRAINING_RANK = _PHASE_RANK[_TRAINING]


def later(a: str, b: Phase) -> str:
    """The further of two phases: a job never goes back."""
    return a if _PHASE_RANK[a] >= _PHASE_RANK[b] else str(b)


@dataclass
class LogChunk:
    job_id: int
    fields: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    signals: list[dict[str, Any]] = field(default_factory=list)
    # The log's mtime when it was read: when its newest line was written (for /metrics).
    written_at: float | None = None


def _other_fact(job: Job, out: LogChunk, fact: LineFact, offset: int, line: str, phase: str,
                node_map: dict[int, str] | None) -> tuple[str, dict[int, str] | None]:
    """A fact other than a step into the chunk: (the phase, the node map) after it."""
    if isinstance(fact, HeaderFact) and fact.key == "JOB_NODELIST":
        node_map = node_map_from_nodelist(fact.value)
        out.fields["node_map_json"] = json.dumps(node_map)
    elif isinstance(fact, MemstatsFact) and fact.rank in (None, 0):
        out.fields.update(mem_used_gb=fact.used_gb, mem_limit_gb=fact.limit_gb)
        phase = later(phase, Phase.COMPILE)
    elif isinstance(fact, CompiledMemoryFact) and fact.rank in (None, 0):
        out.fields.update(mem_total_gb=fact.total_gb, mem_output_gb=fact.output_gb,
                          mem_temp_gb=fact.temp_gb, mem_argument_gb=fact.argument_gb,
                          mem_host_temp_gb=fact.host_temp_gb)
    elif isinstance(fact, SummaryFact):
        out.fields.update(summary_status=fact.status, summary_exit=fact.exit_code)
        phase = later(phase, Phase.SUMMARY)
    elif isinstance(fact, ClusterTimeFact):
        # Every kind's job: its span on the cluster's own clock (`store/spans.span_of`).
        out.fields.update(span_start=fact.start, span_end=fact.end)
    elif isinstance(fact, SignalFact):
        if node_map is None:
            node_map = {int(k): v for k, v in json.loads(job.node_map_json or "{}").items()}
        out.signals.append({"offset": offset, "rank": fact.rank, "klass": fact.klass,
                            "detail": fact.detail, "line": fact.text[:2000],
                            "node": node_map.get(fact.rank) if fact.rank is not None else None})
    elif isinstance(fact, NodeExitFact):
        out.signals.append({"offset": offset, "klass": NODE_EXIT, "node": fact.host,
                            "detail": str(fact.exit_code), "line": line[:2000]})
    return phase, node_map


def facts_of(job: Job, lines: list[tuple[int, str]]) -> LogChunk:
    """What the job's new lines say, as a chunk: its steps (rank 0's), signals, memory and
    node-map fields, the phase it reached and its last step (offsets are the follower's)."""
    out = LogChunk(job.id, {}, [], [])
    node_map: dict[int, str] | None = None  # decoded when a signal needs a node
    phase = job.phase if job.phase != _PROLOG else _PREFLIGHT
    last_step = job.last_step
    for offset, line in lines:
        # A step line of rank > 0 is identical to rank 0's: not parsed (a cheap look at its
        # head, inline: every line of every log passes here).
        head = line[:24]
        if "completed step:" in head and not head.startswith(("0: ", "completed")):
            continue
        fact = parse_line(line)
        if fact is None:
            continue   # most lines
        if isinstance(fact, StepFact):   # the next most: first
            if fact.rank in (None, 0):
                out.steps.append({"step": fact.step, "seconds": fact.seconds,
                                  "tflops": fact.tflops, "mfu": fact.mfu, "tgs": fact.tgs,
                                  "loss": fact.loss})
                last_step = fact.step if last_step is None else max(fact.step, last_step)
                if _PHASE_RANK[phase] < _TRAINING_RANK:
                    phase = _TRAINING
        else:
            phase, node_map = _other_fact(job, out, fact, offset, line, phase, node_map)
    # A hung job's phase is frozen where it hung: the cancel's own output (summary
    # block) must not move it, the hang rules depend on it.
    if job.state != JobState.HUNG:
        out.fields["phase"] = phase
    out.fields["last_step"] = last_step
    return out
