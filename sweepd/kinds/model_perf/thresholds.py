"""Every number a model perf rule reads, in one record: the spec's defaults, the search, the
planner and the docs (scripts/rules_doc.py) all read `THRESHOLDS`; the modules that use a
number name it after the field (`search.space.NOISE` is `THRESHOLDS.noise`), never a copy.
Each field's `means` says what it decides; the defaults are the SKILL.md's where it names one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from sweepd.monitor.noise import LIMIT as NOISE_LIMIT
from sweepd.monitor.noise import QUIET as NOISE_QUIET


def _t(value: float, means: str) -> float:
    return field(default=value, metadata={"means": means})


def _n(value: int, means: str) -> int:
    return field(default=value, metadata={"means": means})


@dataclass(frozen=True)
class PerfThresholds:
    # The budget (the spec's `max_runs` default, and what a person's yes adds to it).
    max_runs: int = _n(12, "runs a sweep makes unless its spec says otherwise")
    extra_runs: int = _n(4, "runs taken past max_runs (once a person agrees, or extend_budget) "
                            "to close the gaps beside the best")
    # Memory: the pool and the margin under it.
    mem_fraction: float = _t(0.93, "XLA's share of device memory when neither the spec nor the "
                                   "env file says (SKILL.md's example)")
    memory_margin: float = _t(0.01, "of the pool: the predicted largest fit aims this far "
                                    "under it (fragmentation, runtime buffers)")
    oom_margin_gb: float = _t(0.05, "an OOM run needed at least this much more than the usable "
                                    "pool")
    memory_agree: float = _t(0.03, "two compiled-memory readings at one value further apart "
                                   "than this share (plus the rounding) are two programs")
    memory_rounding_gb: float = _t(0.1, "the rounding of a compiled-memory reading (GB)")
    starves_above: float = _t(0.95, "a memory fraction above this may starve the collectives")
    # The climb.
    start_fraction: float = _t(0.75, "first probe at this fraction of the estimated max "
                                     "(SKILL.md Step 3)")
    climb: float = _t(1.5, "without a memory line, climb by this factor (SKILL.md: second "
                           "probe at 1.5x the first)")
    max_batch: int = _n(4096, "the largest batch the search considers")
    tolerance: float = _t(0.005, "a gap is settled once its upper bound is within this of "
                                 "the best")
    step_noise: float = _t(6.0, "a step from the best aims at a TGS change of this many "
                                "noise widths")
    step_share: float = _t(0.5, "... but goes at most this share of the way across its gap")
    bottom_step: float = _t(0.5, "below the lowest value run, probe at this fraction of it")
    descent_aim: float = _t(0.9, "after one OOM, aim at this fraction of its one-run line's "
                                 "prediction")
    secant_noise: float = _t(1.0, "a secant's slope is widened by this many FLATs of TGS over "
                                  "its span")
    step_time_noise: float = _t(0.02, "the step-time bound allows this much noise on the run "
                                      "it starts at")
    align_slack: float = _t(0.125, "a loose target (a first probe, a midpoint) may move this "
                                   "share to align")
    align_max: int = _n(3, "alignment counts up to a multiple of 2**align_max (tile sizes)")
    # multi_peak's ladder below the runs.
    ladder_step: float = _t(0.5, "multi_peak: below the lowest run, halve ...")
    ladder_floor: int = _n(8, "... while the lowest run is at least this batch")
    ladder_depth: float = _t(0.15, "... and measured within this share of the best")
    ladder_valley: float = _t(0.05, "multi_peak: a gap below the best a valley this deep "
                                    "would open ...")
    ladder_gap: float = _t(0.25, "... spanning at least this share of its upper run's batch, "
                                 "is bisected")
    # Noise.
    noise: float = _t(0.01, "run-to-run TGS noise the rules assume until the runs measure it "
                            "(the prior; the spec's noise_floor replaces it): closer than "
                            "this, two runs cannot be told apart")
    noise_limit: float = _t(NOISE_LIMIT, "the least run-to-run noise any decision allows "
                                         "for, however quiet the runs' steps measure")
    node_variance: float = _t(0.03, "hardware variance between node lists of one size "
                                    "(xla-tuning.SKILL.md: 1-3 %)")
    max_runs_of_a_value: int = _n(2, "runs of one value at most (repeat)")
    min_steps: int = _n(4, "fewer steady steps say nothing about a run's spread")
    min_runs: int = _n(2, "passed runs whose steps are read before the noise moves from noise")
    noise_probe_left: int = _n(2, "measured_noise: the leader runs again early (noise_probe) "
                                  "only with this many runs left, its own and one the search "
                                  "then decides with")
    quiet: float = _t(NOISE_QUIET, "the runs' steps measure a noise this many times below "
                                   "the prior, or more: with measured_noise the leader runs "
                                   "again at once (noise_probe), and the rules then decide "
                                   "with the larger of the steps' and the runs' figures")
    slow_max: float = _t(0.10, "the largest slowdown looked for (a degraded GPU, throttling)")
    past_ref: float = _t(0.25, "a remat policy fitting past the first policy's largest pass "
                               "by more than this share is read at its own likely peak first")

    # Derived: each a rule of the noise above, computed once here.
    @property
    def flat(self) -> float:
        """Two runs this far apart may still be level: their difference carries both runs'
        noise (a floor's two runs read 1.8 % apart at 0.8 % std noise)."""
        return 2 * self.noise

    @property
    def align_noise(self) -> float:
        """The step from the best moves to a multiple of 8 up to this noise."""
        return 1.5 * self.noise

    @property
    def prior_drift(self) -> float:
        """An earlier sweep's run read further off than two runs' noise and the node
        variance: its curve is not this one's up to a scale."""
        return self.flat + self.node_variance

    @property
    def prior_shape(self) -> float:
        """Two shared values' ratios differ by four runs' noise at most; farther apart, the
        curve changed shape."""
        return 2 * self.flat


THRESHOLDS = PerfThresholds()

# The derived ones, for the docs: (name, what it is).
DERIVED = ("flat", "align_noise", "prior_drift", "prior_shape")


def meanings() -> dict[str, str]:
    """Each threshold's name → what it means (the fields', then the derived ones')."""
    out = {f.name: str(f.metadata["means"]) for f in fields(PerfThresholds)}
    for name in DERIVED:
        doc = getattr(PerfThresholds, name).__doc__ or ""
        out[name] = " ".join(doc.split())
    return out
