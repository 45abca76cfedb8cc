"""`sweepd show`'s `waiting:` lines: for each queued job, its latest progress line that says
what it waits for (on the local backend, the accelerator another sweepd process holds)."""

from __future__ import annotations

from sweepd.cli.show import _waiting

WAITS = "job 7 waits for the accelerator: pid 4242 holds it (sweep 3, job 12)"


def test_each_queued_job_shows_its_latest_wait_and_nothing_else_does() -> None:
    s = {"jobs": [{"id": 7, "state": "queued"}, {"id": 8, "state": "running"},
                  {"id": 9, "state": "queued"}],
         "events": [
             {"job_id": 7, "kind": "progress", "reason": "job 7 waits for the accelerator"},
             {"job_id": 7, "kind": "progress", "reason": WAITS},          # the latest wins
             {"job_id": 7, "kind": "transition", "reason": "x waits for y"},  # not progress
             {"job_id": 8, "kind": "progress", "reason": "job 8 waits for it"},  # runs now
             {"job_id": 9, "kind": "progress", "reason": "job 9 submitted"},   # no wait said
             {"kind": "progress", "reason": "sweep-level waits for nothing"},  # no job
         ]}
    assert _waiting(s) == [WAITS]


def test_a_sweep_without_queued_jobs_or_events_shows_none() -> None:
    assert _waiting({"jobs": [{"id": 1, "state": "done"}]}) == []
    assert _waiting({"jobs": [], "events": []}) == []
