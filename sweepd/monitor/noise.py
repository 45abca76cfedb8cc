"""The run-to-run noise a sweep's decisions allow for: one track, one name, for every kind.

Three sources, in the order they arrive:

* the prior: what the rules assume before anything is measured (the seed's 1 % run to run,
  or the spec's `noise_floor` where it sets one);
* the steps: each run's steady steps give its mean's standard error (`steady.relative_se`);
  their median over the passed runs is a floor on the run-to-run noise (a run's own offset,
  placement or clocks, moves every step alike, so the steps cannot show it);
* between runs: a value run twice measures that offset too (their spread about the means).

`Noise.decided` is the one number the rules read:

* nothing measured: the prior (the seed's rule);
* a measure above the prior: the measure (more noise than assumed is never ignored);
* the steps measure the noise far below the prior (`quiet`: a quarter of it or less; a TPU
  v5e chip: 0.02-0.05 % against 1 %) and a value has run twice: the measure, steps or
  between runs whichever is the larger, never below `limit` (nor a `noise_floor` the spec
  set). Until a value has run twice (`awaits_probe`) the prior holds, and the leader runs
  again at once (`model_perf.noise_probe`, after the second passing run), so no decision
  rests on the steps alone: on the bench's quiet steps under 0.8 % runs, deciding the
  climb at the steps' figure and confirming at the end lost 2.5 points found (tuned) and 9
  (fresh). `early=False` is that earlier way (the bench's "before" row): the steps decide
  until a pair exists, and the best runs again at the end (`unconfirmed`).
* the steps far below the prior, but a value run again spread more than `contradict` times
  the steps' figure (`steps_missed`): the steps miss the runs' own offset (the simulator's
  quiet steps under 0.3-0.8 % runs), so they say nothing of the run-to-run noise and the
  prior holds again (the seed's rule), or the pair's figure where it is above it by more
  than one pair's chance (`one_pair_bar`, the seed's FLAT / sqrt 2 for a single pair).
* otherwise (a measure a little under the prior): the prior.
"""

from __future__ import annotations

from dataclasses import dataclass

QUIET = 4.0     # the steps measure the noise this many times below the prior, or more
LIMIT = 0.0005  # the least noise any decision allows for, however quiet the runs
# A repeat spread this many times the steps' figure (or the limit) says the steps miss the
# runs' own offset. One pair's figure is |d| / sqrt 2, half-normal about the true std: where
# the steps are right, 2x or more comes in ~5 % of pairs; where the runs are 8x the steps,
# under 2x in ~20 %.
CONTRADICT = 2.0


@dataclass(frozen=True)
class Noise:
    prior: float                    # the seed's 1 %, or the spec's noise_floor
    floor: float | None = None      # a noise_floor the spec set: never decided below it
    steps: float | None = None      # the median of the passed runs' steady-step error
    between: float | None = None    # the spread of values run more than once
    between_free: int = 0           # ... and the repeat runs it rests on
    limit: float = LIMIT
    quiet_factor: float = QUIET
    # Decide with a measure far below the prior (the kind's option; off, the prior is a
    # floor, as the seed's rule has it, and only more noise than it moves the decisions).
    use_measure: bool = True
    contradict: float = CONTRADICT
    # Decide under the prior only once a value ran twice (the early repeat); False: the steps
    # alone decide until then (the best runs again at the end).
    early: bool = True
    # Where the steps missed: a single pair's figure above the prior decides only past this
    # (the seed's rule for one pair, repeat.with_run_noise); None: any figure above it.
    one_pair_bar: float | None = None

    @property
    def far_below(self) -> bool:
        """The steps measure the noise far below the prior."""
        return self.steps is not None and self.steps * self.quiet_factor <= self.prior

    @property
    def quiet(self) -> bool:
        """The steps measure the noise far below the prior, and the decisions may use it."""
        return self.use_measure and self.far_below

    @property
    def steps_missed(self) -> bool:
        """Quiet steps that a value run again contradicts: the runs spread more than
        `contradict` times what the steps (or the limit) said."""
        return self.quiet and self.between is not None and self.steps is not None and \
            self.between > self.contradict * max(self.steps, self.limit)

    @property
    def measured(self) -> float | None:
        got = [x for x in (self.steps, self.between) if x is not None]
        return max(got) if got else None

    @property
    def decided(self) -> float:
        """The noise the rules decide with (the module's docstring)."""
        floor = self.floor or 0.0
        measured = self.measured
        if measured is not None and measured > self.prior and not self._chance_pair:
            return max(measured, floor)
        if self.steps_missed:
            return max(self.prior, floor)
        if self.quiet and measured is not None and not self.awaits_probe:
            return max(measured, self.limit, floor)
        return max(self.prior, floor)

    @property
    def _chance_pair(self) -> bool:
        """One pair above the prior, on steps it contradicted, within one pair's chance at
        the prior: it decides nothing, as without the steps (the seed's rule)."""
        return self.steps_missed and self.between_free < 2 and self.one_pair_bar is not None \
            and self.between is not None and self.between <= self.one_pair_bar \
            and (self.steps or 0.0) <= self.prior

    @property
    def awaits_probe(self) -> bool:
        """Quiet steps, no value run twice yet, the early repeat on: the prior holds until
        the leader runs again (`model_perf.noise_probe`)."""
        return self.early and self.quiet and self.between is None

    @property
    def below_prior(self) -> bool:
        """The decisions use a measure under the prior."""
        return self.decided < self.prior

    @property
    def unconfirmed(self) -> bool:
        """Decided under the prior on the steps alone: no value has run twice."""
        return self.below_prior and self.between is None

    def source(self) -> str:
        """What the decided noise rests on, as a verdict says it."""
        d = self.decided
        if self.steps_missed and d == self.prior:
            return ("the rules' prior (a value run again spread wider than the steps said: "
                    "they miss the runs' own offset)")
        if self.between is not None and self.between >= d and self.between_free:
            runs = "one pair of runs of one value (a single pair: a rough figure)" \
                if self.between_free == 1 else \
                f"the values run again ({self.between_free} repeat runs pooled)"
            return runs
        if self.steps is not None and self.steps >= d:
            return "the runs' steady steps"
        if d == self.limit:
            return f"the lower limit the rules allow ({self.limit:.2%})"
        return "the spec's noise_floor" if self.floor is not None and d == self.floor \
            else "the rules' prior"
