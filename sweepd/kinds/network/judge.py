"""How a network group test is judged, and the records of the isolation search: a `Judge`
(the TGS expected of a group of a size, and whether a result is degraded), a `Test` (one
group's result and verdict), a `Fault` (a bad node, link, or a group it could not narrow),
and what `advance` returns: the `Outcome`, or the groups the next wave still `Wanted`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

Group = frozenset[str]

# The spec's defaults (`NetworkSpec.tolerance`, `.scaling`), declared once here.
TOLERANCE = 0.05   # a group this far below its expected TGS is degraded
SCALING = 0.97     # TGS/device kept per doubling of nodes


@dataclass(frozen=True)
class Judge:
    """Expected TGS per group size: from a reference (TGS/device of one node) and the best
    result seen so far, scaled between sizes by `scaling` per doubling of nodes."""

    reference: float | None = None
    tolerance: float = TOLERANCE
    scaling: float = SCALING
    # Failure-only (the SKILL.md's `-- steps=1`): a group either trains or fails; no TGS
    # is measured, so a group that ran is healthy and nothing is compared.
    failure_only: bool = False

    @property
    def absolute(self) -> bool:
        """Each group is judged on its own (against a reference, or by failing at all), not
        only against the other groups."""
        return self.reference is not None or self.failure_only

    def expected(self, size: int, seen: Mapping[Group, float | None]) -> float | None:
        if self.failure_only:
            return None
        candidates = [self.reference * self._scale(1, size)] if self.reference else []
        candidates += [tgs * self._scale(len(g), size) for g, tgs in seen.items() if tgs]
        return max(candidates, default=None)

    def _scale(self, from_size: int, to_size: int) -> float:
        return float(self.scaling ** (math.log2(to_size) - math.log2(from_size)))

    def degraded(self, tgs: float | None, expected: float | None) -> bool:
        if tgs is None:
            return True  # the job failed or hung: the group cannot train
        if self.failure_only:
            return False
        return expected is not None and tgs < expected * (1 - self.tolerance)


@dataclass(frozen=True)
class Test:
    group: Group
    wave: int
    role: str                   # whole | half | cross | confirm | verify
    tgs: float | None
    expected: float | None
    degraded: bool


@dataclass(frozen=True)
class Fault:
    kind: str                   # node | link | pair / group (unresolved: could not narrow)
    nodes: tuple[str, ...]
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    faults: tuple[Fault, ...]
    tests: tuple[Test, ...]
    rounds: int
    absolute: bool              # False: judged only against the group itself (no reference)


@dataclass(frozen=True)
class Wanted:
    groups: list[tuple[Group, str]]   # (group, role) of the current wave without a result yet
    tests: tuple[Test, ...]           # finished so far
    rounds: int
