"""`<MODEL_TAG>-tuning.md` (xla-tuning.SKILL.md Step 8): the ten sections, from typed data.

Run again for another parallelism, `extend` appends that cell's sections, a TL;DR row and
the sign-flip table; each cell's per-profile deltas ride along in a comment at the end, so a
later cell can be compared flag by flag without re-reading tables. Run again for the same
parallelism (a partial file, then the final one), its sections are replaced, not repeated.

Pure text in, text out: the CLI writes the file where the person runs it, from the cell the
daemon's report carries (`cell_from_json`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, replace
from typing import Any

_DELTAS = re.compile(r"<!-- sweepd:deltas (.*?) -->")
TOP, BOTTOM = 8, 5


@dataclass(frozen=True)
class Job:
    job_id: str
    profile: str
    tag: str
    status: str  # ok, oom (allocation), unknown flag (name), not applied (culprit), flake
    tgs: float | None = None
    step_s: float | None = None
    loss: float | None = None


@dataclass(frozen=True)
class Standing:
    profile: str
    flags: str  # the settings, as they reach the job
    tgs: float
    step_s: float | None  # None: the log printed no step time
    delta: float  # vs baseline-deployed
    n: int
    job_ids: tuple[str, ...]
    loss_shift: bool = False  # loss at the last step moved beyond noise
    se: float = 0.0  # standard error of the delta (0: unknown, every delta counts)
    # The verdict's recipe: its delta is the claim, from the runs that did not select it
    # (the runs that ranked it first read high: the winner's curse); this says so.
    claim: str = ""

    @property
    def beyond_noise(self) -> bool:
        return abs(self.delta) > 2 * self.se

    @property
    def confirmed(self) -> bool:
        """Measured more than once and beyond noise: a delta a sign flip may rest on."""
        return self.n >= 2 and self.beyond_noise


@dataclass(frozen=True)
class Cell:
    model_tag: str
    parallelism: str
    tag: str  # the primary config tag
    header: dict[str, str]  # date, hardware, image, branch, base config, seq len, steps, metric
    inventory: str
    env_effect: str  # the Wave 1 result, one paragraph
    board: tuple[Standing, ...]  # measured profiles, best first
    winner: str | None
    why: str  # mechanism, from the evidence run (job id, HLO artifact)
    verdict: str
    patch: str  # proposed env-file lines
    jobs: tuple[Job, ...]
    guard: str = ""  # e.g. `[[ "${MAXTEXT_DCN_PP:-1}" -le 1 ]]` when recipes conflict

    def deltas(self) -> dict[str, float]:
        """The confirmed deltas (the sign-flip table compares only those)."""
        return {s.profile: round(s.delta, 4) for s in self.board if s.confirmed}


def cell_to_json(cell: Cell) -> dict[str, Any]:
    return asdict(cell)


def cell_from_json(data: dict[str, Any]) -> Cell:
    """The cell the JSON report carries, typed again (tuples where the JSON has lists)."""
    board = tuple(Standing(**{**s, "job_ids": tuple(s["job_ids"])}) for s in data["board"])
    jobs = tuple(Job(**j) for j in data["jobs"])
    return Cell(**{**data, "header": dict(data["header"]), "board": board, "jobs": jobs})


def parallelisms(text: str) -> list[str]:
    """The parallelisms a file already covers (its trailer's keys)."""
    match = _DELTAS.search(text)
    return sorted(json.loads(match.group(1))) if match else []


def write_or_extend(existing: str | None, cell: Cell, guard: str) -> str:
    """The file's new text: a fresh one, or `existing` with this cell added (its patch then
    guarded by parallelism) or replaced (the same parallelism written again)."""
    if existing is not None and cell.parallelism in parallelisms(existing):
        existing = drop(existing, cell.parallelism)
    if existing is None or not parallelisms(existing):
        return write(cell)
    return extend(existing, replace(cell, guard=guard))


def drop(text: str, parallelism: str) -> str | None:
    """`text` without one parallelism's sections, TL;DR row and deltas; None when nothing
    of another parallelism is left."""
    match = _DELTAS.search(text)
    deltas: dict[str, Any] = json.loads(match.group(1)) if match else {}
    deltas.pop(parallelism, None)
    if not deltas:
        return None
    kept: list[str] = []
    skipping, section = False, ""
    for line in _DELTAS.sub("", text).rstrip().split("\n"):
        if line.startswith("## "):
            # A sign-flip table belongs to the cell whose sections it sits among.
            skipping = line.endswith((f" ({parallelism})", f" on {parallelism}")) or (
                skipping and line.startswith("## Sign flips"))
            section = line
        mine = line.startswith(f"| {parallelism} |") or (
            section == "## TL;DR" and line.startswith(f"{parallelism}: "))
        if not skipping and not mine:
            kept.append(line)
    return "\n".join(kept).rstrip() + "\n" + _trailer(deltas)


def write(cell: Cell) -> str:
    head = [f"# {cell.model_tag} XLA / NCCL tuning", ""]
    head += [f"- {k}: {v}" for k, v in cell.header.items()] + [""]
    tldr = ["## TL;DR", "", "| Parallelism | Config | Best recipe | TGS | Δ vs baseline-deployed "
            "| Jobs |", "|---|---|---|---|---|---|", _tldr_row(cell), "", _why_line(cell), ""]
    return "\n".join(head + tldr) + "\n" + _cell_sections(cell, None) + _trailer(
        {cell.parallelism: cell.deltas()})


def extend(existing: str, cell: Cell) -> str:
    """Add another parallelism: its sections, a TL;DR row, and the sign-flip table."""
    match = _DELTAS.search(existing)
    prior: dict[str, dict[str, float]] = json.loads(match.group(1)) if match else {}
    prior.pop(cell.parallelism, None)
    body = _DELTAS.sub("", existing).rstrip() + "\n\n"
    lines = body.split("\n")
    at = max(i for i, ln in enumerate(lines) if ln.startswith("| ")
             and i < _index(lines, "## Inventory"))
    lines.insert(at + 1, _tldr_row(cell))
    body = "\n".join(lines)
    merged = {**prior, cell.parallelism: cell.deltas()}
    return body + _cell_sections(cell, prior) + _trailer(merged)


def _index(lines: list[str], prefix: str) -> int:
    return next((i for i, ln in enumerate(lines) if ln.startswith(prefix)), len(lines))


def _tldr_row(cell: Cell) -> str:
    best = next((s for s in cell.board if s.profile == cell.winner), None)
    if best is None:
        return f"| {cell.parallelism} | {cell.tag} | none ({cell.verdict}) | — | — | — |"
    return (f"| {cell.parallelism} | {cell.tag} | `{best.flags}` ⭐ | {best.tgs:.1f} | "
            f"{best.delta:+.2%}{best.claim} | {', '.join(best.job_ids)} |")


def _why_line(cell: Cell) -> str:
    return f"{cell.parallelism}: {cell.why if cell.winner else cell.verdict}"


def _cell_sections(cell: Cell, prior: dict[str, dict[str, float]] | None) -> str:
    p = cell.parallelism
    out = [f"## Inventory ({p})", "", cell.inventory, "",
           f"## Effect of {cell.model_tag}.env.sh on {p}", "", cell.env_effect, "",
           f"## Tuning leaderboard ({p})", "", *_leaderboard(cell), "",
           f"## Why the winning flag wins ({p})", "", cell.why if cell.winner else cell.verdict,
           "", f"## Negative findings ({p})", "", *_negatives(cell), ""]
    if prior:
        out += ["## Sign flips vs other parallelisms", "", *_sign_flips(cell, prior), ""]
    out += [f"## Recommended deployment ({p})", "", *_patch(cell), "",
            f"## Appendix: data sources ({p})", "", "| Job | Profile | Config | Status | TGS |",
            "|---|---|---|---|---|"]
    for j in sorted(cell.jobs, key=lambda j: (len(j.job_id), j.job_id)):
        tgs = f"{j.tgs:.1f}" if j.tgs is not None else "—"
        out.append(f"| {j.job_id} | {j.profile} | {j.tag} | {j.status} | {tgs} |")
    return "\n".join(out) + "\n"


def _row(rank: int, s: Standing, winner: str | None) -> str:
    star = " ⭐" if s.profile == winner else ""
    loss = " (loss moved)" if s.loss_shift else ""
    step = f"{s.step_s:.2f}" if s.step_s is not None else "—"
    return (f"| {rank} | {s.profile}{star} ({', '.join(s.job_ids)}) | `{s.flags}` | "
            f"{s.tgs:.1f} | {step} | {s.delta:+.2%}{s.claim}{loss} | {s.n} |")


def _leaderboard(cell: Cell) -> list[str]:
    head = ["| # | Profile (jobs) | Flags | TGS | step (s) | Δ% vs baseline-deployed | n |",
            "|---|---|---|---|---|---|---|"]
    ranked = list(enumerate(cell.board, 1))
    shown = ranked if len(ranked) <= TOP + BOTTOM else ranked[:TOP] + ranked[-BOTTOM:]
    return head + [_row(i, s, cell.winner) for i, s in shown]


def _negatives(cell: Cell) -> list[str]:
    bad = sorted((s for s in cell.board if s.delta < 0 and s.beyond_noise),
                 key=lambda s: s.delta)  # a loss within noise is no finding
    dropped = [j for j in cell.jobs if j.status not in ("ok", "flake", "pending")]
    lines = [f"- {s.profile} (`{s.flags}`): {s.delta:+.2%} ± {s.se:.2%} (n={s.n})"
             for s in bad]
    lines += [f"- {j.profile} ({j.job_id}): {j.status}" for j in dropped]
    return lines or ["- none"]


def _sign_flips(cell: Cell, prior: dict[str, dict[str, float]]) -> list[str]:
    others = sorted(prior)
    lines = ["| Profile | " + " | ".join([*others, cell.parallelism]) + " | flip |",
             "|---|" + "---|" * (len(others) + 2)]
    mine = cell.deltas()
    for prof in sorted(set(mine) & {k for d in prior.values() for k in d}):
        vals = [prior[o].get(prof) for o in others] + [mine[prof]]
        if all(v == 0 for v in vals):
            continue  # the reference itself (baseline-deployed): 0 by definition
        signs = {v > 0 for v in vals if v is not None and abs(v) >= 0.005}
        cells = " | ".join("—" if v is None else f"{v:+.2%}" for v in vals)
        lines.append(f"| {prof} | {cells} | {'yes' if len(signs) > 1 else ''} |")
    return lines


def guarded(patch: str, guard: str) -> list[str]:
    """The patch's lines, inside `if <guard>; then ... fi` when a guard is given."""
    body = patch.strip().splitlines()
    if deploy_guarded(body):  # the patch carries its cell's guard already
        return body
    return [f"if {guard}; then", *("    " + ln for ln in body), "fi"] if guard else body


def deploy_guarded(lines: list[str]) -> bool:
    return any(ln.startswith('_sweepd_par=""') for ln in lines)


def _patch(cell: Cell) -> list[str]:
    if not cell.winner or not cell.patch.strip():
        return ["No change: nothing beat baseline-deployed beyond noise."]
    body = guarded(cell.patch, cell.guard)
    return [f"Proposed `configs/{cell.model_tag}.env.sh` patch:", "", "```bash", *body, "```"]


def _trailer(deltas: dict[str, dict[str, float]]) -> str:
    return f"\n<!-- sweepd:deltas {json.dumps(deltas, sort_keys=True)} -->\n"
