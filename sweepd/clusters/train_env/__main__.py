"""`python -m sweepd.clusters.train_env show|clean PATH`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from sweepd.clusters.train_env.blocks import TrainEnvError
from sweepd.clusters.train_env.files import clean, leftover


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m sweepd.clusters.train_env show|clean PATH`: what sweepd left in a
    train_env.sh, or its two blocks removed (what a sweep's end message offers; sweepd never
    runs it unasked)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("show", "clean"):
        print("usage: python -m sweepd.clusters.train_env show|clean PATH",
              file=sys.stderr)
        return 2
    path = Path(args[1])
    try:
        if args[0] == "show":
            print(leftover(path))
        else:
            print(f"{path}: sweepd's blocks removed" if clean(path) else
                  f"{path}: no blocks of sweepd's to remove")
    except (OSError, TrainEnvError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
