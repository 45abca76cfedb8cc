"""A recorded curve replayed as the ground truth (`models.<m>.measured`, docs/scenario.md).

What real runs measured, per batch: the steady tokens/s/device, the compiled-memory line's
total, and where memory ran out. Only the batches in the table exist (and every batch from
the OOM up, which fails): a batch between two measured ones was never run, and making up
its speed would make up the very curve the search is judged on. A job at such a batch fails
at startup with one line naming the measured batches, so a spec replaying a table lists
them as `values:`.
"""

from __future__ import annotations

from sweepd.sim.scenario import MeasuredCurve

# The smallest shortfall an OOM names when nothing recorded says more.
MIN_SHORTFALL_GIB = 0.25


class Unmeasured(ValueError):
    """A batch the recorded table does not hold."""


def measured_batches(curve: MeasuredCurve) -> list[int]:
    return sorted(curve.points)


def fails(curve: MeasuredCurve, batch: int) -> bool:
    """Every batch from the smallest OOM value up ran out of memory."""
    return curve.oom is not None and batch >= curve.oom.from_batch


def check_batch(curve: MeasuredCurve, batch: int) -> None:
    if batch not in curve.points and not fails(curve, batch):
        raise Unmeasured(f"per_device_batch_size={batch} was not measured in this replay "
                         f"(measured: {', '.join(map(str, measured_batches(curve)))})")


def memory_total(curve: MeasuredCurve, batch: int) -> float | None:
    """The compiled-memory line's total at a batch: as recorded, else linear between the
    recorded totals either side (beyond them, through the two at that end; the line itself
    is close to linear in the batch: the chip read 6.1, 14.7, 16.2 and 18.0 GB at 8, 48, 56,
    64). None: no total recorded at all."""
    known = sorted((b, p.memory_gb) for b, p in curve.points.items() if p.memory_gb is not None)
    if not known:
        return None
    exact = dict(known)
    if batch in exact:
        return exact[batch]
    if len(known) == 1:
        b, gb = known[0]
        return gb * batch / b
    below = [bg for bg in known if bg[0] < batch]
    above = [bg for bg in known if bg[0] > batch]
    # Between the recorded neighbours either side; outside them, the two at that end.
    (b1, m1), (b2, m2) = (below[-1], above[0]) if below and above else \
        (known[-2], known[-1]) if below else (known[0], known[1])
    return m1 + (m2 - m1) * (batch - b1) / (b2 - b1)


def oom_sizes(curve: MeasuredCurve, batch: int) -> tuple[float, float]:
    """(required, available) GiB an OOM at `batch` names: as recorded at the OOM's batch
    (scaled by the batch above it), else the line's temp part against the device memory."""
    available = curve.hbm_gib
    oom = curve.oom
    if oom is not None and oom.available_gib is not None:
        available = oom.available_gib
    if oom is not None and oom.required_gib is not None:
        return oom.required_gib * batch / oom.from_batch, available
    total = memory_total(curve, batch)
    temp = (total - curve.argument_gb) if total is not None else available
    return max(temp, available + MIN_SHORTFALL_GIB), available


def peak_batch(curve: MeasuredCurve) -> int:
    """The measured batch with the highest TGS (the smallest on a tie)."""
    return max(measured_batches(curve), key=lambda b: (curve.points[b].tgs, -b))


def max_batch(curve: MeasuredCurve) -> int:
    """The largest measured batch that passed (batches between it and the OOM were never
    run, so they are not candidates)."""
    return max(measured_batches(curve))


def default_batch(curve: MeasuredCurve) -> int:
    """The batch a job runs when it passes none: the largest measured batch at most 80 %
    of the peak's (the formula's "safe 80 %"), else the smallest measured."""
    cap = 0.8 * peak_batch(curve)
    return max((b for b in measured_batches(curve) if b <= cap),
               default=measured_batches(curve)[0])
