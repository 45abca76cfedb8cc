"""Whether a profile's values won in its job (`why_not_applied`): its printed effective flags
and env (last wins, `logread.applied`) against the profile's settings, the evidence run's
dump switch judged by its artifact; when they did not, the culprit and its cause (`Miss`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
from sweepd.kinds.xla_tuning.evidence import logread
from sweepd.kinds.xla_tuning.evidence.logfacts import LogFacts
from sweepd.store.rows import RunParams

DUMP_ENV = "ENABLE_XLA_DUMP"   # the evidence run's switch (train_env.sh reads it)
_TRUTHY = ("1", "y", "yes", "true")


def settings_of(params: RunParams) -> tuple[Setting, ...]:
    """The profile's XLA flags and env vars, as `logread.applied` checks them."""
    flags = logread.parse_flags(" ".join(params.xla_flags))
    return (*(Setting(k, v, Layer.XLA) for k, v in flags.items()),
            *(Setting(k, v, Layer.ENV) for k, v in params.env.items()))


@dataclass(frozen=True)
class Miss:
    """Why a profile's values did not win in its job: the culprit, and its cause (one per
    mechanism, so that several profiles lost the same way are seen as one failure)."""

    cause: str   # UNREACHED, ENV_FILE, NO_FLAGS or LOST
    culprit: str


# None of the profile's settings reached the job: the way a profile reaches a job failed.
UNREACHED = "unreached"
ENV_FILE = "env_file"    # the model's env file's value won (it is sourced later)
NO_FLAGS = "no_flags"    # the log never printed XLA_FLAGS
LOST = "lost"            # some settings won, another value won over this one


def asks_dump(settings: Sequence[Setting]) -> bool:
    """The run asks for an HLO dump: the toolkit's switch (`ENABLE_XLA_DUMP=1`, which its
    train_env.sh turns into dump flags), or the dump flags themselves in XLA_FLAGS (a TPU
    evidence run's: libtpu refuses `--xla_dump_to` in LIBTPU_INIT_ARGS, seen on the v5e
    chip, and its compiler reads XLA_FLAGS' dump flags)."""
    return any((s.key == DUMP_ENV and s.value.lower() in _TRUTHY)
               or (s.key == logread.XLA_FLAGS and "xla_dump_to" in logread.parse_flags(s.value))
               for s in settings if s.layer is Layer.ENV)


def dumped(params: RunParams, facts: LogFacts) -> bool:
    """An evidence run is judged by its artifact too: the HLO dump it asked for exists."""
    return asks_dump(settings_of(params)) and facts.dumped


def why_not_applied(settings: Sequence[Setting], facts: LogFacts,
                    deployed: Sequence[Setting] = (), dumped: bool = False) -> Miss | None:
    """Why the profile's values did not win in the job; None when they did, or when the log
    printed no environment at all (a trainer that prints none: nothing to check by; the
    toolkit's `_train.sh` always prints it). The dump switch (`ENABLE_XLA_DUMP`, the
    evidence run's) is judged by its artifact: `dumped`, the job wrote the HLO dump, shows
    it took effect whatever the listing says, and no dump shows it did not, whatever the
    listing says (re-exported after train_env.sh, it is listed but was never read)."""
    if not facts.printed_env:
        return None
    wants_dump = asks_dump(settings)
    # The dump's own settings are judged by the dump (an XLA_FLAGS the run sends is the
    # job's whole XLA_FLAGS, not one env var the listing shows).
    checked = [s for s in settings if s.layer is not Layer.MAXTEXT
               and s.key not in (DUMP_ENV, logread.XLA_FLAGS)]
    ok, culprit = logread.applied(checked, facts.eff) if checked else (True, None)
    missed = [s for s in checked if not logread.in_effect(s, facts.eff)]
    if not ok and culprit is not None:
        first = missed[0]
    elif wants_dump and not dumped:
        listed = facts.eff.env.get(DUMP_ENV)
        sent = any(s.key == logread.XLA_FLAGS for s in settings)
        culprit = ("no HLO dump was written where the run's XLA_FLAGS --xla_dump_to points"
                   if sent and listed is None else
                   "no HLO dump was written, though the listing shows "
                   f"{DUMP_ENV}={listed}" if listed is not None else
                   f"no HLO dump was written, and {DUMP_ENV} is not set in the job's "
                   "effective environment")
        first = next(s for s in settings if s.key in (DUMP_ENV, logread.XLA_FLAGS))
    else:
        return None
    if first.layer is Layer.XLA and facts.eff.xla_text is None:
        return Miss(NO_FLAGS, culprit)
    env_file = {s.key: s for s in deployed}
    own = env_file.get(first.key)
    if own is not None and logread.in_effect(own, facts.eff):
        return Miss(ENV_FILE, f"{culprit} (the model's env file sets {own.label}, and it "
                              "is sourced after train_env.sh)")
    reached = [s for s in checked if s not in missed]
    if not reached and (not wants_dump or not dumped):
        where = ("" if own is not None or first.key == DUMP_ENV else
                 f"; the model's env file does not set {first.key}")
        return Miss(UNREACHED, f"{culprit}: none of the profile's settings reached the job"
                               + where)
    return Miss(LOST, culprit)
