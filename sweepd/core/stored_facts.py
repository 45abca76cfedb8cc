"""A finished job's facts as classification takes them (`monitor/classify.JobFacts`), read
back from the store, never from memory: what the log passes stored, and whether the log was
lost."""

from __future__ import annotations

import json
from pathlib import Path

from sweepd.core.log_facts import NODE_EXIT
from sweepd.monitor.classify import JobFacts
from sweepd.monitor.facts import FailureClass, NodeExitFact, Phase, SignalFact, SummaryFact
from sweepd.monitor.tail import is_lost
from sweepd.store.rows import Job
from sweepd.store.store import Store


def log_lost(job: Job) -> bool:
    """No log could be read for the job's end: marked lost when last read, or never seen
    and not there now."""
    if is_lost(job.log_identity):
        return True
    if not job.log_path:
        return False
    return job.log_identity is None and not Path(job.log_path).is_file()


async def job_facts(store: Store, job: Job, *, expected_steps: int, hung: bool,
                    cancelled_by_us: bool, scheduler_exit: int | None = None) -> JobFacts:
    """Everything classification needs, read back from the store (never from memory)."""
    signals = []
    exits = []
    for s in await store.jobs.signals(job.id):
        if s.klass == NODE_EXIT:
            exits.append(NodeExitFact(host=s.node or "?", exit_code=int(s.detail or 0)))
        else:
            signals.append((s.offset, SignalFact(rank=s.rank, klass=FailureClass(s.klass),
                                                 text=s.line, detail=s.detail)))
    summary = None
    if job.summary_status is not None:
        summary = SummaryFact(status=job.summary_status, exit_code=job.summary_exit, detail="")
    node_map = {int(k): v for k, v in json.loads(job.node_map_json or "{}").items()}
    return JobFacts(
        signals=signals, node_map=node_map, phase=Phase(job.phase), last_step=job.last_step,
        expected_steps=expected_steps, summary=summary, node_exits=exits,
        scheduler_state=job.scheduler_state,
        exit_code=job.summary_exit if job.summary_exit is not None else scheduler_exit, hung=hung,
        cancelled_by_us=cancelled_by_us, log_lost=log_lost(job),
        compiled_gb=(job.mem_total_gb, job.mem_limit_gb)
        if job.mem_total_gb is not None and job.mem_limit_gb is not None else None,
    )
