"""The batch script of direct mode: what maxtext-slurm's `_job.sbatch` does, minus the
container stages — log header, training under `srun -l`, JOB SUMMARY block
(maxtext-slurm-facts.md §1-2) — so the monitor reads the same log either way.

Pure: returns the script text; the backend writes it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sweepd.util.jobname import file_segment

SUMMARY_RULE = "=" * 26 + " JOB SUMMARY " + "=" * 26
SUMMARY_END = "=" * 65


@dataclass(frozen=True)
class BatchScript:
    job_name: str
    model: str
    passthrough: Sequence[str]
    env: Mapping[str, str]
    # Per-rank training command; the standard trainer arguments are appended to it.
    train_command: Sequence[str]
    # Optional commands printing the header / summary block; plain `echo`s when None.
    header_command: Sequence[str] | None = None
    summary_command: Sequence[str] | None = None
    commit: str | None = None
    sbatch_directives: Sequence[str] = field(default_factory=lambda: ["--ntasks-per-node=1"])
    # Appended to the XLA_FLAGS the job inherits (sbatch exports the submitter's).
    xla_flags: Sequence[str] = ()
    # The variable they go in (`JobRequest.flags_var`: LIBTPU_INIT_ARGS on TPU).
    flags_var: str = "XLA_FLAGS"
    # The directory the log goes to: the job's own outputs go to `<jobid>-<name>/` in it.
    output_dir: str | None = None


def _q(args: Sequence[str]) -> str:
    return shlex.join(list(args))


def _job_args(spec: BatchScript) -> str:
    """Arguments every toolkit-style command takes; `$SLURM_*` expand inside the job."""
    return (f'--job-id "$SLURM_JOB_ID" --job-name {shlex.quote(spec.job_name)} '
            f'--model {shlex.quote(spec.model)} --nodes "$SLURM_JOB_NODELIST"')


def _header(spec: BatchScript) -> list[str]:
    if spec.header_command:
        return [f"{_q(spec.header_command)} {_job_args(spec)} -- {_q(spec.passthrough)}"]
    passthrough = " ".join(spec.passthrough)
    return [
        'echo "JOB_ID=$SLURM_JOB_ID"',
        f"echo {shlex.quote('JOB_NAME=' + spec.job_name)}",
        'echo "NNODES=$SLURM_JOB_NUM_NODES"',
        'echo "JOB_NODELIST=$SLURM_JOB_NODELIST"',
        f"echo {shlex.quote(f'PASSTHROUGH_ARGS={chr(34)}{passthrough}{chr(34)}')}",
        f"echo {shlex.quote('MODEL_NAME=' + spec.model)}",
    ]


def _summary_fn(spec: BatchScript) -> list[str]:
    """`summary RC [FAILURE]` prints the JOB SUMMARY block."""
    if spec.summary_command:
        return [
            "summary() {",
            '    local failure=()',
            '    [[ -n ${2:-} ]] && failure=(--failure "$2")',
            f"    {_q(spec.summary_command)} {_job_args(spec)} "
            '--exit "$1" --wall $((SECONDS - START)) "${failure[@]}"',
            "}",
        ]
    return [
        "summary() {",
        "    local w=$((SECONDS - START)) status",
        "    case $1 in",
        '        0) status="SUCCESS (exit 0)" ;;',
        '        130|143) status="CANCELLED (scancel / SIGTERM)" ;;',
        '        *) status="FAILED (exit $1)${2:+ — $2}" ;;',
        "    esac",
        f"    echo {shlex.quote(SUMMARY_RULE)}",
        f'    echo "  Job:    $SLURM_JOB_ID ("{shlex.quote(spec.job_name)}")"',
        f"    echo {shlex.quote('  Model:  ' + spec.model)}",
        '    echo "  Nodes:  $SLURM_JOB_NODELIST"',
        '    printf "  Wall:   %dh %dm %ds\\n" $((w / 3600)) $((w % 3600 / 60)) $((w % 60))',
        '    echo "  Status: $status"',
        f"    echo {shlex.quote(SUMMARY_END)}",
        "}",
    ]


def _xla_flags(flags: Sequence[str], var: str = "XLA_FLAGS") -> list[str]:
    """`export XLA_FLAGS="${XLA_FLAGS:-}"' --a=1 --b=2'`: added to what the job inherits
    (in `var`: LIBTPU_INIT_ARGS on TPU, where libtpu reads its flags)."""
    if not flags:
        return []
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
        raise ValueError(f"flags_var {var!r} is not a shell variable name")
    return [f'export {var}="${{{var}:-}}"{shlex.quote(" " + " ".join(flags))}']


def _output_path(spec: BatchScript) -> list[str]:
    """`OUTPUT_PATH`, as the toolkit's `_job.sbatch` sets it: the job's directory beside its
    log (where the evidence run's HLO dump goes, `${OUTPUT_PATH}/xla_dump`). Unset, a
    trainer falls back to a path relative to the job's cwd, which is wherever sbatch ran;
    a run's own OUTPUT_PATH (its env) stays."""
    if spec.output_dir is None or "OUTPUT_PATH" in spec.env:
        return []
    return [f'export OUTPUT_PATH={shlex.quote(spec.output_dir)}/"$SLURM_JOB_ID"-'
            f"{shlex.quote(file_segment(spec.job_name))}"]


def render_batch_script(spec: BatchScript) -> str:
    train = [*spec.train_command]
    commit = f" --commit {shlex.quote(spec.commit)}" if spec.commit else ""
    lines = [
        "#!/bin/bash",
        *(f"#SBATCH {d}" for d in spec.sbatch_directives),
        "# Written by sweepd (direct mode): header, training under srun -l, JOB SUMMARY.",
        "START=$SECONDS",
        *(f"export {k}={shlex.quote(v)}" for k, v in spec.env.items()),
        *_xla_flags(spec.xla_flags, spec.flags_var),
        *_output_path(spec),
        *_header(spec),
        *_summary_fn(spec),
        # srun runs in the background so that scancel's SIGTERM reaches the trap at once
        # (bash defers traps while a foreground child runs).
        "SRUN_PID=",
        "on_term() {",
        '    [[ -n $SRUN_PID ]] && kill -TERM "$SRUN_PID" 2>/dev/null && wait "$SRUN_PID"',
        "    summary 143",
        "    exit 143",
        "}",
        "trap on_term TERM INT",
        'echo "== Training BEGIN =="',
        f"srun -l --kill-on-bad-exit=1 {_q(train)} {_job_args(spec)}{commit} "
        f"-- {_q(spec.passthrough)} &",
        "SRUN_PID=$!",
        'wait "$SRUN_PID"',
        "rc=$?",
        "SRUN_PID=",
        "if [[ $rc -eq 0 ]]; then",
        '    echo "== Training END ($((SECONDS - START))s) =="',
        "    summary 0",
        "else",
        '    echo "== Training FAILED (exit=$rc, $((SECONDS - START))s) =="',
        '    summary "$rc" "Training FAILED (exit=$rc)"',
        "fi",
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"
