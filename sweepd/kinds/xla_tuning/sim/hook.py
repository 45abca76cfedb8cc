"""What the XLA tuning kind adds to the simulated cluster (`sim.hooks`): the scenario's
`tuning:` section, and the jobs of its model, whose landscape decides their flags, TGS,
memory and failure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepd.kinds.xla_tuning.catalog.landscape import RunKind
from sweepd.kinds.xla_tuning.sim.tuning import TuningSpec, tuning_for
from sweepd.sim.faults import pick_fault
from sweepd.sim.hooks import JobPlace, SimHook
from sweepd.sim.jobinput import JobInput
from sweepd.sim.scenario import Scenario
from sweepd.sim.truth import Truth, true_outcome
from sweepd.util.model_shapes import resolve_model

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.sim import tuningjob

# `tuningjob` (with the log and flag readers it uses) is imported only by a tuning job's
# process: every simulated job's process loads this hook, and that import was a third of
# each one's start-up CPU.

# The steady window the gather reads: steps 9-14 with the profiler, 5-14 without.
PROFILED_WINDOW = (9, 14)
WINDOW = (5, 14)
BATCH = "per_device_batch_size"


@dataclass(frozen=True)
class TuningJob:
    """A tuning job as the timeline asks it (`sim.jobinput.KindJob`)."""

    run: tuningjob.TuningRun

    def env_lines(self, rank: int) -> Sequence[str]:
        """Rank 0 also prints the dump lines."""
        return self.run.env_lines[0] if rank == 0 else self.run.env_lines[1]

    def jitter(self, steps: int, profiling: bool, seed: str) -> list[float]:
        """Centred on the steady window the gather reads, so that window's mean TGS is the
        sampled TGS."""
        from sweepd.kinds.xla_tuning.sim import tuningjob

        return tuningjob.step_jitter(self.run, steps, PROFILED_WINDOW if profiling else WINDOW,
                                     seed)

    def dump(self, nodes: int, layers: int, step_s: float | None) -> tuple[Path, str] | None:
        """An evidence run writes its HLO after compilation."""
        if self.run.dump_file is None:
            return None
        from sweepd.kinds.xla_tuning.sim import tuningjob

        text = tuningjob.evidence_hlo(self.run, nodes, layers, step_s)
        return None if text is None else (self.run.dump_file, text)

    def unknown_flag(self, flag: str) -> tuple[list[str], int]:
        # Today's XLA names every unknown flag in one quiet-fatal line (exit 1, no trace).
        return [f"F1201 17:00:00.000000    4242 parse_flags_from_env.cc:226] Unknown flags in "
                f"XLA_FLAGS: {flag}"], 1


def _job(base: JobInput, section: TuningSpec, place: JobPlace) -> JobInput | None:
    """A job of the tuning model: the landscape decides its TGS, memory and failure."""
    spec = tuning_for(section, base.model)
    if spec is None:
        return None
    from sweepd.kinds.xla_tuning.sim import tuningjob

    sc = base.scenario
    try:
        run = tuningjob.resolve(spec, sc.cluster.seed, base.job_id, base.model, base.overrides,
                                place.env, place.process_env, place.out_dir)
        truth = tuningjob.truth_of(run, spec, resolve_model(base.model), base.overrides,
                                   sc.cluster.peak_tflops)
    except ValueError as exc:
        return replace(base, error=str(exc))
    truth = _with_batch_curve(base, section, run, truth)
    fault = tuningjob.fault_of(run) or pick_fault(sc, place.state_dir, base.job_id, base.model,
                                                  base.nodes, truth.batch)
    return replace(base, truth=truth, fault=fault, kind_job=TuningJob(run))


def batch_ratio(sc: Scenario, section: TuningSpec, model: str, nodes: Sequence[str],
                batch: int, overrides: Mapping[str, str] | None = None) -> float:
    """The model's batch curve at `batch` over its value at the batch the landscapes were
    measured at (1 without a curve for the model in the scenario's `models:`)."""
    if sc.model_truth(model) is None:
        return 1.0
    at = {**(overrides or {}), BATCH: str(batch)}
    ref = {**(overrides or {}), BATCH: str(section.per_device_batch_size)}
    here = true_outcome(sc, model, nodes, at, {}, None).tgs
    there = true_outcome(sc, model, nodes, ref, {}, None).tgs
    return here / there if there else 1.0


def _with_batch_curve(base: JobInput, section: TuningSpec, run: tuningjob.TuningRun,
                      truth: Truth) -> Truth:
    """The joint truth when the scenario also gives the tuning model a batch curve
    (`models:`, a campaign's scenario): the landscape's TGS at its own batch, times the
    curve's ratio at the job's batch, times the nodes' speed; the curve's memory (a batch
    over its largest OOMs). Without a curve the landscape alone decides, as before."""
    sc = base.scenario
    if sc.model_truth(base.model) is None or run.outcome.kind is RunKind.OOM:
        return truth
    curve = true_outcome(sc, base.model, base.nodes,
                         {**base.overrides, BATCH: str(truth.batch)}, {}, None)
    if not curve.fits:
        return curve
    tgs = truth.tgs * batch_ratio(sc, section, base.model, base.nodes, truth.batch,
                                  base.overrides) * curve.factor
    return replace(curve, tgs=tgs, mfu=truth.mfu * tgs / truth.tgs if truth.tgs else 0.0,
                   tflops=truth.tflops * tgs / truth.tgs if truth.tgs else 0.0)


def _models(section: Any) -> list[str]:
    return [section.model] if isinstance(section, TuningSpec) else []


HOOK = SimHook("tuning", TuningSpec, _models, _job)
