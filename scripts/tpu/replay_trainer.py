"""A stand-in for MaxText that prints a recorded real run: `python replay_trainer.py key=value ...`
finds the run of its `per_device_batch_size` among the recorded TPU v5e logs
(tests/fixtures/tpu_v5e/, or $REPLAY_DIR; files `<prefix>-b<batch>.log.gz`, the prefix
$REPLAY_PREFIX, default the first recording's date) and prints that run's output line for line,
then exits with the run's own exit code. A batch recorded more than once (`<prefix>-b<batch>.r<k>
.log.gz`, k = 2, 3, ...) prints its k-th recording on its k-th run, where $REPLAY_STATE names a
folder to count the runs in (a sweep that repeats a value reads the chip's second run of it).
The local backend runs it as it runs MaxText, so a sweep on it
reads the chip's own lines: the absl-prefixed step lines, the `Total estimated memory size` line,
the compile-time HBM out-of-memory. A batch with no recorded run exits 2 saying so.

Standard library only: the local backend starts it with the job's environment."""

from __future__ import annotations

import gzip
import os
import sys
import time
from pathlib import Path

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "tpu_v5e"
DATE = "2026-12-06"


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv if "=" in a)
    batch = args.get("per_device_batch_size", "")
    folder = Path(os.environ.get("REPLAY_DIR", DEFAULT_DIR))
    prefix = os.environ.get("REPLAY_PREFIX", DATE)
    path = folder / f"{prefix}-b{batch}.log.gz"
    if not batch.isdigit() or not path.is_file():
        print(f"replay_trainer: no recorded run for per_device_batch_size={batch!r} in {folder}",
              file=sys.stderr)
        return 2
    path = _nth_run(path, folder, prefix, batch)
    # Seconds per printed line: 0 prints at once (the tests); the chip's pace is in the header.
    pause = float(os.environ.get("REPLAY_LINE_S", "0"))
    code = 0
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith("########## RUN "):
                # The driver's header: `rc=N` is the process's exit status.
                code = int(line.split(" rc=", 1)[1].split()[0])
                continue
            if line.startswith("##########"):
                continue
            sys.stdout.write(line)
            sys.stdout.flush()
            if pause:
                time.sleep(pause)
    # A run the recording driver killed at its deadline (124) was no run of MaxText's own.
    return code if code != 124 else 143


def _nth_run(path: Path, folder: Path, prefix: str, batch: str) -> Path:
    """The recording of this run of the batch: its k-th where one was recorded, counted in
    $REPLAY_STATE (none: always the first), else the last recorded."""
    state = os.environ.get("REPLAY_STATE")
    if not state:
        return path
    counter = Path(state) / f"b{batch}.count"
    counter.parent.mkdir(parents=True, exist_ok=True)
    k = int(counter.read_text()) + 1 if counter.is_file() else 1
    counter.write_text(str(k))
    for n in range(k, 1, -1):
        again = folder / f"{prefix}-b{batch}.r{n}.log.gz"
        if again.is_file():
            return again
    return path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
