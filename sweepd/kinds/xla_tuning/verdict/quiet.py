"""Rule `verdict.quiet`: where the runs measured far less noise than the rules assume, the
verdict says so (caveat QUIET); it decides nothing.

The rules read every gain at `thresholds.noise` (0.8 %, the SKILL.md's prior, shrunk toward
the cell's own spread only as its repeats add up). On the real TPU v5e chip the runs agreed
within 0.03 %, so its table printed a real +0.79 % as "+0.78 % ± 1.13 %", as if it were
noise. When what the runs measured (`measured_noise.measured`) is `thresholds.quiet` (a
quarter) of the prior or less, the verdict names the figure, how much too wide its intervals
are, the `thresholds: {noise: ...}` that would let the search read differences of that size,
and which gains read clear of it there. The seed's rules stay the default: this is said,
never acted on."""

from __future__ import annotations

import math

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.evidence.board import Z95, Board
from sweepd.kinds.xla_tuning.evidence.measured_noise import Measured, measured
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.verdict.structure import Caveat, CaveatKind

RULE = rule_book.QUIET.id
# The noise suggested is this many times what the runs measured (room for the estimate's own
# error: a run's steps read its noise within ~3x either way, the chip's 3x above the spread
# between its runs, the simulator's 3x below), never below SUGGEST_FLOOR: the chip's runs
# agreed within 0.03 % over a day, and drift over days is in no sweep's runs (model_perf's
# `quiet_note` suggests no noise_floor below it either).
SUGGEST_MARGIN = 2.0
SUGGEST_FLOOR = 0.0005
SUGGEST_STEP = 0.0001   # rounded up to this (thresholds.noise reads it to 4 decimals)
SHOWN = 3               # gains clear of the noise named, the best first


def quiet_caveat(inp: Inputs, board: Board) -> Caveat | None:
    """Caveat QUIET where the runs measured `inp.quiet` of `inp.noise` or less and the noise
    it would suggest is below `inp.noise`; else None."""
    m = measured(board)
    if m is None or m.value > inp.quiet * inp.noise:
        return None
    suggest = suggested(m.value)
    if suggest >= inp.noise:
        return None   # the spec already asks for as little noise as it would suggest
    clear = clear_gains(inp, board, suggest)
    factor = board.noise / m.value if m.value > 0 else math.inf
    read_at = "" if _pct(board.noise) == _pct(inp.noise) else \
        f", {_pct(board.noise)} a run after its repeats"
    text = (f"the runs measured about {_pct(m.value)} run-to-run noise ({_source(m)}), far "
            f"below the {_pct(inp.noise)} the rules assume (thresholds.noise{read_at}): the "
            f"intervals here and in the table are ~{factor:.0f}x too wide, and gains of a "
            f"fraction of a percent read as noise; `thresholds: {{noise: {suggest:g}}}` would "
            f"let the search read them; {_clear_said(inp, clear)}")
    return Caveat(CaveatKind.QUIET, text, {
        "rule": RULE, "measured": m.value, "steps": m.steps, "step_runs": m.step_runs,
        "between": m.between, "df": m.df, "assumed": inp.noise, "read_at": board.noise,
        "factor": factor, "suggest": suggest,
        "clear": [{"profile": p, "delta": d} for p, d in clear]})


def suggested(noise: float) -> float:
    """The `thresholds.noise` the caveat suggests for a cell that measured `noise`."""
    return max(SUGGEST_FLOOR, math.ceil(noise * SUGGEST_MARGIN / SUGGEST_STEP - 1e-9)
               * SUGGEST_STEP)


def clear_gains(inp: Inputs, board: Board, noise: float) -> list[tuple[str, float]]:
    """The profiles on the primary tag whose gain over every run reads above zero at 95 %
    with `noise` a run, best first."""
    t = inp.tags[0]
    base = board.base(t)
    if base is None:
        return []
    out = []
    for e in board.measured(t):
        d = board.search_delta(e.profile, t)
        if d is not None and d - Z95 * noise * math.sqrt(1 / e.n + 1 / base.n) > 0:
            out.append((e.profile, d))
    return sorted(out, key=lambda x: -x[1])


def _clear_said(inp: Inputs, clear: list[tuple[str, float]]) -> str:
    """The gains clear of the noise, the SHOWN best named, each against the bounded bar."""
    if not clear:
        return "no gain reads clear of it at that noise"
    shown = clear[:SHOWN]
    more = f" (and {len(clear) - SHOWN} more)" if len(clear) > SHOWN else ""
    bar = f"the +{inp.bounded_gain:.0%} bar"
    above = [d >= inp.bounded_gain for _, d in shown]
    verb = "is" if len(clear) == 1 else "are"
    if all(above) or not any(above):
        named = ", ".join(f"{p} {d:+.2%}" for p, d in shown)
        return (f"at that noise {named}{more} {verb} real, "
                f"{'above' if all(above) else 'below'} {bar}")
    named = ", ".join(f"{p} {d:+.2%} ({'above' if up else 'below'} {bar})"
                      for (p, d), up in zip(shown, above, strict=True))
    return f"at that noise {named}{more} {verb} real"


def _source(m: Measured) -> str:
    """Which reading set the figure."""
    if m.between is not None and m.between >= (m.steps or 0.0):
        return f"from the spread between repeated runs, {m.df} degrees of freedom"
    # Steps miss drift between runs (a node a little slower today): a lower bound until a
    # setting runs twice, which the person is told.
    if m.between is None:
        return (f"from {m.step_runs} runs' own steps, a lower bound: no setting ran twice to "
                "measure the drift between runs")
    return f"from {m.step_runs} runs' own steps"


def _pct(x: float) -> str:
    """A noise figure in percent to two significant figures (0.03%, 0.8%, 0.72%)."""
    return f"{x * 100:.2g}%"
