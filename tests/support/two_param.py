"""A remat policy's runs for the two-parameter search's tests: the simulator's curve shape
and a run of a policy that keeps `act` times the activations and runs `speed` times as fast,
its curve peaking at `peak`."""

from __future__ import annotations

from sweepd.kinds.model_perf.search import Outcome, Probe


def curve(b: float, peak: float) -> float:
    """The simulator's curve shape: concave up to the peak, falling after it."""
    if b <= peak:
        return float((b / peak) ** 0.6)
    x = (b - peak) / peak
    return max(0.05, 1 - 0.3 * x - 0.3 * x * x)


def run_shaped(act: float, speed: float, peak: float, b: int) -> Probe:
    """Batch `b` under the policy: an OOM past its pool (7 GB fixed, 5.6 GB of temp per
    batch at act 1, 178.6 GB), else its TGS on `curve`."""
    temp, fixed, pool = 5.6 * act * b, 7.0, 178.6
    if fixed + temp > pool:
        return Probe(b, Outcome.OOM, None, temp_gb=temp, fixed_gb=fixed, limit_gb=pool,
                     alloc_gb=fixed + temp - pool)
    return Probe(b, Outcome.OK, 1400.0 * speed * curve(b, peak), temp_gb=temp,
                 fixed_gb=fixed, limit_gb=pool)
