"""Whether a cancel outside sweepd covered the whole sweep: judged from the jobs' rows."""

from __future__ import annotations

from typing import Any

from sweepd.core.conclude import CANCELLED_TOGETHER_S, others_cancelled
from sweepd.core.states import JobState
from sweepd.store.rows import Job


def job(id: int, run_id: int, state: JobState, **extra: Any) -> Job:
    fields: dict[str, Any] = {
        "id": id, "run_id": run_id, "sweep_id": 1, "attempt": 1, "token": f"t{id}",
        "job_name": "", "nodes": "chi2832", "backend_id": str(100 + id), "log_path": None,
        "state": state, "scheduler_state": None, "submitted_at": 0.0, "ended_at": None,
        "log_offset": 0, "log_identity": None, "last_output_at": None, "phase": "training",
        "last_step": None, "profiler": 0, "mem_used_gb": None, "mem_limit_gb": None,
        "summary_status": None, "summary_exit": None, "node_map_json": None, "tgs": None,
        "mfu": None, "failure_class": None, "failure_node": None, "failure_line": None,
        "failure_detail": None, "submit_deadline": None}
    return Job(**{**fields, **extra})


CANCELLED = {"state": JobState.CANCELLED, "failure_class": "cancelled"}
NOW = 1000.0


def test_one_job_cancelled_while_others_run_is_not_the_whole_sweep() -> None:
    me = job(1, 1, JobState.RUNNING, scheduler_state="CANCELLED")
    others = [job(2, 2, JobState.RUNNING, scheduler_state="RUNNING"),
              job(3, 3, JobState.DONE)]
    assert not others_cancelled(me, [me, *others], NOW)


def test_every_running_job_cancelled_is_the_whole_sweep() -> None:
    me = job(3, 3, JobState.RUNNING, scheduler_state="CANCELLED")
    jobs = [job(1, 1, **CANCELLED),                                    # concluded earlier
            job(2, 2, JobState.RUNNING, scheduler_state="CANCELLED"),  # not yet concluded
            job(4, 4, JobState.DONE), me]                               # finished: not going
    assert others_cancelled(me, jobs, NOW)


def test_sweepds_own_rerun_of_a_job_cancelled_with_this_one_stands_for_it() -> None:
    # Cancelled together; this one's end reached sweepd later (COMPLETING for a while), the
    # other's re-run was submitted meanwhile and already runs.
    me = job(3, 2, JobState.RUNNING, scheduler_state="CANCELLED")
    rerun = job(2, 1, JobState.RUNNING, scheduler_state="RUNNING")
    assert others_cancelled(me, [job(1, 1, **CANCELLED, ended_at=NOW - 5), rerun, me], NOW)
    # A re-run after an earlier, separate cancel is judged by itself: it runs.
    early = NOW - CANCELLED_TOGETHER_S - 1
    assert not others_cancelled(me, [job(1, 1, **CANCELLED, ended_at=early), rerun, me], NOW)


def test_a_sweep_with_one_job_going_is_asked_only_on_a_second_cancel() -> None:
    me = job(1, 1, JobState.RUNNING, scheduler_state="CANCELLED")
    assert not others_cancelled(me, [me], NOW)   # the policy re-runs; cancelled.again asks


def test_a_cancel_concluded_before_cancels_were_shown_cancelled_still_counts() -> None:
    # Stores written before a cancel's job was shown cancelled hold it as retried.
    old = {"state": JobState.RETRIED, "failure_class": "cancelled"}
    me = job(3, 2, JobState.RUNNING, scheduler_state="CANCELLED")
    assert others_cancelled(me, [job(1, 1, **old, ended_at=NOW), me], NOW)
