"""The campaign's client actions: `sweepd report ID --tuning-md [PATH]` writes the report,
`<MODEL_TAG>-campaign.md`; `sweepd report ID --apply [REPO]` writes what it confirmed
into the toolkit checkout: the batch into `configs/<model>.gpu.yml` (a comment naming the
parallelism it was found at: YAML cannot guard it) and the recipe into
`configs/<model>.env.sh` guarded by the parallelism, as model perf's and xla-tuning's own
`--apply` write them (through their `exports.py`). Only a confirmed gain is applied."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sweepd.kinds.campaign import report as campaign_report
from sweepd.kinds.model_perf.exports import write_batch
from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput
from sweepd.kinds.xla_tuning.exports import write_recipe
from sweepd.store.rows import Job, Run, Sweep
from sweepd.util import person_files


def report_extras(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
                  repo: Path | None) -> dict[str, Any]:
    """The daemon's submit.sh checkout (where `--apply` without a path writes) and the
    campaign's report (what `--tuning-md` writes)."""
    return {"checkout": str(repo) if repo else None,
            "campaign_md": campaign_report.markdown(sweep, runs, jobs)}


def run(args: argparse.Namespace, report: Mapping[str, Any], io: ClientOutput) -> int:
    if getattr(args, "tuning_md", None) is not None:
        code = write_md(args, report, io)
        if code:
            return code
    if args.apply is not None:
        return apply(args, report, io)
    return 0


def write_md(args: argparse.Namespace, report: Mapping[str, Any], io: ClientOutput) -> int:
    """`<MODEL_TAG>-campaign.md` in the directory given (default: the current one), or the
    file given, through the person's files' safe edit."""
    model = str((report.get("sweep") or {}).get("spec", {}).get("model"))
    given = Path(args.tuning_md)
    path = given / f"{model}-campaign.md" if given == Path() or given.is_dir() else given
    if not path.parent.is_dir():
        return io.fail(args, f"cannot write {path}: there is no directory {path.parent}")
    text = str(report.get("campaign_md") or "")
    try:
        person_files.edit(path, lambda old: text + "\n", create=True)
    except person_files.PersonFileError as e:
        return io.fail(args, str(e))
    io.say(f"{path}: written", err=True)
    return 0


def apply(args: argparse.Namespace, report: Mapping[str, Any], io: ClientOutput) -> int:
    v = report.get("verdict") or {}
    claim = (v.get("confirmed") or {})
    interval = claim.get("interval")
    if not interval or interval[0] <= 0:
        # A verdict is a measured claim: nothing within noise is put forward.
        return io.fail(args, f"campaign {args.id} confirmed no gain: nothing to apply "
                          f"({claim.get('claim') or 'no confirm stage result'})")
    root = Path(args.apply) if args.apply != THE_CHECKOUT else (
        Path(report["checkout"]) if report.get("checkout") else None)
    if root is None or not (root / "configs").is_dir():
        return io.fail(args, f"campaign {args.id}: --apply needs the toolkit checkout (a "
                          f"directory with configs/): --apply REPO")
    model, par = str(v["model"]), str(v["parallelism"])
    note = f"sweepd campaign {args.id}: found at {par}, {claim.get('claim')}"
    flags = v.get("flags") or {}
    try:
        if (v.get("batch") or {}).get("best") is not None:
            line = write_batch(root / "configs" / f"{model}.gpu.yml", int(v["batch"]["best"]),
                               note)
            io.say(f"{root / 'configs' / f'{model}.gpu.yml'}: {line}")
        if flags.get("xla_flags") or flags.get("env"):
            block = write_recipe(root / "configs" / f"{model}.env.sh", model, par, note,
                                 flags.get("xla_flags", []), flags.get("env", {}))
            io.say(f"{root / 'configs' / f'{model}.env.sh'}: the {par} recipe written "
                   f"(guarded by parallelism):\n{block}")
    except ValueError as e:
        return io.fail(args, str(e))
    return 0
