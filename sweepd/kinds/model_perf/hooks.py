"""Model perf's client action: `sweepd report ID --apply FILE` writes the optimum into the
model's config, one line of `<model>.gpu.yml` (`ClientHooks.report_action`).

Only when a person asks, and only through `util.person_files` (locked, re-checked right
before the write, written in place, left parsing): the parameter's line is replaced
(comments, order and every other line kept), or appended when the file does not set it yet.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput, ReportFlag
from sweepd.util import person_commit, person_files

# `sweepd report`'s options this kind takes (`ClientHooks.report_flags`).
REPORT_FLAGS = (
    ReportFlag("--apply", "write the optimum into this model config (one line of "
                          "MODEL.gpu.yml)", acts=True,
               options={"type": Path, "nargs": "?", "const": THE_CHECKOUT, "metavar": "FILE"}),
    ReportFlag("--commit", "with --apply: commit the file written in its repo (never on the "
                           "default branch)", options={"action": "store_true"}),
)


class ApplyError(ValueError):
    pass


def apply_to_config(path: Path, parameter: str, value: Any) -> str:
    """Set `parameter: value` in a `<model>.gpu.yml`; returns the line written."""
    if parameter.startswith("_env_") or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", parameter):
        raise ApplyError(f"{parameter!r} is not a config key (env variables go in the "
                         "model's .env.sh, not its .gpu.yml)")
    line = f"{parameter}: {value}"
    key = re.compile(rf"^{re.escape(parameter)}\s*:.*?(\s+#.*)?$", re.M)

    def change(text: str | None) -> str:
        assert text is not None  # a missing file is refused before
        found = key.search(text)
        if found:
            return text[:found.start()] + line + (found.group(1) or "") + text[found.end():]
        return text + ("" if text.endswith("\n") or not text else "\n") + line + "\n"

    try:
        person_files.edit(path, change, check=person_files.yaml_syntax)
    except person_files.PersonFileError as e:
        raise ApplyError(str(e)) from None
    return line


def apply(args: argparse.Namespace, report: Mapping[str, Any], io: ClientOutput) -> int:
    """`sweepd report ID --apply FILE`: the optimum into the model's config file."""
    verdict = report.get("verdict") or {}
    if verdict.get("best") is None or "parameter" not in verdict:
        return io.fail(args, f"sweep {args.id} has no optimum to apply")
    if args.apply == THE_CHECKOUT:
        return io.fail(args, f"sweep {args.id}: --apply needs the model's config file here: "
                          "--apply REPO/configs/MODEL.gpu.yml")
    model = str(report["sweep"]["spec"].get("model"))
    if not Path(args.apply).name.startswith(f"{model}."):
        # An optimum is only valid for the model it was measured on.
        return io.fail(args, f"sweep {args.id} measured {model}; {args.apply} is not "
                          f"{model}'s config (expected configs/{model}.gpu.yml)")
    try:
        if args.commit:
            person_commit.branch_of(Path(args.apply))  # refused before anything is written
        line = apply_to_config(args.apply, verdict["parameter"], verdict["best"])
    except (person_commit.CommitError, ApplyError) as e:
        return io.fail(args, str(e))
    io.say(f"{args.apply}: {line}")
    if args.commit:
        try:
            where = person_commit.commit(Path(args.apply), f"{model}: {verdict['parameter']} = "
                                         f"{verdict['best']} from sweepd sweep {args.id}")
        except person_commit.CommitError as e:
            return io.fail(args, str(e))
        io.say(f"committed on {where}")
    return 0
