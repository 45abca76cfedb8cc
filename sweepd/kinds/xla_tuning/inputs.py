"""What the planner is given: the spec's inputs, with `thresholds.THRESHOLDS` (the SKILL.md's
numbers) as defaults."""

from __future__ import annotations

from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Profile, Setting
from sweepd.kinds.xla_tuning.evidence.drift import DEFAULT as DRIFT_DEFAULT
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS as T


@dataclass(frozen=True)
class Inputs:
    parallelism: Parallelism
    catalog: tuple[Profile, ...]
    tags: tuple[str, ...] = ("default",)  # the first is the primary config tag
    deployed: tuple[Setting, ...] = ()  # what the model's env file sets (the Inventory)
    win: float = T.win  # stop rule 1: a confirmed recipe at least this much faster
    bounded_gain: float = T.bounded_gain  # stop rule 2: none of >= bounded_count beats this
    bounded_count: int = T.bounded_count
    regress: float = T.regress  # no other config tag may lose more than this
    max_queue_s: float = T.max_queue_s  # stop rule 3
    # The most runs (jobs, each failure included) the sweep may make, a cap beside the 8 h
    # (None: none, the SKILL.md's rules): reached, the sweep ends as at the 8 h stop.
    max_runs: int | None = None
    noise: float = T.noise  # relative std of one run: the prior of the cell's own estimate
    wave_size: int = T.wave_size
    max_flakes: int = T.max_flakes
    max_flags: int = T.max_flags
    # Mechanisms (in evidence order) seeded in full before a winner may end the sweep; all
    # by default: a winner elsewhere would be missed (measured: docs/benchmarks.md).
    focus: int = T.focus
    # The runs measured this fraction of `noise` or less: the verdict says so (`quiet.py`).
    quiet: float = T.quiet
    microbatches: int | None = None  # the config's num_pipeline_microbatches (Wave 5)
    # `seed`: the SKILL.md's stop rules as written (a confirmed >= +5 % recipe, once Wave 6
    # shows it regresses no other tag, ends the sweep); `thorough`: the winner rule waits
    # until the search has plateaued (for a person who wants the best, not good enough).
    stop: str = T.stop
    # Runs each of a proposal's recipe and of the baseline made after it was decided, its
    # gain reported from them alone (0: from the runs that confirmed it, as the SKILL.md).
    report_runs: int = T.report_runs
    # What of the catalog the search left unrun (first values of mechanisms never seeded,
    # then the numeric families' untried values) runs in the queue time a bounded verdict
    # would leave unused, before it (False: the SKILL.md's rule as it comes; `family_gaps.py`).
    family_gaps: bool = T.family_gaps
    # A recipe reading above the bounded bar, not significantly, is measured further before a
    # bounded verdict, on at least three baseline runs (False: as before; `bounded_question.py`).
    bounded_question: bool = T.bounded_question
    # How a claim reads the baseline beside it (`drift.py`); but for `mean`, the baseline
    # runs beside the claim's runs.
    drift: DriftRead = DRIFT_DEFAULT
    # Catalog profiles left out because every setting already holds in the job
    # (`in_effect.without_in_effect`): the verdict names them.
    in_effect: tuple[str, ...] = ()
    # The devices one job runs on (nodes x devices per node; None: not known) and how that
    # was read: one device has no collectives (`no_collectives.without_collectives`).
    devices: int | None = None
    devices_how: str = ""
    # Catalog profiles left out because they act on collectives alone and the program has
    # none (rule `catalog.no_collectives`), and the evidence it has none: the verdict says both.
    no_collectives: tuple[str, ...] = ()
    no_collectives_why: str = ""
    # Who proposes a wave's exploring runs: `seed`, the hand rules (`search_steps.py`);
    # `tpe`, Optuna's TPE sampler fitted to the results (`tpe_proposals.py`), the seed's
    # re-runs, confirmation, report block and stop rules on top.
    proposer: str = "seed"
    # At few runs, before the 8 h stop's last runs confirm a leader under the win bar, the
    # stack of the two best singles runs once when predicted above it (`closing_pair.py`).
    closing_pair: bool = T.closing_pair
    # At few runs, with a leader under the win bar run twice, a one-value flag's first run
    # is on top of the leader, not alone (`on_leader.py`).
    on_leader: bool = T.on_leader
