"""Prometheus metrics: counts read from the store at scrape time, and a few timings.

Everything that is a fact in the store (sweeps, jobs, runs, failures, exclusions, stops,
the outbox) is read when scraped, by `StoreCollector`: no second copy to drift from the
store, and a restart loses nothing. Only durations, which the store does not keep, are
histograms filled as they happen (`TIMINGS`): the engine pass, scheduler calls and the
line-to-stored latency of log facts.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sweepd.clusters.base import (
    ClusterBackend,
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    Listing,
    Submitted,
)
from sweepd.store.outbox import Outbox
from sweepd.store.store import Store

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Durations are process-wide (one daemon per process); their registry is separate so each
# scrape's registry can hold them next to a collector of its own store.
TIMINGS = CollectorRegistry(auto_describe=True)
ENGINE_PASS = Histogram("sweepd_engine_pass_seconds", "Wall time of one engine pass",
                        registry=TIMINGS,
                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
SCHEDULER_CALL = Histogram("sweepd_scheduler_call_seconds",
                           "Wall time of one scheduler call, by operation and outcome",
                           ["op", "outcome"], registry=TIMINGS,
                           buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
LINE_TO_STORED = Histogram("sweepd_line_to_stored_seconds",
                           "From a log file's last write to its facts committed in the store",
                           registry=TIMINGS,
                           buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))


def observe_stored(chunks: Sequence[Any]) -> None:
    """After a store commit of log facts: how long after the newest line was written.
    The file's mtime when it was read (`written_at`) stands for the newest line's time."""
    now = time.time()
    # `max(0.0, d)` without a call per chunk (10,000 a pass): the same value, NaN included.
    observe_many(LINE_TO_STORED, [d if (d := now - chunk.written_at) > 0.0 else 0.0
                                  for chunk in chunks if chunk.written_at is not None
                                  and "last_output_at" in chunk.fields])


def observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """`histogram.observe(v)` for each value, as one update per bucket: a pass stores up
    to ten thousand chunks, and one `observe` each (a lock per bucket and per sum) was a
    tenth of the pass. What /metrics shows is the same: each bucket counts the values at
    or below its bound and above the one before, the sum adds them all."""
    if not values:
        return
    bounds: Sequence[float] = histogram._upper_bounds
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect_left(bounds, value)] += 1   # the first bound >= value, as `observe`
    histogram._sum.inc(sum(values))
    for bucket, count in zip(histogram._buckets, counts, strict=True):
        if count:
            bucket.inc(count)


@dataclass
class TimedBackend:
    """The cluster backend with each call timed, its errors counted, and whether the
    controller answered the last call (what `sweepd_controller_reachable` reports)."""

    inner: ClusterBackend
    reachable: bool = True
    last_error_at: float | None = None
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.inner.name

    async def _timed(self, op: str, call: Any) -> Any:
        start = time.monotonic()
        outcome = "ok"
        try:
            result = await call
        except ControllerUnreachable:
            outcome, self.reachable, self.last_error_at = "unreachable", False, time.time()
            raise
        except Exception:
            outcome = "error"
            raise
        finally:
            SCHEDULER_CALL.labels(op, outcome).observe(time.monotonic() - start)
        self.reachable = True
        return result

    async def submit(self, request: JobRequest) -> Submitted:
        out: Submitted = await self._timed("submit", self.inner.submit(request))
        return out

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        out: dict[str, JobStatus] = await self._timed("poll", self.inner.poll(backend_ids))
        return out

    async def find_by_token(self, token: str) -> Submitted | None:
        out: Submitted | None = await self._timed("find", self.inner.find_by_token(token))
        return out

    async def cancel(self, backend_id: str) -> None:
        await self._timed("cancel", self.inner.cancel(backend_id))

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = await self._timed("node_states", self.inner.node_states(nodes))
        return out

    async def resume_node(self, node: str) -> None:
        await self._timed("resume_node", self.inner.resume_node(node))

    @property
    def submit_timeout_s(self) -> float:
        return self.inner.submit_timeout_s

    async def live_tokens(self) -> dict[str, str]:
        out: dict[str, str] = await self._timed("live_tokens", self.inner.live_tokens())
        return out

    async def end_note(self, output_dir: Path) -> str | None:
        return await self.inner.end_note(output_dir)

    async def remove_leftovers(self, output_dir: Path) -> str | None:
        return await self.inner.remove_leftovers(output_dir)

    async def show_node(self, node: str) -> str:
        out: str = await self._timed("show_node", self.inner.show_node(node))
        return out

    def node_shell(self) -> list[str]:
        return self.inner.node_shell()

    async def idle_nodes(self, partition: str | None) -> Listing:
        out: Listing = await self._timed("idle_nodes", self.inner.idle_nodes(partition))
        return out

    async def others_jobs(self, partition: str | None) -> Listing:
        out: Listing = await self._timed("others_jobs", self.inner.others_jobs(partition))
        return out

    async def close(self) -> None:
        await self.inner.close()


# -- read from the store at scrape time --------------------------------------------------

_QUERIES: dict[str, str] = {
    "sweeps": "SELECT state, kind, count(*) FROM sweeps GROUP BY state, kind",
    "jobs": "SELECT j.state, s.kind, count(*) FROM jobs j JOIN sweeps s ON s.id = j.sweep_id"
            " GROUP BY j.state, s.kind",
    "runs": "SELECT r.state, s.kind, count(*) FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
            " WHERE r.state IN ('passed', 'failed', 'cancelled') GROUP BY r.state, s.kind",
    # A cancel outside sweepd (scancel, preemption) is a person's or the scheduler's act,
    # not a failure: alerts on failures must not fire on it. It is counted on its own.
    "failures": "SELECT failure_class, count(*) FROM jobs WHERE failure_class IS NOT NULL"
                " AND failure_class <> 'cancelled' GROUP BY failure_class",
    "cancels": "SELECT count(*) FROM jobs WHERE failure_class = 'cancelled'",
    "exclusions": "SELECT CASE WHEN job_id IS NULL THEN 'person' ELSE 'fault' END, count(*)"
                  " FROM exclusions WHERE active = 1 GROUP BY 1",
    # Since the sweep's own (not a run's or job's) last move to awaiting_decision.
    "awaiting": "SELECT s.id, s.kind, (julianday('now') - julianday(max(e.at))) * 86400"
                " FROM sweeps s JOIN events e ON e.sweep_id = s.id AND e.kind = 'transition'"
                " AND e.to_state = 'awaiting_decision' AND e.run_id IS NULL"
                " AND e.job_id IS NULL WHERE s.state = 'awaiting_decision' GROUP BY s.id",
    # Failed sends (every attempt but the one that worked; the log sink's work without a
    # message id or an error), chunks refused for good (closed with an error and no message
    # id), and routine lines held for a digest.
    "delivery": "SELECT coalesce(sum(attempts - (delivered_at IS NOT NULL AND"
                " (message_id IS NOT NULL OR last_error IS NULL))), 0),"
                " coalesce(sum(delivered_at IS NOT NULL AND message_id IS NULL"
                " AND last_error IS NOT NULL), 0),"
                " coalesce(sum(kind = 'held' AND digested_into IS NULL), 0)"
                " FROM deliveries WHERE kind <> 'held' OR digested_into IS NULL",
}

BACKLOG_LIMIT = 10_000


@dataclass
class Snapshot:
    """The store's counts at one moment, read in one transaction."""

    rows: dict[str, list[tuple[Any, ...]]]
    backlog: int
    reachable: bool | None


async def snapshot(store: Store, backend: object | None) -> Snapshot:
    async with store.tx():   # one consistent read
        rows = {name: [tuple(r) for r in await store.base.rows(sql)]
                for name, sql in _QUERIES.items()}
    backlog = len(await Outbox(store).pending(BACKLOG_LIMIT))
    reachable = backend.reachable if isinstance(backend, TimedBackend) else None
    return Snapshot(rows, backlog, reachable)


def _by_labels(name: str, doc: str, labels: list[str], rows: list[tuple[Any, ...]],
               counter: bool = False) -> Metric:
    family: Metric = (CounterMetricFamily(name, doc, labels=labels) if counter
                      else GaugeMetricFamily(name, doc, labels=labels))
    for *values, count in rows:
        family.add_metric([str(v) for v in values], float(count))  # type: ignore[attr-defined]
    return family


def families(snap: Snapshot) -> Iterator[Metric]:
    r = snap.rows
    yield _by_labels("sweepd_sweeps", "Sweeps by state and kind", ["state", "kind"], r["sweeps"])
    yield _by_labels("sweepd_jobs", "Jobs by state and sweep kind", ["state", "kind"], r["jobs"])
    yield _by_labels("sweepd_runs_finished", "Finished runs by end state and sweep kind",
                     ["state", "kind"], r["runs"], counter=True)
    yield _by_labels("sweepd_job_failures", "Failed jobs by failure class", ["class"],
                     r["failures"], counter=True)
    yield CounterMetricFamily("sweepd_job_cancels", "Jobs cancelled outside sweepd "
                              "(scancel, preemption): run again or asked about, no failure",
                              value=float(r["cancels"][0][0]))
    yield _by_labels("sweepd_exclusions", "Nodes excluded from sweeps now, by who excluded",
                     ["by"], r["exclusions"])
    yield _by_labels("sweepd_awaiting_decision_seconds",
                     "Seconds each sweep stopped for a person's decision has waited",
                     ["sweep", "kind"], r["awaiting"])
    yield GaugeMetricFamily("sweepd_awaiting_decision", "Sweeps stopped for a decision",
                            value=len(r["awaiting"]))
    failed, refused, held = r["delivery"][0]
    yield CounterMetricFamily("sweepd_delivery_failures", "Message sends that failed "
                              "(retried or given up)", value=float(failed))
    yield CounterMetricFamily("sweepd_delivery_refused", "Message chunks refused for good",
                              value=float(refused))
    yield GaugeMetricFamily("sweepd_delivery_backlog", "Messages waiting to be sent",
                            value=snap.backlog)
    yield GaugeMetricFamily("sweepd_delivery_held", "Routine lines held for a digest",
                            value=float(held))
    if snap.reachable is not None:
        yield GaugeMetricFamily("sweepd_controller_reachable",
                                "1 if the scheduler answered its last call",
                                value=float(snap.reachable))


class _Fixed(Collector):
    """Hands the snapshot read just before this scrape to the (synchronous) registry."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Metric]:
        yield from families(self.snap)
        yield from TIMINGS.collect()


async def exposition(store: Store, backend: object | None) -> bytes:
    """The Prometheus text format of this daemon's metrics, read now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(await snapshot(store, backend)))
    return generate_latest(registry)
