"""Which catalog flags act on collectives alone: combining, overlapping, pipelining or
transporting all-gathers, reduce-scatters, all-reduces and permutes, and the schedulers'
collective-only switches. A program without a collective (one device: nothing to gather,
reduce or send) gives them nothing to do, so a run of one measures the baseline again under
another name (`waves/no_collectives.py` leaves them out, rule `catalog.no_collectives`).

The latency hiding scheduler is not among them: it also schedules copies and other
asynchronous work; nor are the memory flags (the TPU's scoped VMEM limit, the GPU's memory
fraction), which act on every fusion.
"""

from __future__ import annotations

from collections.abc import Iterable

from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism, Profile
from sweepd.kinds.xla_tuning.catalog.flags import FAMILIES, OVERLAP_LIMIT, Family
from sweepd.kinds.xla_tuning.catalog.tpu_flags import TPU_FAMILIES

# Mechanisms whose every flag acts on collectives (catalog.Mechanism).
COLLECTIVE_MECHANISMS = frozenset({Mechanism.COMBINE, Mechanism.OVERLAP, Mechanism.P2P,
                                   Mechanism.MATMUL, Mechanism.TRANSPORT})
# Scheduler flags that schedule collectives alone.
COLLECTIVE_SCHEDULER_KEYS = frozenset({
    "xla_gpu_enable_highest_priority_async_stream",   # the async collectives' stream
    OVERLAP_LIMIT,                                    # collectives in flight at once
    "xla_enable_async_all_gather",
})


def _keys(families: Iterable[Family]) -> set[str]:
    return {k for f in families if f.mechanism in COLLECTIVE_MECHANISMS for k in f.keys}


COLLECTIVE_KEYS: frozenset[str] = frozenset(
    _keys(FAMILIES) | _keys(TPU_FAMILIES) | COLLECTIVE_SCHEDULER_KEYS)


def collective_only(profile: Profile) -> bool:
    """Every setting of the profile acts on collectives alone (a profile of no setting, or
    of a flag the catalog does not know, is not)."""
    return bool(profile.settings) and all(s.key in COLLECTIVE_KEYS for s in profile.settings)
