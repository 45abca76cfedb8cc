"""The xla-tuning sweep's own Telegram progress (issue 14, "Progress"): the kickoff, each
positive result, the midpoint; the end is the verdict's summary, which the engine sends.

Pure: each plan's results in, the lines to say with the plan's first new run out. They are
said once because a run is planned once: the kickoff with the sweep's first run, positive
results and the midpoint with the first run of the wave after the one that showed them.
Failures are the engine's own `— FAIL` lines (the notifier sends them at once).
"""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import Planned

HEAD = "[xla-tuning]"


def kickoff(model: str, nodes: str, inp: Inputs, batch: str) -> str:
    return (f"{HEAD} {model} {inp.parallelism.text} sweep started on {nodes} (nodelist frozen)"
            f": {batch}; {len(inp.catalog)} catalog profiles, config tags "
            f"{', '.join(inp.tags)}; stops at a recipe of 1-{inp.max_flags} flags confirmed "
            f">= +{inp.win:.0%} over baseline-deployed, or >= {inp.bounded_count} profiles "
            f"none > +{inp.bounded_gain:.0%}, or {inp.max_queue_s / 3600:g} h of queue time")


def positives(inp: Inputs, board: Board, results: Sequence[Result], wave: int) -> list[str]:
    """Profiles first measured in `wave` at or above the +2 % bar (bounded_gain) on the
    primary tag: a result worth a message, not yet a winner (one run is never one)."""
    primary = inp.tags[0]
    out: list[str] = []
    for e in board.measured(primary):
        d = board.delta(e.profile, primary)
        if e.first_wave != wave or d is None or d < inp.bounded_gain:
            continue
        jobs = [r.job_id for r in results if r.profile == e.profile and r.tag == primary
                and r.outcome is Outcome.OK]
        out.append(f"{HEAD} positive result: {e.profile} {d:+.2%} ± "
                   f"{board.se(e.profile, primary):.2%} vs baseline-deployed ({e.n} run"
                   f"{'s' if e.n != 1 else ''}: job {', '.join(jobs)}) — PASS")
    return out


def _profiles_tried(board: Board, primary: str) -> int:
    """Distinct profiles with an outcome in Waves 2+ on the primary tag (the bounded count)."""
    return sum(1 for (p, t), e in board.entries.items()
               if t == primary and p not in (BASELINE, EVIDENCE) and e.first_wave >= 2
               and (e.n or e.fate.value.startswith("dropped")))


def _past_midpoint(inp: Inputs, board: Board) -> bool:
    half_count = _profiles_tried(board, inp.tags[0]) * 2 >= inp.bounded_count
    return half_count or board.queue_s * 2 >= inp.max_queue_s


def midpoint(inp: Inputs, results: Sequence[Result], board: Board,
             next_wave: Sequence[Planned]) -> str | None:
    """Said once, when the wave just finished took the sweep past half of its budget (half
    the bounded profile count, or half the queue time)."""
    last = max(board.waves, default=0)
    before = build([r for r in results if r.wave < last], inp.noise, inp.max_flakes,
                   inp.drift)
    if not _past_midpoint(inp, board) or _past_midpoint(inp, before):
        return None
    primary = inp.tags[0]
    ranked = sorted((e for e in board.measured(primary)), key=lambda e: -e.mean)
    best = "none measured"
    if ranked:
        d = board.delta(ranked[0].profile, primary)
        best = f"{ranked[0].profile} {d:+.2%} (n={ranked[0].n})" if d is not None else \
            ranked[0].profile
    return (f"{HEAD} midpoint: {_profiles_tried(board, primary)} of {inp.bounded_count} "
            f"profiles tried, {board.queue_s / 3600:.1f} of {inp.max_queue_s / 3600:g} h of "
            f"queue time; best so far: {best}; next: wave {next_wave[0].wave}, "
            f"{len(next_wave)} run{'s' if len(next_wave) != 1 else ''}")


def lines(inp: Inputs, results: Sequence[Result], decided: Sequence[Planned],
          first: str | None) -> tuple[str, ...]:
    """What to say with this plan's first run: `first` (the kickoff) on the sweep's first
    plan; else, when a new wave starts, its predecessor's positive results and the midpoint."""
    if first is not None:
        return (first,)
    board = build(results, inp.noise, inp.max_flakes, inp.drift)
    last = max(board.waves, default=0)
    if not decided or max(p.wave for p in decided) <= last:
        return ()  # a retry or the rest of a wave under way: nothing new to say
    out = positives(inp, board, results, last)
    mid = midpoint(inp, results, board, decided)
    return (*out, *([mid] if mid else []))
