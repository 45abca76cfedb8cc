"""`sweepd report ID --tuning-md [PATH] [--apply [FILE]]` on an xla-tuning sweep (the kind's
client action, `ClientHooks.report_action`; `report_extras` is what the daemon serves for it).

Both files are written here, by the CLI, as model perf's `--apply` is: `<MODEL_TAG>-tuning.md`
goes where the person runs the command (a file the daemon cannot see: extending it means
reading it first), and the env-file patch is written with the person's own permissions
into the checkout the daemon names. The daemon only serves the data (the report's
`tuning` part: the same leaderboard, verdict and cell the JSON report carries).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput, ReportFlag, output_path
from sweepd.kinds.xla_tuning import report as xla_report
from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.deploy import sourced
from sweepd.kinds.xla_tuning.deploy.hooks_apply import ApplyError, apply_env_patch
from sweepd.kinds.xla_tuning.deploy.job_overrides import job_overrides
from sweepd.kinds.xla_tuning.inventory import since_sweep
from sweepd.kinds.xla_tuning.reporting import tuning_md
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import Job, Run, Sweep
from sweepd.util import person_commit, person_files

# `sweepd report`'s options this kind takes (`ClientHooks.report_flags`).
REPORT_FLAGS = (
    ReportFlag("--apply", "the recipe, guarded by parallelism, into configs/MODEL.env.sh of "
                          "the daemon's submit.sh checkout (or this FILE)", acts=True,
               options={"type": Path, "nargs": "?", "const": THE_CHECKOUT, "metavar": "FILE"}),
    ReportFlag("--force", "with --apply: write a conditional verdict, a read-only env file, "
                          "or over settings the env file changed since the sweep, too",
               options={"action": "store_true"}),
    ReportFlag("--commit", "with --apply: commit the file written in its repo (never on the "
                           "default branch)", options={"action": "store_true"}),
    ReportFlag("--tuning-md", "write <MODEL_TAG>-tuning.md here (default: in the current "
                              "directory); a file covering another parallelism is extended, "
                              "with the sign-flip table", acts=True,
               options={"type": output_path, "nargs": "?", "const": Path(), "metavar": "PATH"},
               completes_files=True),
)


def report_extras(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
                  repo: Path | None) -> dict[str, Any]:
    """What `report --tuning-md` and `--apply` write (the CLI writes both files): the
    leaderboard, verdict and `<MODEL_TAG>-tuning.md` cell, and the checkout's env file."""
    tuning = xla_report.report_json(sweep, runs, jobs)
    tuning["env_file"] = (str(repo / "configs" / f"{tuning['model']}.env.sh")
                          if repo is not None else None)
    tuning["job_overrides"] = _job_overrides(sweep)
    return {"tuning": tuning}


def _job_overrides(sweep: Sweep) -> dict[str, str] | None:
    """The MaxText overrides the cell's jobs passed (the primary tag's, built by the
    planner's own `job_overrides`): `--apply` sources the patched file with them, as those
    jobs did."""
    try:
        spec = XlaTuningSpec.from_stored(sweep.spec)
        assert isinstance(spec, XlaTuningSpec)
        over = job_overrides(spec, next(iter(spec.config_tags)))
    except (ValueError, KeyError, AssertionError, StopIteration):
        return None
    return {k: str(v) for k, v in over.items()}


def run(args: argparse.Namespace, report: dict[str, Any], io: ClientOutput) -> int:
    """`report` is the JSON report of an xla-tuning sweep."""
    tuning = report.get("tuning")
    if not isinstance(tuning, dict):
        return io.fail(args, f"sweep {args.id}: the daemon's report carries no tuning data "
                          "(a daemon older than this CLI? restart it)")
    out: dict[str, Any] = {}
    if args.tuning_md is not None:
        code = _write_md(args, tuning, out, io)
        if code:
            return code
    if args.apply is not None:
        code = _apply(args, tuning, out, io)
        if code:
            return code
    if args.json:
        io.print_json(out)
    return 0


def md_path(given: Path, model: str) -> Path:
    """The file to write: `<MODEL_TAG>-tuning.md` in the cwd, or in a directory given."""
    if given == Path() or given.is_dir():
        return given / f"{model}-tuning.md"
    return given


def _write_md(args: argparse.Namespace, tuning: dict[str, Any], out: dict[str, Any],
              io: ClientOutput) -> int:
    path = md_path(args.tuning_md, str(tuning["model"]))
    cell = tuning_md.cell_from_json(tuning["cell"])
    covered: list[str] = []

    def change(existing: str | None) -> str:
        covered[:] = tuning_md.parallelisms(existing) if existing is not None else []
        return tuning_md.write_or_extend(existing, cell, str(tuning["guard"]))

    if not path.parent.is_dir():
        return io.fail(args, f"cannot write {path}: there is no directory {path.parent}")
    try:
        person_files.edit(path, change, create=True)
    except person_files.PersonFileError as e:
        return io.fail(args, str(e))
    others = [p for p in covered if p != cell.parallelism]
    how = (f"extended with {cell.parallelism} (sign flips vs {', '.join(others)})" if others
           else f"written ({cell.parallelism})")
    out["tuning_md"] = {"path": str(path), "parallelism": cell.parallelism,
                        "extended": bool(others), "covers": sorted({*others,
                                                                    cell.parallelism})}
    io.say(f"{path}: {how}", err=True)
    return 0


def conditional_refusal(sweep_id: int, verdict: dict[str, Any]) -> str | None:
    """Why a conditional verdict is not applied without --force (None: it is not)."""
    if not verdict.get("conditional"):
        return None
    regressed = _regressed(verdict)
    reason = str(verdict.get("conditional_reason") or "")
    if regressed:
        why = (f"it regresses config tag {', '.join(map(str, regressed))} by more than the "
               "limit")
    elif reason:
        why = reason
    else:
        why = "its confirmation or Wave 6 was not done before the sweep stopped"
    return (f"sweep {sweep_id}'s verdict is conditional ({why}): --apply refuses it; "
            "add --force to write it anyway")


def _apply(args: argparse.Namespace, tuning: dict[str, Any], out: dict[str, Any],
           io: ClientOutput) -> int:
    model, par = str(tuning["model"]), str(tuning["parallelism"])
    verdict = tuning.get("verdict") or {}
    plan = tuning.get("deploy")
    if not isinstance(plan, dict):
        reason = verdict.get("reason") or "the sweep has not finished"
        return io.fail(args, f"sweep {args.id} proposes no deployment to apply ({reason})")
    if "error" in plan:
        return io.fail(args, f"sweep {args.id}: the recipe cannot be deployed: {plan['error']}")
    refusal = conditional_refusal(args.id, verdict)
    if refusal and not getattr(args, "force", False):
        return io.fail(args, refusal)
    target = _target(args.apply, tuning.get("env_file"))
    wrong = _wrong_target(args.id, target, model)
    if wrong or target is None:
        return io.fail(args, wrong or "no target")
    winner = tuning.get("winner")
    if getattr(args, "commit", False):
        try:
            person_commit.branch_of(target)  # refused before anything is written
        except person_commit.CommitError as e:
            return io.fail(args, str(e))
    forced = _forced_note(verdict) if refusal else []
    force = bool(getattr(args, "force", False))
    try:
        cell = Parallelism.parse(str(plan["parallelism"]))
        over = tuning.get("job_overrides")
        jobs = sourced.cell_jobs(target, model, cell, over if isinstance(over, dict) else None)
        # Settings the person changed since the sweep would run beside the recipe unmeasured.
        stop, notes = since_sweep.check(args.id, target, jobs[0].passthrough,
                                        verdict.get("inventory"),
                                        [str(line) for line in plan["lines"]], force)
        if stop:
            return io.fail(args, stop)
        forced += notes
        # One block per model and parallelism: a later sweep's recipe replaces it.
        block = apply_env_patch(target, model, cell, [
            f"# sweep {args.id}: {winner}, {_gain(tuning)} vs baseline-deployed", *forced],
            [str(line) for line in plan["lines"]], force=force, jobs=jobs)
    except (ApplyError, ValueError) as e:
        return io.fail(args, str(e))
    out["applied"] = {"path": str(target), "block": block,
                      "proven_for": [j.name for j in jobs]}
    io.say(f"{target}: the {par} recipe written (guarded by parallelism and model), in "
           f"effect when sourced as {', '.join(j.name for j in jobs)}:\n{block}",
           err=bool(args.json))
    for note in forced:
        io.say(note.removeprefix("# "), err=bool(args.json))
    shared = _shared(target, model)
    if shared:
        out["applied"]["shared"] = shared
        io.say(shared, err=bool(args.json))
    if getattr(args, "commit", False):
        message = (f"{model} {par}: XLA recipe {winner} from sweepd sweep {args.id} "
                   f"({verdict.get('kind', 'verdict')}: {_gain(tuning)} vs baseline-deployed)")
        try:
            where = person_commit.commit(target, message)
        except person_commit.CommitError as e:
            return io.fail(args, str(e))
        out["committed"] = where
        io.say(f"committed on {where}: {message}", err=bool(args.json))
    return 0


def _regressed(verdict: dict[str, Any]) -> list[Any]:
    """The config tags a conditional verdict regresses. The verdict's `conditional` is a
    bool, the regressing tags are `regressed`, the rest of what it lacks is
    `conditional_reason` (a list in `conditional`: older verdicts)."""
    cond = verdict.get("conditional")
    return list(verdict.get("regressed") or (cond if isinstance(cond, list) else []))


def _forced_note(verdict: dict[str, Any]) -> list[str]:
    """A conditional verdict written with --force says, in the block and on the terminal,
    what it was written without: an env file cannot tell config tags apart (they are MaxText
    overrides, not its environment), so the block applies to every tag of the parallelism."""
    regressed = _regressed(verdict)
    if regressed:
        return [f"# written with --force: applies to every config tag of this parallelism, "
                f"including {', '.join(map(str, regressed))}, which it regresses by more "
                "than the limit"]
    why = str(verdict.get("conditional_reason") or "its confirmation or Wave 6 was not done")
    return [f"# written with --force: conditional ({why})"]


def _shared(target: Path, model: str) -> str | None:
    """A link's target may be every model's env file: say so (the block is written there,
    and applies only when sourced as this model's)."""
    if not target.is_symlink():
        return None
    real = target.resolve()
    # The other links in the directory to the same file (the file itself is not one).
    others = sorted(str(p) for p in target.parent.glob("*.env.sh")
                    if p.name != target.name and p.is_symlink() and p.resolve() == real)
    return (f"{target} is a link to {real}: the block is in that file"
            + (f", shared with {', '.join(others)}" if others else "")
            + f"; it applies only to jobs that source it as {model}.env.sh")


def _wrong_target(sweep_id: int, target: Path | None, model: str) -> str | None:
    if target is None:
        return (f"sweep {sweep_id}: no checkout to apply to (the daemon runs no submit.sh "
                "repo: cluster.slurm mode = submit_sh and repo); give the file: --apply "
                f"REPO/configs/{model}.env.sh")
    if target.name != f"{model}.env.sh":
        # A recipe is only valid for the model it was measured on.
        return (f"sweep {sweep_id} tuned {model}; {target} is not {model}'s env file "
                f"(expected configs/{model}.env.sh)")
    return None


def _target(given: Path, env_file: object) -> Path | None:
    if given != THE_CHECKOUT:
        return given
    return Path(env_file) if isinstance(env_file, str) else None


def _gain(tuning: dict[str, Any]) -> str:
    gain = (tuning.get("verdict") or {}).get("gain")
    return f"{gain:+.2%}" if isinstance(gain, int | float) else "gain not recorded"
