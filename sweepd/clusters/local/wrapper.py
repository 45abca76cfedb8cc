"""One local job's wrapper: `python wrapper.py JOBS_DIR JOB_ID [SLOT_FD]` (or `python -m
sweepd.clusters.local.wrapper ...`), started detached by the local backend, so the job
outlives the daemon.

It reads the job's record, writes its own pid file, prints direct mode's header lines and
`== Training BEGIN ==` into the job's log, runs the train command in a session (process
group) of its own with stdout and stderr into the log, and when it ends prints the banner
and the JOB SUMMARY block and writes the status file (exit code, the signal that ended the
trainer, start and end, whether it was cancelled and by whom: sweepd or from outside)
beside the record. SIGTERM (the backend's cancel) is passed to the trainer's
group; after the grace period the group gets SIGKILL. Whatever the trainer left in its
group when it ended is killed too: the job is its process group.

Standard library only, with `clusters/proc_ticks.py` (stdlib-only too, loaded from this
tree): it runs under the daemon's interpreter without sweepd on the path, so the trainer's
environment (PYTHONPATH) is the one the backend built, untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

# Run as a file (`python wrapper.py`), this tree's root is not on the path: put it first,
# for the one module of sweepd the wrapper shares with the backends (itself stdlib-only).
# The trainer's environment (PYTHONPATH) is not touched.
if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from sweepd.clusters.proc_ticks import alive as alive
from sweepd.clusters.proc_ticks import start_ticks as start_ticks

SUMMARY_RULE = "=" * 26 + " JOB SUMMARY " + "=" * 26
SUMMARY_END = "=" * 65
CANCEL_EXITS = (130, 143)
EXIT_NOT_STARTED = 127   # the shell's "command not found"


def record_path(jobs_dir: Path, job_id: str) -> Path:
    return jobs_dir / f"{job_id}.json"


def pid_path(jobs_dir: Path, job_id: str) -> Path:
    """The wrapper's and the trainer's pid and start ticks, written by the wrapper."""
    return jobs_dir / f"{job_id}.pid"


def status_path(jobs_dir: Path, job_id: str) -> Path:
    """Written once the job has ended: exit code, start, end, cancelled."""
    return jobs_dir / f"{job_id}.status"


def cancel_path(jobs_dir: Path, job_id: str) -> Path:
    """Written by the backend's cancel before its signal: the job's end reads as a cancel."""
    return jobs_dir / f"{job_id}.cancel"


def durable_write(path: Path, text: str) -> None:
    """Written whole or not at all, and on disk before returning (a crash right after must
    not lose a job record or a status)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: Path, data: Any) -> None:
    durable_write(path, json.dumps(data, indent=1, sort_keys=True))


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def wall(seconds: float) -> str:
    total = max(0, round(seconds))
    return f"{total // 3600}h {total % 3600 // 60}m {total % 60}s"


def header_lines(job: dict[str, Any]) -> list[str]:
    """Direct mode's header (clusters/slurm/script.py), so the monitor reads it alike."""
    return [f"JOB_ID={job['id']}", f"JOB_NAME={job['job_name']}", "NNODES=1",
            f"JOB_NODELIST={job['node']}",
            f'PASSTHROUGH_ARGS="{" ".join(job["passthrough"])}"',
            f"MODEL_NAME={job['model']}"]


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Ending:
    """How the trainer ended, as the status file and the JOB SUMMARY record it: its exit
    code (128 + the signal for a process a signal ended, as a shell reports it), the signal
    that ended it, and whether that was a cancel and whose: sweepd's (its `.cancel` marker
    is written before its signal) or from outside (a person's `kill -TERM` of the trainer or
    of this wrapper). A stop signal (SIGTERM, SIGINT, SIGHUP, or the exits 130/143 a
    trainer's own handler returns for them) is a cancel, as scancel's SIGTERM is on Slurm;
    any other signal (SIGKILL: `kill -9`, the kernel's OOM killer; SIGSEGV) is a failure."""

    STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self, code: int, signum: int | None, marker: bool,
                 received: int | None) -> None:
        self.code, self.signum = code, signum
        stop = (signum in self.STOPS) or (signum is None and code in CANCEL_EXITS)
        self.by = "sweepd" if marker else "outside" if (received is not None or stop) \
            else None
        self.cancelled = self.by is not None
        # The signal the cancel came as: the wrapper's own, else the trainer's.
        stop_sig = received or signum or {130: signal.SIGINT, 143: signal.SIGTERM}.get(code)
        self.stop_name = signal_name(stop_sig) if stop_sig else "SIGTERM"

    def status(self) -> str:
        if self.by == "sweepd":
            return "CANCELLED (scancel / SIGTERM)"
        if self.by == "outside":
            return f"CANCELLED ({self.stop_name} from outside sweepd)"
        if self.code == 0:
            return "SUCCESS (exit 0)"
        if self.signum is not None:
            return f"FAILED (killed by signal {self.signum})"
        return f"FAILED (exit {self.code}) — Training FAILED (exit={self.code})"

    def record(self) -> dict[str, Any]:
        return {"exit_code": self.code, "signal": self.signum, "cancelled": self.cancelled,
                "cancelled_by": self.by}


def summary_lines(job: dict[str, Any], seconds: float, ending: Ending) -> list[str]:
    return [SUMMARY_RULE, f"  Job:    {job['id']} ({job['job_name']})",
            f"  Model:  {job['model']}", f"  Nodes:  {job['node']}",
            f"  Wall:   {wall(seconds)}", f"  Status: {ending.status()}", SUMMARY_END]


class Trainer:
    """The train command in its own process group, and the cancel that ends it."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.received: int | None = None   # the stop signal this wrapper got
        self.kill_at: float | None = None

    @property
    def cancelled(self) -> bool:
        return self.received is not None

    def cancel(self, signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        """SIGTERM to the trainer's group now, SIGKILL once the grace period is over."""
        if self.received is None:
            self.received = signum
        if self.kill_at is None:
            self.kill_at = time.monotonic() + self.grace_s
        self.signal_group(signal.SIGTERM)

    def signal_group(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def wait(self) -> tuple[int, int | None]:
        """(exit code, the signal that ended it or None)."""
        assert self.proc is not None
        while True:
            try:
                raw = self.proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if self.kill_at is not None and time.monotonic() >= self.kill_at:
                    self.signal_group(signal.SIGKILL)
        # What the trainer left in its group (a data loader, a compile helper) goes with it.
        self.signal_group(signal.SIGKILL)
        return (128 - raw, -raw) if raw < 0 else (raw, None)


def say_holder(slot_fd: int | None, job: dict[str, Any], me: list[Any],
               trainer: list[Any] | None) -> None:
    """Who holds the machine's slot (sweepd/clusters/local/slot.py), into its lock file in
    place; a read-only descriptor leaves it unsaid."""
    if slot_fd is None:
        return
    holder = {"pid": me[0], "trainer": trainer[0] if trainer else None,
              "state_dir": job.get("state_dir"), "sweep": job.get("sweep"), "job": job["id"],
              "since": time.time()}
    with contextlib.suppress(OSError):
        os.ftruncate(slot_fd, 0)
        os.pwrite(slot_fd, (json.dumps(holder, sort_keys=True) + "\n").encode(), 0)


def run(jobs_dir: Path, job_id: str, slot_fd: int | None = None) -> int:
    """The job; `slot_fd`: the machine's accelerator slot, held, inherited from the backend
    that took it: the trainer inherits it too, so it stays held while either runs (a
    wrapper killed outright leaves the trainer holding it) and is let go when both end."""
    job = read_json(record_path(jobs_dir, job_id))
    if not isinstance(job, dict):
        print(f"no job record {record_path(jobs_dir, job_id)}", file=sys.stderr)
        return 2
    me = [os.getpid(), start_ticks(os.getpid())]
    trainer = Trainer(float(job.get("grace_s", 30.0)))
    signal.signal(signal.SIGTERM, trainer.cancel)
    signal.signal(signal.SIGINT, trainer.cancel)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    write_json(pid_path(jobs_dir, job_id), {"wrapper": me, "trainer": None})
    say_holder(slot_fd, job, me, None)
    log_path = Path(job["log"])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with log_path.open("ab", buffering=0) as log:
        def say(lines: list[str]) -> None:
            log.write(("\n".join(lines) + "\n").encode())

        say([*header_lines(job), "== Training BEGIN =="])
        code, signum = EXIT_NOT_STARTED, None
        if not trainer.cancelled and not cancel_path(jobs_dir, job_id).exists():
            try:
                trainer.proc = subprocess.Popen(
                    job["argv"], cwd=job.get("workdir") or None, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                    pass_fds=(slot_fd,) if slot_fd is not None else ())
            except OSError as e:
                say([f"sweepd local backend: cannot start {job['argv'][0]}: "
                     f"{e.strerror or e}"])
        if trainer.proc is not None:
            pair = [trainer.proc.pid, start_ticks(trainer.proc.pid)]
            write_json(pid_path(jobs_dir, job_id), {"wrapper": me, "trainer": pair})
            say_holder(slot_fd, job, me, pair)
            # A cancel that came before the handler or the pid file saw the trainer.
            if cancel_path(jobs_dir, job_id).exists():
                trainer.cancel()
            code, signum = trainer.wait()
        ending = Ending(code, signum, cancel_path(jobs_dir, job_id).exists(), trainer.received)
        seconds = time.time() - started
        if code == 0 and not ending.cancelled:
            say([f"== Training END ({round(seconds)}s) =="])
        elif not ending.cancelled:
            killed = f", killed by signal {signum}" if signum is not None else ""
            say([f"== Training FAILED (exit={code}{killed}, {round(seconds)}s) =="])
        say(summary_lines(job, seconds, ending))
    if slot_fd is not None:   # the trainer's group is gone: the slot is free before the end
        with contextlib.suppress(OSError):
            os.close(slot_fd)
    write_json(status_path(jobs_dir, job_id), {**ending.record(), "start": started,
                                               "end": time.time()})
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3) or (len(args) == 3 and not args[2].isdigit()):
        print("usage: wrapper.py JOBS_DIR JOB_ID [SLOT_FD]", file=sys.stderr)
        return 2
    return run(Path(args[0]), args[1], int(args[2]) if len(args) == 3 else None)


if __name__ == "__main__":
    sys.exit(main())
