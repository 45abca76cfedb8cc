"""The campaign's client actions: `sweepd report ID --tuning-md [PATH]` writes the report,
`<MODEL_TAG>-campaign.md`; `sweepd report ID --apply [REPO]` writes what it confirmed
into the toolkit checkout: the batch into `configs/<model>.gpu.yml` (a comment naming the
parallelism it was found at: YAML cannot guard it) and the recipe into
`configs/<model>.env.sh` guarded by the parallelism, as model perf's and xla-tuning's own
`--apply` write them (through their `exports.py`). Only a confirmed gain is applied, each
parallelism's own: one guarded recipe block per parallelism; the gpu.yml holds one batch,
the first confirmed parallelism's, its comment noting every confirmed parallelism's batch."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sweepd.kinds.campaign import report as campaign_report
from sweepd.kinds.campaign.results import cells_of, confirmed_cells
from sweepd.kinds.model_perf.exports import write_batch
from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput, ReportFlag, output_path
from sweepd.kinds.xla_tuning.exports import write_recipe
from sweepd.store.rows import Job, Run, Sweep
from sweepd.util import person_files

# `sweepd report`'s options this kind takes (`ClientHooks.report_flags`), shaped as the
# other kinds' flags of the same names.
REPORT_FLAGS = (
    ReportFlag("--apply", "the confirmed batch into configs/MODEL.gpu.yml and each confirmed "
                          "recipe, guarded by parallelism, into configs/MODEL.env.sh of the "
                          "daemon's submit.sh checkout (or of this checkout)", acts=True,
               options={"type": Path, "nargs": "?", "const": THE_CHECKOUT, "metavar": "FILE"}),
    ReportFlag("--tuning-md", "write <MODEL_TAG>-campaign.md here (default: in the current "
                              "directory)", acts=True,
               options={"type": output_path, "nargs": "?", "const": Path(), "metavar": "PATH"},
               completes_files=True),
)


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
    cells, good = cells_of(v), confirmed_cells(dict(v))
    if not good:
        # A verdict is a measured claim: nothing within noise is put forward.
        claims = "; ".join(str((c.get("confirmed") or {}).get("claim") or
                               "no confirm stage result") for c in cells)
        return io.fail(args, f"campaign {args.id} confirmed no gain: nothing to apply "
                          f"({claims or 'no confirm stage result'})")
    root = Path(args.apply) if args.apply != THE_CHECKOUT else (
        Path(report["checkout"]) if report.get("checkout") else None)
    if root is None or not (root / "configs").is_dir():
        return io.fail(args, f"campaign {args.id}: --apply needs the toolkit checkout (a "
                          f"directory with configs/): --apply REPO")
    model = str(v["model"])
    try:
        _batch(args, root, model, good, io)
        for cell in good:
            par, flags = str(cell["parallelism"]), cell.get("flags") or {}
            if not flags.get("xla_flags") and not flags.get("env"):
                continue
            note = f"sweepd campaign {args.id}: found at {par}, {cell['confirmed']['claim']}"
            block = write_recipe(root / "configs" / f"{model}.env.sh", model, par, note,
                                 flags.get("xla_flags", []), flags.get("env", {}))
            io.say(f"{root / 'configs' / f'{model}.env.sh'}: the {par} recipe written "
                   f"(guarded by parallelism):\n{block}")
    except ValueError as e:
        return io.fail(args, str(e))
    return 0


def _batch(args: argparse.Namespace, root: Path, model: str,
           good: Sequence[Mapping[str, Any]], io: ClientOutput) -> None:
    """The first confirmed parallelism's batch into the gpu.yml (it holds one value and
    cannot guard it by parallelism): its comment says where it was found, and the batch
    every other confirmed parallelism found, to pass as an override to that one's jobs."""
    found = [(str(c["parallelism"]), int(c["batch"]["best"]), str(c["confirmed"]["claim"]))
             for c in good if (c.get("batch") or {}).get("best") is not None]
    if not found:
        return
    (par, value, claim), rest = found[0], found[1:]
    note = f"sweepd campaign {args.id}: found at {par}, " + (
        claim if not rest else "; ".join(
            f"at {p} batch {b}" + (" too" if b == value else
                                   f": pass per_device_batch_size={b} to its jobs")
            for p, b, _ in rest))
    line = write_batch(root / "configs" / f"{model}.gpu.yml", value, note)
    io.say(f"{root / 'configs' / f'{model}.gpu.yml'}: {line}")
