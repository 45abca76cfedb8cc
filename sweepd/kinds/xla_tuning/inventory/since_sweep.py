"""What the model's env file sets now that the sweep did not measure: `report --apply`
appends the recipe after everything the file sets, so a setting the person added or changed
since the sweep read its Inventory (a harmful flag, an NCCL variable) would run beside the
recipe in every job, a combination never measured.

The sweep recorded its Inventory (the verdict's `inventory`, `planner_facts.inventory_line`:
"Inventory: WHERE sets k=v, K=V" or "... sets no XLA flag or NCCL/XLA env var"); the file is
read now as the sweep's jobs sourced it (`sourced.source` with their passthrough, the
Inventory's settings: XLA flags and NCCL/RCCL/XLA_PYTHON env vars). A key the recipe sets
itself is left out: the recipe's last-wins line decides it either way.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.sourced import SourceError, source
from sweepd.kinds.xla_tuning.inventory.inventory import tuned

_NONE = "no XLA flag or NCCL/XLA env var"


def recorded(inventory: object) -> dict[str, str] | None:
    """The settings the sweep's Inventory line names, by key (None: it read no env file, or
    the line is not one sweepd wrote)."""
    if not isinstance(inventory, str) or " sets " not in inventory:
        return None
    found = inventory.partition(" sets ")[2].strip()
    if found == _NONE:
        return {}
    out = {}
    for label in found.split(", "):
        key, sep, value = label.partition("=")
        if not sep:
            return None
        out[key] = value
    return out


def changed(env_file: Path, passthrough: Sequence[str], inventory: object,
            recipe_lines: Iterable[str]) -> list[str] | None:
    """The settings that differ between the file now (sourced as the sweep's jobs would)
    and the sweep's Inventory, keys the recipe sets left out, each as one phrase; None when
    there is nothing to compare (no Inventory, or a file that does not source: the proof
    after the write says why)."""
    then = recorded(inventory)
    if then is None or not env_file.is_file():
        return None   # missing, or a FIFO or device bash would block on: the write refuses it
    try:  # read with the Inventory's own filter (XLA flags, NCCL/RCCL/XLA_PYTHON env vars)
        now = {s.key: s.value for s in tuned(source(env_file, passthrough).settings())}
    except (SourceError, subprocess.TimeoutExpired, OSError):
        return None
    own = {s.key for s in deploy.settings_of_lines(recipe_lines)}
    out = []
    for key in sorted({*then, *now} - own):
        if key not in then:
            out.append(f"{key}={now[key]} (added)")
        elif key not in now:
            out.append(f"{key} (removed; measured with {key}={then[key]})")
        elif now[key] != then[key]:
            out.append(f"{key}={now[key]} (measured with {then[key]})")
    # A value is said on one line of the block's note: a CR or LF in it is written out.
    return [phrase.replace("\r", "\\r").replace("\n", "\\n") for phrase in out]


def check(sweep_id: int, env_file: Path, passthrough: Sequence[str], inventory: object,
          recipe_lines: Iterable[str], force: bool) -> tuple[str | None, list[str]]:
    """(why --apply refuses, one line; None: it does not) and the notes --force writes into
    the block and says: the settings that changed since the sweep (`changed`)."""
    differ = changed(env_file, passthrough, inventory, recipe_lines)
    if not differ:
        return None, []
    if not force:
        return (f"{env_file} changed since sweep {sweep_id} measured the recipe on it: "
                f"{', '.join(differ)}; the recipe with these was never measured; nothing "
                "written: restore them, sweep again, or add --force to write it anyway"), []
    return None, [f"# written with --force: the file sets what sweep {sweep_id} did not "
                  f"measure: {', '.join(differ)}"]
