"""Finishing a sweep on its strategy's verdict: its open work ended, its state and verdict
written with the end note in one transaction, then its scancels sent and its nodes and
checkouts released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweepd.core.control import end_note, end_open_work, release
from sweepd.kinds.api import Finished
from sweepd.store.rows import Sweep
from sweepd.store.states import SweepState

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts


async def finish(engine: EngineParts, sweep: Sweep, decision: Finished) -> None:
    to = SweepState.DONE if decision.ok else SweepState.FAILED
    async with engine.store.tx():
        # A verdict reached with runs still open (e.g. a time budget spent mid-wave):
        # their jobs would otherwise run on, and hold the nodes, for nobody.
        await end_open_work(engine, sweep.id, "not needed: the sweep reached its verdict",
                            decision.rule)
        note = await end_note(engine, sweep, ended=True)
        await engine.store.sweeps.transition(
            sweep.id, to, decision.summary, rule=decision.rule, verdict=decision.verdict,
            progress=decision.summary + (f"\n\n{note}" if note else ""))
    await engine.flush_cancels()
    await release(engine, sweep)
    engine.notify()
