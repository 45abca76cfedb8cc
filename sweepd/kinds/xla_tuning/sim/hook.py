"""What the XLA tuning kind adds to the simulated cluster (`sim.hooks`): the scenario's
`tuning:` section, and the jobs of its model, whose landscape decides their flags, TGS,
memory and failure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepd.kinds.xla_tuning.sim.tuning import TuningSpec, tuning_for
from sweepd.sim.faults import pick_fault
from sweepd.sim.hooks import JobPlace, SimHook
from sweepd.sim.jobinput import JobInput
from sweepd.util.model_shapes import resolve_model

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.sim import tuningjob

# `tuningjob` (with the log and flag readers it uses) is imported only by a tuning job's
# process: every simulated job's process loads this hook, and that import was a third of
# each one's start-up CPU.

# The steady window the gather reads: steps 9-14 with the profiler, 5-14 without.
PROFILED_WINDOW = (9, 14)
WINDOW = (5, 14)


@dataclass(frozen=True)
class TuningJob:
    """A tuning job as the timeline asks it (`sim.jobinput.KindJob`)."""

    run: tuningjob.TuningRun
    oom_on_every_rank: bool = True   # a profile's temp memory over HBM: every rank's program

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
    fault = tuningjob.fault_of(run) or pick_fault(sc, place.state_dir, base.job_id, base.model,
                                                  base.nodes, truth.batch)
    return replace(base, truth=truth, fault=fault, kind_job=TuningJob(run))


def _models(section: Any) -> list[str]:
    return [section.model] if isinstance(section, TuningSpec) else []


HOOK = SimHook("tuning", TuningSpec, _models, _job)
