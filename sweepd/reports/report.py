"""A sweep's report, in Markdown and JSON, built only from the store's rows.

The kind's part of it (its table, the same rows as JSON) comes from the `KindRenderer` the
caller hands in (`kinds.registry.Report`): the reports name no kind and no registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from sweepd.reports.run_table import run_rows
from sweepd.store.rows import Event, Job, Run, Sweep
from sweepd.util.text import escape


class KindRenderer(Protocol):
    """What a kind shows of its sweep in the report: its Markdown table, the same rows as
    JSON, and whether the sweep names one model (False: a sweep of many models)."""

    @property
    def table(self) -> Callable[[Sweep, Sequence[Run], Sequence[Job]], str]: ...

    @property
    def rows(self) -> Callable[[Sweep, Sequence[Run], Sequence[Job]], list[dict[str, Any]]]: ...

    @property
    def one_model(self) -> bool: ...


def report_json(renderer: KindRenderer, sweep: Sweep, runs: Sequence[Run],
                jobs: Sequence[Job], exclusions: Sequence[str],
                stage_jobs: Sequence[Job] = ()) -> dict[str, Any]:
    """`stage_jobs`: a campaign's stage sweeps' jobs (it submits none of its own)."""
    return {
        "sweep": {"id": sweep.id, "kind": sweep.kind, "name": sweep.name, "state": sweep.state,
                  "reason": sweep.reason, "spec": sweep.spec},
        "verdict": sweep.verdict,
        "rows": renderer.rows(sweep, runs, jobs),
        "excluded_nodes": list(exclusions),
        "runs": run_rows(runs, jobs),   # one row per run (report --csv, compare)
        "jobs": len(jobs),
        **({"stage_jobs": len(stage_jobs)} if stage_jobs else {}),
    }


def report_markdown(renderer: KindRenderer, sweep: Sweep, runs: Sequence[Run],
                    jobs: Sequence[Job], exclusions: Sequence[str],
                    stage_jobs: Sequence[Job] = ()) -> str:
    spec = sweep.spec
    # Values from a spec, a scheduler or a log: one line each, control characters escaped
    # (a newline would break the Markdown; an escape sequence, a reader's terminal).
    lines = [f"# Sweep {sweep.id}: {escape(sweep.name)}", "",
             f"- Kind: {sweep.kind}",
             *([f"- Model: {escape(str(spec.get('model')))}"]
               if renderer.one_model else []),
             f"- Nodes: {escape(str(spec.get('nodes')))} (pinned)",
             f"- State: {sweep.state}" + (f" — {escape(sweep.reason)}" if sweep.reason else ""),
             f"- Jobs submitted: {_submitted(jobs)}"
             + (f" of its own, {_submitted(stage_jobs)} by its stage sweeps" if stage_jobs
                else "")]
    if exclusions:
        lines.append(f"- Excluded nodes: {escape(', '.join(exclusions))}")
    lines += ["", renderer.table(sweep, runs, jobs)]
    verdict = sweep.verdict or {}
    if verdict.get("proposal") and not verdict.get("settled", True):
        # A best so far (the budget ran out first) is not a result to write into a config.
        lines += ["", "No config change proposed: the verdict is the best so far, not "
                  "settled (the state line says what was left to run)."]
    elif verdict.get("proposal") and verdict.get("settings_form") == "overrides":
        # The local backend and direct mode: the person's runs take MaxText overrides, so
        # the change is one; a YAML config their train command reads can take it as a key.
        lines += ["", "Proposed change (add it to your train command's overrides, or "
                  f"`sweepd report {sweep.id} --apply FILE.yml` writes it into a YAML config "
                  "your train command reads):", "",
                  f"    {escape(str(verdict['proposal']))}"]
    elif verdict.get("proposal"):
        lines += ["", f"Proposed config change (`sweepd report {sweep.id} --apply "
                  f"REPO/configs/{spec.get('model')}.gpu.yml` writes it into that checkout):", "",
                  f"    {escape(str(verdict['proposal']))}"]
    return escape("\n".join(lines), keep_newlines=True) + "\n"


def _submitted(jobs: Sequence[Job]) -> str:
    """Jobs that reached the scheduler (they have its id); a job row refused before (or
    still being submitted) is named apart, never counted as submitted."""
    sent = sum(1 for j in jobs if j.backend_id)
    held = len(jobs) - sent
    return f"{sent}" + (f" ({held} more not accepted by the scheduler)" if held else "")


# Lines of one event's evidence `explain` shows after its first.
EVIDENCE_LINES = 30


def explain_lines(events: Sequence[Event], run_seq: Mapping[int, int]) -> list[str]:
    """`run_seq`: each run's number in its sweep, the `#` that `show` and reports use.
    Each piece of evidence is shown once: a node's evidence recorded on its note, the job's
    transition and the exclusion's decision reads `as above` after the first."""
    out = []
    said: set[tuple[object, ...]] = set()
    shown: dict[str, str] = {}   # a piece of evidence -> when it was first shown
    for e in events:
        if e.kind == "progress":
            continue
        this = (e.job_id, e.run_id, e.rule, e.reason, e.evidence)
        if e.kind == "decision" and this in said:
            continue   # the decision its transition already recorded, word for word
        said.add(this)
        what = f"{e.from_state or ''}→{e.to_state}" if e.to_state else e.kind
        target = (f"job {e.job_id}" if e.job_id else
                  f"run #{run_seq.get(e.run_id, e.run_id)}" if e.run_id else "sweep")
        reason = escape(e.reason.splitlines()[0] if e.reason else "")
        out.append(f"{e.at}  {target:<8} {what:<24} [{e.rule or '-'}] {reason}")
        if e.evidence:
            out += _evidence(e.evidence, e.at, shown)
    return out


def _pieces(text: str) -> list[list[str]]:
    """Evidence as its pieces: a line at the left margin and the indented lines under it
    (a node's `chi2863:` block, a log line)."""
    pieces: list[list[str]] = []
    for line in text.splitlines() or [""]:
        if pieces and line[:1].isspace():
            pieces[-1].append(line)
        else:
            pieces.append([line])
    return pieces


def _evidence(text: str, at: str, shown: dict[str, str]) -> list[str]:
    """An event's evidence lines, bounded; a piece shown earlier is one `as above` line.
    A node's evidence (scontrol, dmesg, rocm-smi, ibstat) is several lines: they are what
    answers "why was this node excluded?", so they are shown, bounded."""
    whole = f"whole:{text}"
    if whole in shown:   # the decision of a transition, on the same evidence
        return [f"{'':>26}evidence: as above ({shown[whole]})"]
    shown[whole] = at
    lines: list[str] = []
    for piece in _pieces(text):
        key = "\n".join(piece)
        if key in shown and len(piece) > 1:
            lines.append(f"{piece[0].strip()[:120]} (as above, {shown[key]})")
            continue
        shown.setdefault(key, at)
        lines += piece
    first, *more = lines
    out = [f"{'':>26}evidence: {escape(first[:300])}"]
    out += [f"{'':>36}{escape(line[:300])}" for line in more[:EVIDENCE_LINES]]
    if len(more) > EVIDENCE_LINES:
        out.append(f"{'':>36}… {len(more) - EVIDENCE_LINES} more line(s)")
    return out
