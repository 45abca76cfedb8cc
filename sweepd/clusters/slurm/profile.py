"""submit.sh mode: a job's per-job profile (`JobRequest.profile`) as an arm in the toolkit's
`train_env.sh` (clusters/train_env/), and what a sweep's submissions left there.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

from sweepd.clusters import train_env
from sweepd.clusters.base import JobRequest, SubmitRefused
from sweepd.clusters.slurm.toolkit import resolve_model

# In a sweep's output directory: the train_env.sh files its submissions wrote arms into
# (one path a line), read back for the sweep's end message.
TRAIN_ENV_MARK = ".sweepd-train-env"


def profile_placement(repo: Path, request: JobRequest) -> train_env.Placement:
    """submit.sh mode: the request's profile as train_env.sh arms, and what the submission
    passes instead of its flags and env (`_env_TUNE_PROFILE=<name>`, `_env_K=V` for an env
    var the per-model env file also sets). Refused, nothing written, when a name or value
    is unsafe or when the per-model env file, sourced after train_env.sh, sets one of the
    profile's XLA flags: that flag would lose (last wins), so the run would measure nothing.
    An env var train_env.sh itself reads early (`ENABLE_XLA_DUMP`) is passed as `_env_` too."""
    assert request.profile is not None
    try:
        arm = train_env.arm(request.profile.name, request.xla_flags, request.profile.env)
    except train_env.TrainEnvError as e:
        raise SubmitRefused(str(e)) from e
    path = repo / "train_env.sh"
    if not path.is_file():
        raise SubmitRefused(f"profile {arm.name}: {path} does not exist: submit.sh mode passes "
                            "a profile through the toolkit's train_env.sh")
    model = resolve_model(repo, request.model)
    env_path = repo / "configs" / f"{model}.env.sh"
    env_file = env_path.read_text("utf-8") if model and env_path.is_file() else None
    placed = train_env.placement(arm, env_file)
    try:
        early = train_env.read_early(path.read_text("utf-8"), arm)
    except train_env.TrainEnvError as e:
        raise SubmitRefused(f"profile {arm.name}: {e}") from e
    extra = [f"_env_{k}={v}" for k, v in arm.env if k in early]
    placed = replace(placed, passthrough=tuple(dict.fromkeys([*placed.passthrough, *extra])))
    if placed.lost:
        lost = ", ".join(f"--{o.key}={o.file_value} (the profile's: {o.arm_value})"
                         for o in placed.lost)
        raise SubmitRefused(
            f"profile {arm.name} cannot take effect in submit.sh mode: configs/{model}.env.sh "
            f"sets {lost}, and it is sourced after train_env.sh, so its value wins (last "
            "wins); nothing was written or submitted. Remove the flag from the env file (or "
            "guard it), drop the profile, or run the sweep in direct mode")
    return placed


def write_arm(repo: Path, request: JobRequest, arm: train_env.Arm) -> str:
    """Add the arm to `<repo>/train_env.sh` (only ever added: an arm of the same name with
    other content, or blocks edited by hand, refuse the submission) and note the file in the
    sweep's output directory for its end message. Returns what was done, for the record."""
    path = repo / "train_env.sh"
    try:
        wrote = train_env.apply(path, arm)
    except train_env.TrainEnvError as e:
        raise SubmitRefused(f"profile {arm.name}: {e}") from e
    mark = request.output_dir / TRAIN_ENV_MARK
    known = mark.read_text("utf-8").splitlines() if mark.is_file() else []
    # The baseline arm is built into the block and never written: nothing to report. Each
    # arm is noted by name too (`path<TAB>name`), for its removal at the sweep's end.
    line = f"{path}\t{arm.name}"
    if arm.name != train_env.BASELINE and line not in known:
        mark.parent.mkdir(parents=True, exist_ok=True)
        train_env.write_atomic(mark, "".join(f"{k}\n" for k in [*known, line]))
    return (f"train_env.sh arm {arm.describe()} " + ("added to " if wrote else "already in ")
            + str(path))


def _marked(output_dir: Path) -> dict[Path, list[str]]:
    """The train_env.sh files the sweep's submissions wrote arms into, each with the names
    of those arms (none known for a mark written before names were noted)."""
    mark = output_dir / TRAIN_ENV_MARK
    if not mark.is_file():
        return {}
    out: dict[Path, list[str]] = {}
    for line in mark.read_text("utf-8").splitlines():
        path, _, name = line.partition("\t")
        names = out.setdefault(Path(path), [])
        if name and name not in names:
            names.append(name)
    return out


def remove_leftovers(output_dir: Path) -> str | None:
    """At the sweep's end: remove the arms its submissions wrote from each train_env.sh
    (both blocks once no arm is left; another sweep's arms stay), through
    `util.person_files`. What was removed, or why not, for the record (None: nothing was
    written). Every job it submitted runs a frozen copy of the file, so none is affected."""
    notes = []
    for path, names in _marked(output_dir).items():
        if not names:
            notes.append(f"{path}: the sweep's arms are not known by name; left as they are")
            continue
        try:
            removed = train_env.remove(path, names) if path.is_file() else ()
        except train_env.TrainEnvError as e:
            notes.append(f"{path}: the sweep's arms could not be removed ({e})")
            continue
        if removed:
            notes.append(f"removed the sweep's {len(removed)} TUNE_PROFILE arm(s) from {path} "
                         f"({', '.join(a.name for a in removed)})")
    return "\n".join(notes) or None


def leftover_note(output_dir: Path) -> str | None:
    """What the sweep's submissions left in train_env.sh files, and how to remove it."""
    notes = []
    for path in _marked(output_dir):
        try:
            text = train_env.leftover(path)
        except (OSError, train_env.TrainEnvError) as e:
            notes.append(f"{path}: cannot be read back ({e})")
            continue
        notes.append(text)
        if train_env.arms(path.read_text("utf-8")):
            notes.append(f"  remove them (nothing else in the file changes): "
                         f"{clean_command(path)}")
    return "\n".join(notes) or None


def clean_command(path: Path) -> str:
    """The command that removes sweepd's arms from `path`, under the interpreter sweepd runs
    under: the system's `python` may have no sweepd (a new user's `python -m …` failed)."""
    return (f"{shlex.quote(sys.executable)} -m sweepd.clusters.train_env clean "
            f"{shlex.quote(str(path))}")
