"""The xla-tuning report: the leaderboard (table, JSON rows, plot), the JSON report and
`<MODEL_TAG>-tuning.md`. What it is built from is `report_view.py`'s (every number from the
store, as the planner saw it); the tuning.md cell's sections are `report_sections.py`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.kinds.xla_tuning.evidence.results import EVIDENCE
from sweepd.kinds.xla_tuning.plot import delta_bars
from sweepd.kinds.xla_tuning.reporting import tuning_md
from sweepd.kinds.xla_tuning.reporting.report_sections import cell, deployment, guard_for
from sweepd.kinds.xla_tuning.reporting.report_view import leaderboard, recorded_settings, view
from sweepd.store.rows import Job, Run, Sweep


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """One row per profile and config tag, best first: the leaderboard the JSON carries."""
    return leaderboard(view(sweep, runs, jobs))


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    table = rows(sweep, runs, jobs)
    if not table:
        return "No run has finished yet."
    winner = (sweep.verdict or {}).get("recipe")
    own = {f"{k}={x}" for k, x in (sweep.spec.get("env") or {}).items()}  # every job's
    sent = {name: " ".join(w for w in text.split() if w not in own)
            for name, text in recorded_settings(runs).items()}
    # The Δ here reads every run of a profile (the search's reading); the verdict's gain is
    # its confirmation's, said in the verdict with its interval.
    lines = ["| Profile | Flags | Config | TGS | n | Δ vs the job as deployed (all runs) | "
             "Jobs | Fate |", "|---|---|---|---|---|---|---|---|"]
    for r in table:
        tgs = f"{r['tgs']:.1f}" if r["tgs"] is not None else "—"
        delta = f"{r['delta']:+.2%} ± {r['se']:.2%}" if r["delta"] is not None else "—"
        fate = r["fate"] + (f" ({r['detail']})" if r["detail"] else "")
        star = " ⭐" if r["profile"] == winner and r["tag"] == table[0]["tag"] else ""
        lines.append(f"| {r['profile']}{star} | {_flags(r['profile'], sent)} | {r['tag']} | "
                     f"{tgs} | {r['n']} | {delta} | "
                     f"{', '.join(r['job_ids']) or '—'} | {fate} |")
    model = sweep.spec.get("model")
    lines += ["", f"`sweepd report {sweep.id} --tuning-md` writes {model}-tuning.md here"
              + (f"; `--apply` writes the {winner} recipe, guarded by parallelism, into "
                 f"configs/{model}.env.sh" if winner else "") + "."]
    return "\n".join(lines)


def _flags(profile: str, sent: dict[str, str]) -> str:
    """The settings a profile's jobs were sent (a stack's from its parts); the baseline and
    the evidence run send none of their own."""
    if profile in sent:
        shown = sent[profile]
    else:
        shown = " ".join(sent.get(part, "") for part in profile.split("+")).strip()
    shown = " ".join(w for w in shown.split() if not w.startswith("ENABLE_XLA_DUMP="))
    return f"`{shown}`" if shown else "— (as deployed)"


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """Δ% bars vs baseline-deployed on the primary tag, each with its noise whisker."""
    v = view(sweep, runs, jobs)
    bars = [(r["profile"], r["delta"], r["se"]) for r in leaderboard(v)
            if r["tag"] == v.primary and r["delta"] is not None and r["profile"] != EVIDENCE]
    if not bars:
        return None
    winner = (sweep.verdict or {}).get("recipe")
    title = f"{v.spec.model} {v.spec.parsed_parallelism().text} ({v.primary})"
    return delta_bars(bars, winner if isinstance(winner, str) else None, title)


def report_json(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> dict[str, Any]:
    """The JSON report: the same cell the markdown file is written from (`cell`, which the
    CLI writes `<MODEL_TAG>-tuning.md` from), and the env-file patch `--apply` writes: the
    winner's lines guarded by parallelism (empty: nothing to deploy)."""
    v = view(sweep, runs, jobs)
    c = cell(sweep, v)
    guard = guard_for(v.spec)
    return {"model": v.spec.model, "parallelism": c.parallelism, "tag": c.tag,
            "header": c.header, "verdict": sweep.verdict, "noise": v.board.noise,
            "leaderboard": leaderboard(v), "winner": c.winner, "patch": c.patch,
            "guard": guard, "env_patch": c.patch if c.winner else "",
            "deploy": deployment(v, c.winner),
            "jobs": [j.__dict__ for j in c.jobs], "cell": tuning_md.cell_to_json(c)}


def write_tuning_md(directory: Path, sweep: Sweep, runs: Sequence[Run],
                    jobs: Sequence[Job]) -> Path:
    """Writes `<MODEL_TAG>-tuning.md`, or extends it with this parallelism (a guarded patch
    and the sign-flip table) when it already covers another."""
    v = view(sweep, runs, jobs)
    path = directory / f"{v.spec.model}-tuning.md"
    existing = path.read_text("utf-8") if path.is_file() else None
    path.write_text(tuning_md.write_or_extend(existing, cell(sweep, v), guard_for(v.spec)),
                    "utf-8")
    return path


def stop_files(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
               directory: Path) -> str | None:
    """Kind.stops.files: the SKILL.md's partial `<MODEL_TAG>-tuning.md` at a stop, from what
    ran so far, in the sweep's directory (the person's copy comes from `report
    --tuning-md`, where they run it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_tuning_md(directory, sweep, runs, jobs)
    return (f"Partial report (what ran so far): {path}; `sweepd report {sweep.id} "
            "--tuning-md` writes it where you are")
