"""Model perf's client action: `sweepd report ID --apply FILE` writes the optimum into the
model's config, `<model>.gpu.yml` (`ClientHooks.report_action`): the batch, and a
two-parameter sweep's second knob when it is a config key (`remat_policy`; a memory
fraction is an environment variable, the model's `.env.sh`, and is named, not written).

Only when a person asks, and only through `util.person_files` (locked, re-checked right
before the write, written in place, left parsing): each key's line is replaced (comments,
order and every other line kept), or appended when the file does not set it yet, and the
result loads with exactly the verdict's values (`yaml_keys`). Refused in one line: a file
that is not a YAML mapping, a read-only one, a best-so-far verdict (both unless --force).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from sweepd.kinds.model_perf import yaml_keys
from sweepd.kinds.model_perf.params import ENV_PREFIX
from sweepd.kinds.model_perf.two_param.pairs import is_fraction
from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput, ReportFlag
from sweepd.util import person_commit, person_files

# `sweepd report`'s options this kind takes (`ClientHooks.report_flags`).
REPORT_FLAGS = (
    ReportFlag("--apply", "write the optimum into this model config (MODEL.gpu.yml: the "
                          "batch, and a two-parameter sweep's remat_policy)", acts=True,
               options={"type": Path, "nargs": "?", "const": THE_CHECKOUT, "metavar": "FILE"}),
    ReportFlag("--force", "with --apply: write a best-so-far verdict (not settled), a "
                          "read-only file, or a memory-fraction verdict's batch alone, too",
               options={"action": "store_true"}),
    ReportFlag("--commit", "with --apply: commit the file written in its repo (never on the "
                           "default branch)", options={"action": "store_true"}),
)


class ApplyError(ValueError):
    pass


def apply_to_config(path: Path, parameter: str, value: Any, note: str | None = None, *,
                    force: bool = False) -> str:
    """Set `parameter: value` in a `<model>.gpu.yml`; returns the line written."""
    return apply_settings(path, {parameter: value}, note, force=force)[0]


def apply_settings(path: Path, values: Mapping[str, Any], note: str | None = None, *,
                   force: bool = False) -> list[str]:
    """Set each top-level `key: value` in a `<model>.gpu.yml` (`note`: a comment after each
    value); returns the lines written. A read-only file is refused unless `force`."""
    for key in values:
        if key.startswith(ENV_PREFIX) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ApplyError(f"{key!r} is not a config key (env variables go in the "
                             "model's .env.sh, not its .gpu.yml)")

    def change(text: str | None) -> str:
        assert text is not None  # a missing file is refused before
        try:
            if yaml_keys.load_mapping(text) is None:
                raise ApplyError(f"{path} is not a YAML mapping (a model's configs/"
                                 "<model>.gpu.yml is one); nothing written")
        except yaml.YAMLError as e:
            raise ApplyError(f"{path} does not load as YAML now ({' '.join(str(e).split())})"
                             "; nothing written: mend it first") from None
        try:
            return yaml_keys.set_keys(text, values, note)
        except yaml_keys.KeyEditError as e:
            raise ApplyError(f"{path} {e}") from None

    try:
        person_files.edit(path, change, check=person_files.yaml_syntax, force=force)
    except person_files.PersonFileError as e:
        raise ApplyError(str(e)) from None
    tail = f"  # {note}" if note else ""
    return [f"{k}: {yaml_keys.scalar(v)}{tail}" for k, v in values.items()]


def apply(args: argparse.Namespace, report: Mapping[str, Any], io: ClientOutput) -> int:
    """`sweepd report ID --apply FILE`: the optimum into the model's config file."""
    verdict = report.get("verdict") or {}
    if verdict.get("best") is None or "parameter" not in verdict:
        return io.fail(args, f"sweep {args.id} has no optimum to apply")
    if args.apply == THE_CHECKOUT:
        return io.fail(args, f"sweep {args.id}: --apply needs the model's config file here: "
                          "--apply REPO/configs/MODEL.gpu.yml")
    model = str(report["sweep"]["spec"].get("model"))
    path = Path(args.apply)
    # On the local backend and in direct mode the person's trainer reads its own YAML (a
    # MaxText base.yml, a copy of it): any such file takes the key, whatever its name.
    own_config = verdict.get("settings_form") == "overrides"
    if not own_config and not path.name.startswith(f"{model}."):
        # An optimum is only valid for the model it was measured on.
        return io.fail(args, f"sweep {args.id} measured {model}; {path} is not "
                          f"{model}'s config (expected configs/{model}.gpu.yml)")
    if not path.name.endswith((".yml", ".yaml")):
        return io.fail(args, f"sweep {args.id}: {path} is not a YAML config; model perf "
                          f"writes {model}'s configs/{model}.gpu.yml")
    force = bool(getattr(args, "force", False))
    values, notes, refusal = _settings(args.id, verdict, model)
    if refusal and not force:
        return io.fail(args, refusal)
    try:
        if args.commit:
            person_commit.branch_of(path)  # refused before anything is written
        lines = apply_settings(path, values, force=force)
    except (person_commit.CommitError, ApplyError) as e:
        return io.fail(args, str(e))
    io.say(f"{path}: {', '.join(lines)}")
    for note in notes:
        io.say(note)
    if args.commit:
        what = ", ".join(f"{k} = {v}" for k, v in values.items())
        try:
            where = person_commit.commit(path, f"{model}: {what} from sweepd sweep {args.id}")
        except person_commit.CommitError as e:
            return io.fail(args, str(e))
        io.say(f"committed on {where}")
    return 0


def _settings(sweep_id: int, verdict: Mapping[str, Any], model: str
              ) -> tuple[dict[str, Any], list[str], str | None]:
    """The config keys to write, what --force writes past (said in the output), and why
    --apply refuses without it (None: it does not)."""
    parameter, best = str(verdict["parameter"]), verdict["best"]
    values: dict[str, Any] = {parameter: best}
    notes: list[str] = []
    refusals: list[str] = []
    anyway = "to write it anyway"
    if not verdict.get("settled", True):
        caveat = verdict.get("caveat") or "the search did not settle"
        refusals.append(f"sweep {sweep_id}'s verdict is the best so far, not settled "
                        f"({caveat})")
        notes.append(f"written with --force: the best so far, not settled: {caveat}")
    second = verdict.get("second")
    if second:
        value = verdict.get("second_best")
        if str(second).startswith(ENV_PREFIX) or is_fraction(str(second)):
            name = str(second).removeprefix(ENV_PREFIX)
            where = (f"{name} is an environment variable: it goes in configs/{model}.env.sh "
                     f"(export {name}={value}) or a job's {ENV_PREFIX}{name}={value} "
                     "passthrough, not a .gpu.yml")
            refusals.append(f"sweep {sweep_id}'s verdict is {parameter}={best} with "
                            f"{name}={value}; {where}")
            anyway = f"to write {parameter} alone once {name} is set there"
            notes.append(f"{name}={value} is not written ({where}); {parameter}={best} was "
                         "measured with it")
        else:
            values[str(second)] = value
    refusal = "; ".join(refusals) + f"; nothing written: add --force {anyway}" \
        if refusals else None
    return values, notes, refusal
