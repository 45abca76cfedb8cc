"""Running Slurm's commands: every command an argv list, optionally behind a prefix such as
`["ssh", "login1"]` (quoted for the remote shell, env and cwd carried), each bounded in
time; a submitting command holds its token's guard (clusters/submitguard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Protocol

from sweepd.clusters.base import ControllerUnreachable
from sweepd.clusters.submitguard import end_group, hold, record_group

COMMAND_TIMEOUT_S = 60.0

# What the client commands print when slurmctld does not answer.
UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Connection refused|connect failure|"
    r"Socket timed out|Zero Bytes were transmitted|slurm_load_jobs error|"
    r"Communication connection failure",
    re.IGNORECASE,
)


class SlurmSettings(Protocol):
    """What the backend reads from `sweepd.config.SlurmConfig` (kept structural so the
    config module and this one do not import each other)."""

    @property
    def mode(self) -> str: ...
    @property
    def repo(self) -> Path | None: ...
    @property
    def command_prefix(self) -> Sequence[str]: ...
    @property
    def partition(self) -> str | None: ...
    @property
    def time_limit(self) -> str | None: ...
    @property
    def train_command(self) -> Sequence[str]: ...
    @property
    def extra_sbatch(self) -> Sequence[str]: ...
    @property
    def allow_resume(self) -> bool: ...
    @property
    def slurm_conf(self) -> Path | None: ...


class SlurmCommandError(RuntimeError):
    """A Slurm command failed for a reason other than an unreachable controller."""




@dataclass(frozen=True)
class Result:
    rc: int
    out: str
    err: str


def raise_for(argv0: str, res: Result) -> NoReturn:
    """A failed command: an outage when its text says the controller is away, else an error."""
    text = (res.err or res.out).strip()
    if UNREACHABLE.search(text):
        raise ControllerUnreachable(f"{argv0}: {text}")
    raise SlurmCommandError(f"{argv0} exited {res.rc}: {text}")


class Commands:
    """Runs Slurm's commands as configured (prefix, env, time limit)."""

    def __init__(self, settings: SlurmSettings, env: Mapping[str, str] | None,
                 timeout_s: float) -> None:
        self.settings = settings
        self.env = dict(env or {})
        if settings.slurm_conf is not None:
            self.env.setdefault("SLURM_CONF", str(settings.slurm_conf))
        self.timeout_s = timeout_s
        # Set for one submission: the first command run under it (sbatch, ./submit.sh)
        # holds the token's guard file (clusters/submitguard.py).
        self._guard: Path | None = None

    @contextlib.contextmanager
    def guarding(self, guard: Path) -> Iterator[None]:
        """The first command run inside holds `guard`; none after the block."""
        self._guard = guard
        try:
            yield
        finally:
            self._guard = None

    def argv(self, argv: Sequence[str], cwd: Path | None) -> tuple[list[str], Path | None]:
        prefix = list(self.settings.command_prefix)
        if prefix and Path(prefix[0]).name == "ssh":
            # ssh hands one string to the remote shell: quote everything, carry env and cwd.
            env = [f"{k}={v}" for k, v in self.env.items()]
            remote = shlex.join(["env", *env, *argv]) if env else shlex.join(argv)
            if cwd is not None:
                remote = f"cd {shlex.quote(str(cwd))} && {remote}"
            return [*prefix, remote], None
        return [*prefix, *argv], cwd

    async def run(self, argv: Sequence[str], cwd: Path | None = None) -> Result:
        guard, self._guard = self._guard, None
        if guard is None:
            return await self._spawn(argv, cwd, None)
        with hold(guard) as fd:
            return await self._spawn(argv, cwd, fd)

    async def _spawn(self, argv: Sequence[str], cwd: Path | None, guard_fd: int | None
                     ) -> Result:
        """Run one command. A submitting one (`guard_fd`) gets its own process group and
        the guard's descriptor, so it can be recognised and ended after a daemon crash."""
        full, local_cwd = self.argv(argv, cwd)
        try:
            proc = await asyncio.create_subprocess_exec(
                *full,
                cwd=local_cwd,
                env={**os.environ, **self.env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=() if guard_fd is None else (guard_fd,),
                start_new_session=guard_fd is not None,
            )
        except FileNotFoundError:
            where = local_cwd if local_cwd is not None and not local_cwd.is_dir() else None
            raise SlurmCommandError(
                f"cannot run {full[0]}: " + (f"{where} does not exist" if where else
                                             "command not found on PATH")) from None
        except PermissionError:
            raise SlurmCommandError(f"{full[0]}: permission denied") from None
        if guard_fd is not None:
            record_group(guard_fd, proc.pid)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except TimeoutError:
            if guard_fd is not None:
                end_group(proc.pid)   # a wrapper's children too: they hold the guard
            proc.kill()
            await proc.wait()
            raise ControllerUnreachable(
                f"{argv[0]} did not answer within {self.timeout_s:g} s") from None
        return Result(proc.returncode or 0, out.decode(errors="replace"),
                       err.decode(errors="replace"))

