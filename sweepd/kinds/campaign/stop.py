"""The campaign's stop message in its own words (Kind.stops.state): a title that names the
campaign, its parallelism and the stage it stopped at, and its stages as the state at
stop; a confirm stage alone names its arms' passed runs.

The stage is the one the stop's reason names: a campaign's own stops say it first
(`stage batch (sweep 5) stopped and asks: ...`, `stage batch: its sweep's spec was
refused: ...`, `stage health: only 7 healthy node(s) ...`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sweepd.kinds.campaign import confirm
from sweepd.store.rows import Job, Run, Sweep

_STAGE = re.compile(r"^stage ((?:health|network|batch|flags|confirm)(?: [A-Z0-9=,]+)?)"
                    r"(?: \(sweep \d+\))?:? ")


def stage_of(reason: str | None) -> str | None:
    """The stage a campaign's stop reason names (None: not one of its own stops)."""
    m = _STAGE.match(reason or "")
    return m.group(1) if m else None


def stop_state(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]
               ) -> tuple[str, list[str]] | None:
    spec = sweep.spec
    par = spec.get("parallelism")
    shown = " + ".join(par) if isinstance(par, list) else str(par)
    model = spec.get("model", sweep.name)
    if spec.get("stages") == ["confirm"]:
        base, cand = confirm.passed(runs, confirm.BASE), confirm.passed(runs, confirm.CAND)
        return (f"[campaign STOP] {model} {shown} confirm stage (sweep {sweep.id}) halted",
                [f"  - Passed runs: {len(base)} baseline-deployed, {len(cand)} candidate "
                 f"(of {spec.get('confirm_runs', 3)} each)",
                 f"  - Candidate: {spec.get('candidate') or 'none'}"])
    stage = stage_of(sweep.reason)
    title = (f"[campaign STOP] {model} {shown} campaign {sweep.id} halted"
             + (f" at stage {stage}" if stage else ""))
    return title, [f"  - Stages: {', '.join(spec.get('stages', []))}"
                   + (f"; stopped at {stage} (its sweep keeps its own state)" if stage else "")]
