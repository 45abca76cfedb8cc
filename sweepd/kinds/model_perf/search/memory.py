"""Memory learnt from the runs' compiled-memory lines: the line of temp against the value,
the pool an OOM lowers, the largest value it predicts fits (or proves cannot), and the OOMs
that contradict it (one-offs, once two do).

Where the device's memory is known (`SearchSpace.device_gb`), the line is evidence, not a
cliff (`line_evidence`): it proves nothing cannot fit (only a failed run bounds the search),
and passes calibrate it as they come: a pass whose line read above the pool shows the line
over-states memory (a TPU's estimate read 18.0 GB at a batch that trained on 15.75 GiB), so
its predictions are scaled down by at least that much. Unknown: the line proves, as ever."""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.model_perf.search.space import (
    MEMORY_MARGIN,
    OOM_MARGIN_GB,
    Outcome,
    Probe,
    is_numeric,
)


@dataclass(frozen=True)
class MemoryFit:
    """Compiled memory as a line in the value: need(v) = base + slope * v, against `limit`."""

    slope: float  # GB per unit of the value
    base: float  # GB at value 0: the fixed part plus temp's constant
    limit: float  # GB usable: the pool, lowered below what any OOM run needed
    points: int  # distinct values with a temp size
    why: str
    # What OOMs that printed their own sizes say (`sized_oom`): `cap`, the largest value
    # that can fit (a proof, where memory grows linearly with the value); `aim`, the largest
    # likely to, MEMORY_MARGIN under the pool. None: no such OOM.
    cap: float | None = None
    aim: float | None = None

    def max_fit(self, scale: float = 1.0) -> float:
        """The value where the line, its need times `scale`, meets the pool (never above
        what an OOM's own sizes allow)."""
        line = (self.limit / scale - self.base) / self.slope
        return line if self.cap is None else min(line, self.cap)

    def likely_fit(self, scale: float = 1.0) -> float:
        """The largest value predicted to fit: where the line, its need times `scale`
        (`Calibration.scale`), meets the pool less MEMORY_MARGIN. The margin is aimed
        under: allocator fragmentation and buffers outside the compiled program OOM a value
        whose total is just under the pool."""
        line = (self.limit * (1 - MEMORY_MARGIN) / scale - self.base) / self.slope
        return line if self.aim is None else min(line, self.aim)


@dataclass(frozen=True)
class SizedOom:
    """An OOM that printed what it needed and what the device had (a TPU's compile-time
    `the total memory required … (19.02G) exceeds available HBM (15.75G)`)."""

    value: float
    required: float
    available: float

    @property
    def cap(self) -> float:
        """The largest value that can fit: memory grows linearly with the value from a
        fixed part >= 0, so below this value it needs at least value x required / this
        value, which must stay within what the device had."""
        return self.value * self.available / self.required

    def aim(self, slope: float | None, base: float | None) -> float:
        """The largest value likely to fit, MEMORY_MARGIN under the pool: with a line from
        the passes, that line scaled to what this OOM needed (it under- or over-states by
        required / its reading here); without one, the cap less the margin."""
        room = self.available * (1 - MEMORY_MARGIN)
        prop = self.value * room / self.required
        if slope is None or base is None or base + slope * self.value <= 0:
            return prop
        scale = self.required / (base + slope * self.value)
        return min(prop, (room / scale - base) / slope)


def memory_fit(probes: Sequence[Probe]) -> MemoryFit | None:
    """The line through the runs' compiled temp sizes, or None without a line and a pool."""
    temps: dict[float, list[float]] = {}
    for p in probes:
        if p.temp_gb is not None and is_numeric(p.value) and float(p.value) > 0:
            temps.setdefault(float(p.value), []).append(p.temp_gb)
    fixed = [p.fixed_gb for p in probes if p.fixed_gb is not None]
    sized = sized_ooms(probes)
    # What the device had: Memstats' pool, or what an OOM said was available.
    limits = [p.limit_gb for p in probes if p.limit_gb is not None] + \
        [o.available for o in sized]
    if not temps or not fixed or not limits:
        return _from_sizes(sized)
    xs = sorted(temps)
    ys = [statistics.fmean(temps[x]) for x in xs]
    slope, intercept = _line(xs, ys)
    if slope <= 0:
        return None
    base = statistics.median(fixed) + intercept
    limit, lowered = min(limits), ""
    off = one_offs(probes)
    for k, p in enumerate(probes):  # what an OOM run needed did not fit, whatever the pool says
        # Only an OOM: a run too slow at its batch (its program fitted) says nothing of
        # memory, and neither does a failure below a pass (it bounds nothing there), nor a
        # one-off (the memory measured says it fits, and so did another OOM's).
        if p.outcome is Outcome.OOM and p.temp_gb is not None and p.fixed_gb is not None \
                and not _below_pass(p, probes) and k not in off:
            needed = p.temp_gb + p.fixed_gb - OOM_MARGIN_GB
            if needed < limit:
                limit, lowered = needed, f" (lowered by the OOM at {p.value})"
    shape = (f"temp {ys[0]:.1f} GB at {_fmt(xs[0])}, through 0" if len(xs) == 1 else
             f"temp fitted over {len(xs)} runs ({', '.join(_fmt(x) for x in xs)})")
    why = (f"compiled memory: {shape} = {slope:.2f} GB per batch + {base:.1f} GB fixed, "
           f"pool {limit:.1f} GB{lowered}")
    if not sized:
        return MemoryFit(slope, base, limit, len(xs), why)
    low = min(sized, key=lambda o: o.cap)
    aim = min(o.aim(slope, base) for o in sized)
    return MemoryFit(slope, base, limit, len(xs), why + "; " + _sized_why(low, aim),
                     cap=low.cap, aim=aim)


def sized_ooms(probes: Sequence[Probe]) -> list[SizedOom]:
    """The OOMs that printed what they needed and what the device had, at a numeric value
    above every pass (a failure below a pass bounds nothing) and not one-offs."""
    off = one_offs(probes)
    return [SizedOom(float(p.value), p.required_gb, p.available_gb)
            for k, p in enumerate(probes)
            if p.outcome is Outcome.OOM and p.required_gb is not None
            and p.available_gb is not None and p.required_gb > 0 and p.available_gb > 0
            and is_numeric(p.value) and float(p.value) > 0 and k not in off
            and not _below_pass(p, probes)]


def _sized_why(low: SizedOom, aim: float) -> str:
    return (f"the OOM at {_fmt(low.value)} needed {low.required:.2f} GB of the "
            f"{low.available:.2f} GB the device had (its own sizes), so nothing above "
            f"~{low.cap:.1f} fits, and ~{aim:.1f} is likely to "
            f"({MEMORY_MARGIN:.0%} under)")


def _from_sizes(sized: Sequence[SizedOom]) -> MemoryFit | None:
    """No pass printed its compiled memory, but an OOM printed its own sizes: memory as a
    line through the origin at what it needed (a fixed part makes the true line steeper
    below it, so this over-states the fit: `cap` bounds it from above)."""
    if not sized:
        return None
    low = min(sized, key=lambda o: o.cap)
    aim = low.aim(None, None)
    why = _sized_why(low, aim)
    return MemoryFit(low.required / low.value, 0.0, low.available, 1, why, cap=low.cap,
                     aim=aim)


def capped(x: tuple[float, ...], fit: MemoryFit | None) -> int:
    """The lowest index an OOM's own sizes prove cannot fit (len(x) when none does)."""
    if fit is None or fit.cap is None:
        return len(x)
    return bisect.bisect_right(x, fit.cap + 1e-9)


def contradicting(probes: Sequence[Probe]) -> list[int]:
    """The OOMs (indices in `probes`) the memory measured says fit: the run's own
    compiled-memory line and the passes' line both put it MEMORY_MARGIN under the pool.
    The margin is what a program that fits leaves for buffers outside it (fragmentation,
    the runtime): an OOM within it may be the limit, one beyond it is not what the pool
    explains."""
    if not any(p.outcome is Outcome.OOM for p in probes):
        return []
    passes = memory_fit([p for p in probes if p.outcome is Outcome.OK])
    if passes is None:
        return []
    return [k for k, p in enumerate(probes)
            if p.outcome is Outcome.OOM and is_numeric(p.value) and p.temp_gb is not None
            and p.fixed_gb is not None and p.limit_gb is not None
            and p.temp_gb + p.fixed_gb <= p.limit_gb * (1 - MEMORY_MARGIN)
            and passes.base + passes.slope * float(p.value) <= passes.limit * (1 - MEMORY_MARGIN)]


def one_offs(probes: Sequence[Probe]) -> frozenset[int]:
    """OOMs (indices in `probes`) taken as one-offs rather than the limit: once two OOMs
    contradict the memory measured (`contradicting`), such OOMs are flaky (a node, the
    allocator, another process), not the deterministic limit SKILL.md takes an OOM for.
    One alone is the default: it stands, lowers the pool, and is never run again. A
    one-off bounds nothing and lowers no pool, and its value may run again; an OOM that
    repeats at its value shows the OOMs are the limit after all, and every one stands."""
    hits = contradicting(probes)
    if len(hits) < 2:
        return frozenset()
    times = Counter(p.value for p in probes if p.outcome is Outcome.OOM)
    if any(times[probes[k].value] >= 2 for k in hits):
        return frozenset()
    return frozenset(hits)


def _below_pass(p: Probe, probes: Sequence[Probe]) -> bool:
    """A failure at a value below one that passed (on the same nodes): memory grows with
    the value, so it contradicts the pass and bounds nothing below it."""
    return is_numeric(p.value) and any(
        q.outcome is Outcome.OK and not q.earlier and is_numeric(q.value)
        and float(q.value) > float(p.value) for q in probes)


@dataclass(frozen=True)
class Calibration:
    """How far the runs showed the line over-states memory: its need x `scale` (<= 1)."""

    scale: float
    why: str  # "" when no pass said so

    @property
    def exceeded(self) -> bool:
        """A pass read above the pool: the line no longer places the limit above it."""
        return self.scale < 1


def calibration(probes: Sequence[Probe]) -> Calibration:
    """The passes whose compiled-memory total read above what they had (the pool Memstats
    printed: what the job had, whatever a config says the device holds; a config's
    `gpu_memory_gib` left at its default is no reading) ran all the same: what they needed
    is at most the pool, so the line over-states by at least total / pool. The smallest such
    ratio scales every prediction (a conservative one: the line may over-state more)."""
    over: list[tuple[float, Probe, float, float]] = []
    for p in probes:
        if p.outcome is not Outcome.OK or p.temp_gb is None or p.fixed_gb is None \
                or p.limit_gb is None or not is_numeric(p.value):
            continue
        total, pool = p.temp_gb + p.fixed_gb, p.limit_gb
        if total > pool:
            over.append((pool / total, p, total, pool))
    if not over:
        return Calibration(1.0, "")
    scale, p, total, pool = min(over, key=lambda o: o[0])
    return Calibration(scale, f"the line read {total:.1f} GB at {p.value}, over the {pool:.2f} "
                              f"GB it had, and it ran: the line over-states memory, its "
                              f"predictions x{scale:.2f}")


def line_evidence(x: tuple[float, ...], fit: MemoryFit | None, floor: tuple[float, str] | None,
                  cal: Calibration) -> tuple[int | None, str, int]:
    """(index the calibrated line predicts is the largest fit, why, lowest index whose
    calibrated line reads over the pool: n when none). The line is an estimate: a value
    over the pool is not ruled out, it is run last (choose.py), and only a failed run says
    it does not fit."""
    n = len(x)
    if fit is None:
        return None, "", n
    likely = fit.likely_fit(cal.scale)
    limit = fit.max_fit(cal.scale)
    pred = bisect.bisect_right(x, likely + 1e-9) - 1
    why = f"{fit.why}" + (f"; {cal.why}" if cal.why else "") + \
        f" -> largest fit ~{likely:.1f} ({MEMORY_MARGIN:.0%} under the pool; an estimate)"
    if floor is not None and floor[0] > limit:
        pred = bisect.bisect_right(x, floor[0] + 1e-9) - 1
        why += f"; but {floor[1]}, so it fits up to ~{floor[0]:.1f}"
    return pred, why, min(n, bisect.bisect_right(x, limit + 1e-9))


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares; one point: through the origin (temp is mostly activations)."""
    if len(xs) == 1:
        return ys[0] / xs[0], 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def alloc_floor(probes: Sequence[Probe], fit: MemoryFit | None) -> tuple[float, str] | None:
    """An OOM that failed allocating X GB was at most X short: the largest fit is at least
    its value less X / slope. Only with a fitted slope: one run's line through the origin
    over-states the slope, and with it this floor."""
    if fit is None or fit.points < 2:
        return None
    floors = [(float(p.value) - p.alloc_gb / fit.slope, p) for p in probes
              if p.outcome is Outcome.OOM and p.alloc_gb is not None and is_numeric(p.value)]
    if not floors:
        return None
    x, p = max(floors, key=lambda f: f[0])
    return x, f"the OOM at {p.value} failed allocating {p.alloc_gb:.1f} GB"


def predict(x: tuple[float, ...], fit: MemoryFit | None, floor: tuple[float, str] | None,
             top_ok: int) -> tuple[int | None, str, int]:
    """(index memory predicts is the largest fit, why, lowest index it proves cannot fit)."""
    n = len(x)
    if fit is None:
        return None, "", n
    limit = fit.max_fit()
    # Aim a margin under the pool (`likely_fit`). Past the margin, up to the pool, the TGS
    # trend decides whether one more value is worth a run.
    likely = fit.likely_fit()
    pred = bisect.bisect_right(x, likely + 1e-9) - 1
    can = bisect.bisect_right(x, limit + 1e-9) - 1
    why = f"{fit.why} -> largest fit ~{likely:.1f} ({MEMORY_MARGIN:.0%} under the pool)"
    trusted = fit.points >= 2 and can >= top_ok
    if floor is not None and floor[0] > limit:
        pred, trusted = bisect.bisect_right(x, floor[0] + 1e-9) - 1, False
        why += f"; but {floor[1]}, so it fits up to ~{floor[0]:.1f}"
    # With two or more points the line is measured, not assumed, so the value past the
    # prediction needs more than the pool: it cannot fit. Unless a pass above says the line
    # over-states memory.
    proven = can + 1 if trusted else n
    # An OOM's own sizes prove what cannot fit, from one run (`SizedOom.cap`).
    return pred, why, min(proven, n, capped(x, fit))
