"""A sweep's gather from its submission, kept for its first plan.

The submission gathers (what the spec refers to must hold now, or it is refused); the
first plan, moments later, takes that result instead of gathering again: a model sweep's
commits are resolved once, an XLA sweep's Inventory read once. Only the first plan takes it,
and only while it is fresh (KEEP_S cluster seconds; a pass held up by a controller outage
gathers anew); every later plan gathers from the store as it then is. Nothing is kept
across a restart: a restarted daemon gathers, from the same store.
"""

from __future__ import annotations

from typing import Any

KEEP_S = 60.0


class Gathered:
    """Submissions' gather results by sweep id, each taken once."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[float, Any]] = {}

    def keep(self, sweep_id: int, facts: Any, now: float) -> None:
        self._kept[sweep_id] = (now, facts)

    def take(self, sweep_id: int, now: float) -> tuple[bool, Any]:
        """(True, the facts) when the sweep's submission's are kept and fresh; else
        (False, None). Either way they are no longer kept."""
        kept = self._kept.pop(sweep_id, None)
        if kept is None or now - kept[0] > KEEP_S:
            return False, None
        return True, kept[1]
