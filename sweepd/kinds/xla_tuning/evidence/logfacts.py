"""A job's facts as the gather reads them (`LogFacts`), from the store alone: each job's
facts were extracted once, from its log as the monitor read it and from its files when it
ended (`jobfacts`, kept on the job: `Job.facts`); no log or dump is read here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sweepd.kinds.xla_tuning.evidence import jobfacts, logread
from sweepd.store.rows import Job


@dataclass(frozen=True)
class LogFacts:
    """What one job printed and left, as stored on the job (`jobfacts`): its effective XLA
    flags and env (last wins), the flags the image rejected, the last step's loss, the
    steady window's mean step time and what its steps say of its noise, and where it printed
    one, its span on the cluster's own clock."""

    eff: logread.Effective = field(default_factory=logread.Effective)
    unknown: tuple[str, ...] = ()
    loss: float | None = None
    step_s: float | None = None   # over the steady window of the TGS (steps 5-14 / 9-14)
    # When the job ran on the cluster's own clock (start, end), where the cluster prints it
    # (the simulated one, whose clock is not the machine's): None elsewhere.
    span: tuple[float, float] | None = None
    dumped: bool = False   # its HLO dump was there when it ended
    run_noise: float | None = None   # its TGS's relative standard error from its steps

    @property
    def printed_env(self) -> bool:
        """False: the log printed no environment at all (nothing to check a profile by)."""
        return self.eff.xla_text is not None or bool(self.eff.env)


def stored(job: Job, keys: Iterable[str] = ()) -> LogFacts:
    """A job's facts as the store holds them (none stored: none). `keys`: env vars to
    follow besides the NCCL/RCCL/XLA_PYTHON_CLIENT families (a profile's own)."""
    facts = job.facts
    if not facts:
        return LogFacts()
    span = facts.get("span")
    noise = facts.get("run_noise")
    return LogFacts(jobfacts.effective_of(facts, tuple(keys)), tuple(facts.get("unknown", ())),
                    facts.get("loss"), facts.get("step_s"),
                    (float(span[0]), float(span[1])) if span else None,
                    facts.get("dump") is not None,
                    float(noise) if isinstance(noise, int | float) else None)


def last_loss(facts: LogFacts) -> float | None:
    return facts.loss


def step_seconds(facts: LogFacts) -> float | None:
    """Mean step time over the same steady window as the TGS."""
    return facts.step_s


# A job's facts with the env vars to follow: `stored`, or a test's own.
Reader = Callable[[Job, Iterable[str]], LogFacts]
