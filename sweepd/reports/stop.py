"""The stop message, in the xla-tuning SKILL.md's TG-stop format."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from sweepd.store.rows import Job, Run, Sweep


def stop_message(sweep: Sweep, reason: str, failing_nodes: Sequence[str], recovery: str,
                 outcome: str, nodelist: str, runs: Sequence[Run], jobs: Sequence[Job],
                 nodes_short: int = 0, own: tuple[str, list[str]] | None = None,
                 node_evidence: Sequence[str] = (), spec_refused: bool = False,
                 waiting_node: str | None = None) -> str:
    """`nodes_short`: how many usable nodes the sweep lacks to go on (a plain resume would
    be refused, so the message asks for a node back instead). `own`: the kind's title and
    state lines (Kind.stops.state), in place of the generic ones. `node_evidence`: what the
    failing nodes themselves said (scontrol, dmesg, rocm-smi, a NIC reset), as stored.
    `spec_refused`: the spec itself made the submission impossible, so no resume is offered.
    `waiting_node`: the host a collective or coordination timeout printed on: the first rank
    left waiting, named as that and not as failing (the failure is usually another node's)."""
    spec = sweep.spec
    passed = sorted((r for r in runs if r.outcome == "pass" and r.tgs is not None),
                    key=lambda r: -(r.tgs or 0.0))
    pending = [r.label for r in runs if r.state in ("pending", "active")]
    title = own[0] if own else \
        f"[{sweep.kind} STOP] {spec.get('model', sweep.name)} sweep {sweep.id} halted"
    lines = [
        title,
        "",
        f"Reason: {reason}",
        f"Failing node(s): {', '.join(failing_nodes) or 'none identified'}"
        + (f" ({waiting_node} is only the first rank left waiting when the timeout struck: a "
           "timeout names who waited, not who failed)" if waiting_node else "")
        + f"; recovery attempted: {recovery}; outcome: {outcome}",
        "",
        "Sweep state at stop:",
        f"  - Nodelist: {nodelist}",
    ]
    if node_evidence:
        lines[5:5] = ["Node evidence:", *node_evidence, ""]
    lines += own[1] if own else _state(runs, passed, pending)
    lines += [
        "",
        f"Artifacts: {_artifacts(jobs)}",
        *(["The spec itself cannot be submitted: a resume would be refused the same way.",
            f"Correct the spec (`sweepd validate SPEC` checks it without a daemon), submit it "
            f"as a new sweep, and end this one: /abort {sweep.id}."] if spec_refused else
          ["Awaiting your decision before resuming.", _how_to_answer(sweep.id, nodes_short)]),
    ]
    return "\n".join(lines)


def _artifacts(jobs: Sequence[Job]) -> str:
    """Where the jobs' logs are, as each job's row says: sweepd's outputs in direct mode,
    the person's JOB_WORKSPACE (Slurm's StdOut) in submit.sh mode."""
    by_dir: dict[str, list[str]] = {}
    for j in jobs:
        if j.log_path and j.backend_id:
            by_dir.setdefault(str(PurePath(j.log_path).parent), []).append(j.backend_id)
    spans = []
    for where, ids in by_dir.items():
        ids.sort(key=lambda i: (len(i), i))   # scheduler ids: numeric order
        spans.append(f"{where}/{ids[0]}-*" if len(ids) == 1
                     else f"{where}/{ids[0]}-* through {where}/{ids[-1]}-*")
    return "; ".join(spans) or "none yet (no job of this sweep has a log)"


def _state(runs: Sequence[Run], passed: Sequence[Run], pending: Sequence[str]) -> list[str]:
    lines = [
        f"  - Runs finished so far: {sum(r.state in ('passed', 'failed') for r in runs)}"
        + (f" (top {min(3, len(passed))} below)" if passed else ""),
    ]
    if passed:
        lines.append(f"  - Best so far: {passed[0].label} @ {passed[0].tgs:,.0f} TGS/device")
        lines += [f"  - {r.label} @ {r.tgs:,.0f}" for r in passed[1:3]]
    lines.append(f"  - Pending runs: {', '.join(pending) or 'none'}"
                 + (" (held: they run on resume)" if pending else ""))
    return lines


def _how_to_answer(sweep_id: int, nodes_short: int) -> str:
    if nodes_short > 0:
        return (f"Resume needs {nodes_short} more usable node(s): put an excluded one back "
                f"with `sweepd resume {sweep_id} --readmit NODE`; or end it: /abort {sweep_id}.")
    return (f"Resume: /resume {sweep_id} [NODE to exclude ...] or `sweepd resume {sweep_id} "
            f"[--exclude NODE ...]`; end it: /abort {sweep_id}.")
