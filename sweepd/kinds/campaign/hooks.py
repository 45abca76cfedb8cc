"""The campaign's client action: `sweepd report ID --apply [REPO]` writes what it confirmed
into the toolkit checkout: the batch into `configs/<model>.gpu.yml` (a comment naming the
parallelism it was found at: YAML cannot guard it) and the recipe into
`configs/<model>.env.sh` guarded by the parallelism, as model perf's and xla-tuning's own
`--apply` write them (through their `exports.py`). Only a confirmed gain is applied."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sweepd.kinds.model_perf.exports import write_batch
from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput
from sweepd.kinds.xla_tuning.exports import write_recipe
from sweepd.store.rows import Job, Run, Sweep


def report_extras(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
                  repo: Path | None) -> dict[str, Any]:
    """The daemon's submit.sh checkout: where `--apply` without a path writes."""
    return {"checkout": str(repo) if repo else None}


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
