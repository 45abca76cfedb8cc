"""The `slurm` backend: the real Slurm CLIs (sbatch, squeue, scontrol, scancel, sinfo).

Two ways to submit: `direct` writes its own batch script (sweepd.clusters.slurm_script);
`submit_sh` runs maxtext-slurm's `./submit.sh` so jobs are exactly what a person would
submit (maxtext-slurm-facts.md §1). Every command is an argv list, optionally behind a
prefix such as `["ssh", "login1"]`.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Protocol

import hostlist

from sweepd.clusters import train_env
from sweepd.clusters.base import (
    NOT_IN_CLUSTER,
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    Listing,
    SchedulerState,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.slurm import carried as carry
from sweepd.clusters.slurm.script import BatchScript, render_batch_script
from sweepd.clusters.submitguard import end_group, guard_path, hold, record_group
from sweepd.util.jobname import Fitted, JobNameTooLong, fit, job_name, passthrough_part

COMMENT_PREFIX = "sweepd:"
TOKEN_ENV = "SWEEPD_TOKEN"
COMMAND_TIMEOUT_S = 60.0
# In a sweep's output directory: the train_env.sh files its submissions wrote arms into
# (one path a line), read back for the sweep's end message.
TRAIN_ENV_MARK = ".sweepd-train-env"

# What the client commands print when slurmctld does not answer.
_UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Connection refused|connect failure|"
    r"Socket timed out|Zero Bytes were transmitted|slurm_load_jobs error|"
    r"Communication connection failure",
    re.IGNORECASE,
)
# Asking about ids the controller has forgotten: an answer, not an outage.
_UNKNOWN_JOB = re.compile(r"Invalid job id specified", re.IGNORECASE)
_ALREADY_DONE = re.compile(r"already completing or completed|Invalid job id", re.IGNORECASE)
# The line submit.sh reads its job id from (it prints `[ARTIFACT] …` after it).
_SUBMITTED_LINE = "Submitted batch job"
# The lines that say why submit.sh refused, most telling first.
_FAILING_LINES = (re.compile(r"^sbatch: error:"), re.compile(r"^!!!"), re.compile(r"^\[ERROR\]"),
                  re.compile(r"error", re.IGNORECASE))

_STATES: dict[str, SchedulerState] = {
    "PENDING": SchedulerState.PENDING,
    "CONFIGURING": SchedulerState.PENDING,
    "REQUEUED": SchedulerState.PENDING,
    "REQUEUE_HOLD": SchedulerState.PENDING,
    "REQUEUE_FED": SchedulerState.PENDING,
    "RESV_DEL_HOLD": SchedulerState.PENDING,
    # Suspended jobs make no progress through no fault of their own: not a hang.
    "SUSPENDED": SchedulerState.PENDING,
    "STOPPED": SchedulerState.PENDING,
    "RUNNING": SchedulerState.RUNNING,
    "RESIZING": SchedulerState.RUNNING,
    "SIGNALING": SchedulerState.COMPLETING,
    "STAGE_OUT": SchedulerState.COMPLETING,
    "COMPLETING": SchedulerState.COMPLETING,
    "COMPLETED": SchedulerState.COMPLETED,
    "FAILED": SchedulerState.FAILED,
    "SPECIAL_EXIT": SchedulerState.FAILED,
    "CANCELLED": SchedulerState.CANCELLED,
    "REVOKED": SchedulerState.CANCELLED,
    "TIMEOUT": SchedulerState.TIMEOUT,
    "DEADLINE": SchedulerState.TIMEOUT,
    "NODE_FAIL": SchedulerState.NODE_FAIL,
    "BOOT_FAIL": SchedulerState.NODE_FAIL,
    "OUT_OF_MEMORY": SchedulerState.OUT_OF_MEMORY,
    "PREEMPTED": SchedulerState.PREEMPTED,
}

# sinfo's long state names -> the short ones sweepd uses everywhere (`sinfo %t` style).
_NODE_STATES = {"allocated": "alloc", "mixed": "mix", "drained": "drain", "draining": "drng",
                "completing": "comp", "reserved": "resv", "maintenance": "maint"}
# Flag characters sinfo appends to a state (`down*`, `idle~`, `drain$`...).
_NODE_FLAGS = "*~#!%$@^-+"


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
class _Result:
    rc: int
    out: str
    err: str


def map_state(raw: str) -> SchedulerState:
    """`CANCELLED by 0` -> CANCELLED; a state this code does not know is kept watched."""
    word = raw.split()[0].upper() if raw.strip() else ""
    return _STATES.get(word, SchedulerState.PENDING)


def wait_status_exit(raw: str) -> int | None:
    """squeue's `exit_code` is a wait(2) status: 768 -> 3, a signal -> 128 + signal."""
    if not raw.strip().isdigit():
        return None
    status = int(raw)
    return 128 + (status & 0x7F) if status & 0x7F else status >> 8


def scontrol_exit(raw: str) -> int | None:
    """scontrol's `ExitCode=3:0` (code:signal) -> 3; `0:15` -> 143."""
    code, _, sig = raw.partition(":")
    if not code.isdigit():
        return None
    return 128 + int(sig) if sig.isdigit() and int(sig) else int(code)


def slurm_time(raw: str) -> float | None:
    """Slurm's `2026-12-02T00:54:33` (the client's local time) -> epoch seconds; `N/A`,
    `Unknown`, `None` -> None."""
    try:
        return datetime.fromisoformat(raw.strip()).timestamp()
    except ValueError:
        return None


def _times(state: SchedulerState, start: str, end: str) -> tuple[float | None, float | None]:
    """A pending job's StartTime is a forecast, a running one's EndTime its time limit:
    only what has happened is kept."""
    return (slurm_time(start) if state != SchedulerState.PENDING else None,
            slurm_time(end) if state.finished else None)


def parse_squeue_poll(out: str) -> dict[str, JobStatus]:
    """Lines of `JobID|State|exit_code|Reason[|StartTime|EndTime]`."""
    found: dict[str, JobStatus] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("|", 3)]
        if len(parts) < 4 or not parts[0]:
            continue
        state = map_state(parts[1])
        exit_code = wait_status_exit(parts[2]) if state.finished else None
        # The times come last: a reason is free text, the two times never hold a `|`.
        reason_times = parts[3].rsplit("|", 2)
        raw_reason = reason_times[0].strip()
        start, end = (_times(state, reason_times[1], reason_times[2])
                      if len(reason_times) == 3 else (None, None))
        reason = raw_reason if raw_reason not in ("", "None", "(null)") else None
        found[parts[0]] = JobStatus(state, exit_code, reason, start=start, end=end)
    return found


def parse_scontrol_job(out: str) -> JobStatus | None:
    fields = dict(re.findall(r"\b(JobState|ExitCode|Reason|StartTime|EndTime)=(\S+)", out))
    if "JobState" not in fields:
        return None
    state = map_state(fields["JobState"])
    exit_code = scontrol_exit(fields.get("ExitCode", "")) if state.finished else None
    reason = fields.get("Reason")
    start, end = _times(state, fields.get("StartTime", ""), fields.get("EndTime", ""))
    return JobStatus(state, exit_code, None if reason in (None, "None") else reason,
                     start=start, end=end)


def parse_sacct_times(out: str) -> tuple[float | None, float | None]:
    """`Start|End` from `sacct -X -n -P`: the first line (the allocation)."""
    for line in out.splitlines():
        start, sep, end = line.strip().partition("|")
        if sep:
            return slurm_time(start), slurm_time(end)
    return None, None


def parse_node_states(out: str) -> dict[str, str]:
    states: dict[str, str] = {}
    for line in out.splitlines():
        node, sep, state = line.strip().partition("|")
        if sep:
            short = state.strip().lower().rstrip(_NODE_FLAGS)
            states[node] = _NODE_STATES.get(short, short)
    return states


def token_matches(token: str, name: str, comment: str) -> bool:
    if comment.strip() == COMMENT_PREFIX + token:
        return True
    # submit.sh mode: `_env_SWEEPD_TOKEN=<t>` became the name part `_env_SWEEPD_TOKEN_<t>`.
    part = passthrough_part(f"_env_{TOKEN_ENV}={token}")
    return re.search(rf"(^|-){re.escape(part)}(-|$)", name) is not None


# A sweepd token in a submit.sh job name: `..._env_SWEEPD_TOKEN_sw3-1a2b3c4d.e5f6a7-...`.
_TOKEN_IN_NAME = re.compile(
    rf"(?:^|-){re.escape(passthrough_part(f'_env_{TOKEN_ENV}='))}"
    r"(sw\d+-[0-9a-f]{8}(?:\.[0-9a-f]+)?)(?=-|$)")


def token_of(name: str, comment: str) -> str | None:
    """The sweepd token a job carries (its comment, else its submit.sh name), if any."""
    comment = comment.strip()
    if comment.startswith(COMMENT_PREFIX):
        return comment[len(COMMENT_PREFIX):] or None
    found = _TOKEN_IN_NAME.search(name)
    return found.group(1) if found else None


def passthrough_args(request: JobRequest) -> list[str]:
    return ([f"{k}={v}" for k, v in request.overrides.items()]
            + [f"_env_{k}={v}" for k, v in request.env.items()])


def resolve_model(repo: Path, model: str) -> str | None:
    """The config name submit.sh resolves `model` to: an exact `configs/<model>.gpu.yml`,
    else the one config whose name contains it; None when submit.sh would refuse it."""
    if (repo / "configs" / f"{model}.gpu.yml").is_file():
        return model
    found = sorted((repo / "configs").glob(f"*{model}*.gpu.yml"))
    return found[0].name.removesuffix(".gpu.yml") if len(found) == 1 else None


def profile_placement(repo: Path, request: JobRequest) -> train_env.Placement:
    """submit.sh mode: the request's profile as train_env.sh arms, and what the submission
    passes instead of its flags and env (`_env_TUNE_PROFILE=<name>`, `_env_K=V` for an env
    var the per-model env file also sets). Refused, nothing written, when a name or value
    is unsafe or when the per-model env file, sourced after train_env.sh, sets one of the
    profile's XLA flags: that flag would lose (last wins), so the run would measure nothing.
    An env var train_env.sh itself reads early (`ENABLE_XLA_DUMP`) is passed as `_env_` too."""
    assert request.profile is not None
    try:
        arm = train_env.arm(request.profile, request.xla_flags, request.profile_env)
    except train_env.TrainEnvError as e:
        raise SubmitRefused(str(e)) from e
    path = repo / "train_env.sh"
    if not path.is_file():
        raise SubmitRefused(f"profile {arm.name}: {path} does not exist: submit.sh mode passes "
                            "a profile through the toolkit's train_env.sh")
    model = resolve_model(repo, request.model)
    env_path = repo / "configs" / f"{model}.env.sh"
    env_file = env_path.read_text("utf-8") if model and env_path.is_file() else None
    placed = train_env.placement(arm, env_file)
    try:
        early = train_env.read_early(path.read_text("utf-8"), arm)
    except train_env.TrainEnvError as e:
        raise SubmitRefused(f"profile {arm.name}: {e}") from e
    extra = [f"_env_{k}={v}" for k, v in arm.env if k in early]
    placed = replace(placed, passthrough=tuple(dict.fromkeys([*placed.passthrough, *extra])))
    if placed.lost:
        lost = ", ".join(f"--{o.key}={o.file_value} (the profile's: {o.arm_value})"
                         for o in placed.lost)
        raise SubmitRefused(
            f"profile {arm.name} cannot take effect in submit.sh mode: configs/{model}.env.sh "
            f"sets {lost}, and it is sourced after train_env.sh, so its value wins (last "
            "wins); nothing was written or submitted. Remove the flag from the env file (or "
            "guard it), drop the profile, or run the sweep in direct mode")
    return placed


def write_arm(repo: Path, request: JobRequest, arm: train_env.Arm) -> str:
    """Add the arm to `<repo>/train_env.sh` (only ever added: an arm of the same name with
    other content, or blocks edited by hand, refuse the submission) and note the file in the
    sweep's output directory for its end message. Returns what was done, for the record."""
    path = repo / "train_env.sh"
    try:
        wrote = train_env.apply(path, arm)
    except train_env.TrainEnvError as e:
        raise SubmitRefused(f"profile {arm.name}: {e}") from e
    mark = request.output_dir / TRAIN_ENV_MARK
    known = mark.read_text("utf-8").splitlines() if mark.is_file() else []
    # The baseline arm is built into the block and never written: nothing to report.
    if arm.name != train_env.BASELINE and str(path) not in known:
        mark.parent.mkdir(parents=True, exist_ok=True)
        train_env.write_atomic(mark, "".join(f"{line}\n" for line in [*known, str(path)]))
    return (f"train_env.sh arm {arm.describe()} " + ("added to " if wrote else "already in ")
            + str(path))


def leftover_note(output_dir: Path) -> str | None:
    """What the sweep's submissions left in train_env.sh files, and how to remove it."""
    mark = output_dir / TRAIN_ENV_MARK
    if not mark.is_file():
        return None
    notes = []
    for line in mark.read_text("utf-8").splitlines():
        path = Path(line)
        try:
            text = train_env.leftover(path)
        except (OSError, train_env.TrainEnvError) as e:
            notes.append(f"{path}: cannot be read back ({e})")
            continue
        notes.append(text)
        if train_env.arms(path.read_text("utf-8")):
            notes.append(f"  remove them (nothing else in the file changes): "
                         f"python -m sweepd.clusters.train_env clean {path}")
    return "\n".join(notes) or None


def model_spec(request: JobRequest) -> str:
    """`model[[:alias]:tag]` for submit.sh."""
    if request.alias:
        return f"{request.model}:{request.alias}:{request.tag or ''}"
    return f"{request.model}:{request.tag}" if request.tag else request.model


def submit_sh_job_id(out: str) -> str | None:
    """The job id as submit.sh itself reads it: the last word of the line matching
    `Submitted batch job` (not the last word of the output: `[ARTIFACT] …` follows it)."""
    ids = [line.split()[-1] for line in out.splitlines() if _SUBMITTED_LINE in line]
    return ids[-1] if ids and ids[-1].isdigit() else None


def failing_line_first(output: str) -> str:
    """submit.sh's whole output with the line that says why it failed (`sbatch: error: …`,
    `!!! …`, `[ERROR] …`) moved to the front: a person reads the first line."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    for pattern in _FAILING_LINES:
        hit = next((i for i, line in enumerate(lines) if pattern.search(line)), None)
        if hit is not None:
            return "\n".join([lines[hit], *lines[:hit], *lines[hit + 1:]])
    return "\n".join(lines)


def _submitted_id(out: str) -> str:
    words = out.split()
    if not words or not words[-1].split(";")[0].isdigit():
        raise SubmitRefused(f"no job id in sbatch output: {out.strip()!r}")
    return words[-1].split(";")[0]


class SlurmCluster:
    name = "slurm"

    def __init__(
        self,
        settings: SlurmSettings,
        *,
        env: Mapping[str, str] | None = None,
        header_command: Sequence[str] | None = None,
        summary_command: Sequence[str] | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> None:
        if settings.mode not in ("direct", "submit_sh"):
            raise ValueError(f"unknown slurm mode {settings.mode!r}")
        if settings.mode == "submit_sh" and settings.repo is None:
            raise ValueError("submit_sh mode needs `repo` (the maxtext-slurm checkout)")
        if settings.mode == "direct" and not settings.train_command:
            raise ValueError("direct mode needs `train_command`")
        self.settings = settings
        self._env = dict(env or {})
        if settings.slurm_conf is not None:
            self._env.setdefault("SLURM_CONF", str(settings.slurm_conf))
        self._header_command = header_command
        self._summary_command = summary_command
        self._timeout_s = timeout_s
        # Set for one submission: the first command run under it (sbatch, ./submit.sh)
        # holds the token's guard file (clusters/submitguard.py).
        self._guard: Path | None = None
        self._train_env_lock = asyncio.Lock()
        self._remote_user: str | None = None   # who Slurm sees behind the command prefix

    @property
    def submit_timeout_s(self) -> float:
        """Wall seconds after which a submitting command is killed."""
        return self._timeout_s

    # -- running commands -------------------------------------------------------------

    def _argv(self, argv: Sequence[str], cwd: Path | None) -> tuple[list[str], Path | None]:
        prefix = list(self.settings.command_prefix)
        if prefix and Path(prefix[0]).name == "ssh":
            # ssh hands one string to the remote shell: quote everything, carry env and cwd.
            env = [f"{k}={v}" for k, v in self._env.items()]
            remote = shlex.join(["env", *env, *argv]) if env else shlex.join(argv)
            if cwd is not None:
                remote = f"cd {shlex.quote(str(cwd))} && {remote}"
            return [*prefix, remote], None
        return [*prefix, *argv], cwd

    async def _run(self, argv: Sequence[str], cwd: Path | None = None) -> _Result:
        guard, self._guard = self._guard, None
        if guard is None:
            return await self._spawn(argv, cwd, None)
        with hold(guard) as fd:
            return await self._spawn(argv, cwd, fd)

    async def _spawn(self, argv: Sequence[str], cwd: Path | None, guard_fd: int | None
                     ) -> _Result:
        """Run one command. A submitting one (`guard_fd`) gets its own process group and
        the guard's descriptor, so it can be recognised and ended after a daemon crash."""
        full, local_cwd = self._argv(argv, cwd)
        try:
            proc = await asyncio.create_subprocess_exec(
                *full,
                cwd=local_cwd,
                env={**os.environ, **self._env},
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
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout_s)
        except TimeoutError:
            if guard_fd is not None:
                end_group(proc.pid)   # a wrapper's children too: they hold the guard
            proc.kill()
            await proc.wait()
            raise ControllerUnreachable(
                f"{argv[0]} did not answer within {self._timeout_s:g} s") from None
        return _Result(proc.returncode or 0, out.decode(errors="replace"),
                       err.decode(errors="replace"))

    @staticmethod
    def _raise_for(argv0: str, res: _Result) -> None:
        text = (res.err or res.out).strip()
        if _UNREACHABLE.search(text):
            raise ControllerUnreachable(f"{argv0}: {text}")
        raise SlurmCommandError(f"{argv0} exited {res.rc}: {text}")

    # -- submit -----------------------------------------------------------------------

    async def submit(self, request: JobRequest) -> Submitted:
        self._guard = guard_path(request.output_dir, request.token)
        try:
            if self.settings.mode == "submit_sh":
                return await self._submit_sh(request)
            return await self._submit_direct(request)
        finally:
            self._guard = None

    def _sbatch_args(self, request: JobRequest) -> list[str]:
        args = ["-N", str(len(request.nodes)),
                "-w", hostlist.collect_hostlist(list(request.nodes))]
        # The spec's partition and the run's time limit before the configured defaults:
        # the partition the slot was resolved in is the one the jobs must run in.
        partition = request.partition or self.settings.partition
        if partition:
            args += ["-p", partition]
        time_limit = request.time_limit or self.settings.time_limit
        if time_limit:
            args += ["-t", time_limit]
        # --no-requeue: a job pinned to a node that died would be requeued by Slurm to wait
        # for that node forever; the engine decides retries itself, on evidence.
        return [*args, *self.settings.extra_sbatch, "--no-requeue",
                f"--comment={COMMENT_PREFIX}{request.token}"]

    def name_of(self, request: JobRequest) -> Fitted:
        """The job name a submission would get, and the overrides that leave it, without
        submitting or writing anything (`sweepd validate`). Raises SubmitRefused (SpecRefused
        when the spec causes it) as the submission would."""
        if self.settings.mode != "submit_sh":
            try:
                # sweepd's own script: every override reaches the train command; those
                # that would make the name too long only leave the name.
                return fit(request.model, request.tag, passthrough_args(request))
            except JobNameTooLong as e:
                raise SpecRefused(str(e)) from e
        assert self.settings.repo is not None
        repo = request.workdir or self.settings.repo
        placed = profile_placement(repo, request) if request.profile is not None else None
        named, name, _, carried = self._sh_named(request, placed, repo)
        return Fitted(name, tuple(named), carried)

    async def _submit_direct(self, request: JobRequest) -> Submitted:
        passthrough = passthrough_args(request)
        fitted = self.name_of(request)
        name = fitted.name
        out_dir = request.output_dir.resolve()
        script = render_batch_script(BatchScript(
            job_name=name, model=request.model, passthrough=passthrough, env=request.env,
            train_command=self.settings.train_command, header_command=self._header_command,
            summary_command=self._summary_command, commit=request.commit,
            xla_flags=request.xla_flags, output_dir=str(out_dir)))
        path = out_dir / f".sweepd-{request.token}.sbatch"
        await asyncio.to_thread(_write_script, path, script)
        chdir = [f"--chdir={request.workdir}"] if request.workdir else []
        res = await self._run(["sbatch", "-J", name, *self._sbatch_args(request), *chdir,
                               f"--output={out_dir}/%j-{name}.log", str(path)])
        job_id = self._submit_result("sbatch", res)
        return Submitted(job_id, name, out_dir / f"{job_id}-{name}.log",
                         name_note=fitted.note)

    async def _submit_sh(self, request: JobRequest) -> Submitted:
        assert self.settings.repo is not None  # checked in __init__
        if request.xla_flags and request.profile is None:
            # submit.sh takes the model's XLA_FLAGS from its env file; a passthrough
            # `_env_XLA_FLAGS=` would replace them, not add to them. Only a named profile's
            # flags reach the job (as train_env.sh arms).
            raise SubmitRefused(
                f"this run adds XLA flags ({' '.join(request.xla_flags)}) under no profile "
                "name, which submit.sh mode cannot pass on: use direct mode "
                "(cluster.slurm.mode: direct)")
        repo = request.workdir or self.settings.repo  # a checkout of one commit, or the repo
        placed = None
        if request.profile is not None:
            placed = await asyncio.to_thread(profile_placement, repo, request)
        passthrough, name, prepared, carried = self._sh_named(request, placed, repo)
        if placed is not None:
            async with self._train_env_lock:  # read-modify-write of one shared file
                wrote = await asyncio.to_thread(write_arm, repo, request, placed.arm)
            prepared = f"{wrote}; {prepared}" if prepared else wrote
        written = None
        if carried:
            written = await asyncio.to_thread(self._carry, repo, request, carried)
            said = (f"overrides {' '.join(carried)} carried in configs/{written.name}.gpu.yml "
                    f"(the job name would be over 243 bytes with them; a copy: {written.copy})")
            prepared = f"{prepared}; {said}" if prepared else said
        try:
            spec_request = replace(request, model=written.name) if written else request
            sub = await self._run_submit_sh(spec_request, repo, passthrough, name)
        except SubmitRefused as e:
            if prepared is None:
                raise
            raise SubmitRefused(f"{e}\n(before it: {prepared})") from e
        finally:
            if written is not None:   # submit.sh froze its copy into the job's artifact
                await asyncio.to_thread(carry.remove, written)
        return replace(sub, prepared=prepared)

    @staticmethod
    def _carry(repo: Path, request: JobRequest, carried: Sequence[str]) -> carry.Written:
        model = resolve_model(repo, request.model)
        if model is None:   # submit.sh would refuse the name; say so before writing
            raise SubmitRefused(f"!!! Unknown model: {request.model} (no single "
                                f"configs/*{request.model}*.gpu.yml in {repo})")
        try:
            return carry.write(repo, model, request.token, carried, request.output_dir)
        except (carry.CarryError, OSError) as e:
            raise SubmitRefused(str(e)) from e

    def _sh_named(self, request: JobRequest, placed: train_env.Placement | None,
                  repo: Path | None = None
                  ) -> tuple[list[str], str, str | None, tuple[str, ...]]:
        """(passthrough, job name, a note, the overrides carried in a per-job config).
        sweepd's token rides in the name when it fits (`_env_SWEEPD_TOKEN=`); it is always
        in `--comment`, which recovery reads first, so a name that fits only without it
        goes without it (noted). A name still too long carries MaxText overrides in a
        per-job config (clusters/carried.py), longest first, until it fits; when even that
        cannot make it fit, refused (the spec must change), nothing written."""
        base = self._sh_passthrough(request, placed)
        with_token = [*base, f"_env_{TOKEN_ENV}={request.token}"]
        try:
            return with_token, job_name(request.model, request.tag, with_token), None, ()
        except JobNameTooLong as e:
            too_long = e
        dropped = (f"sweepd's token in --comment only: with it the job name "
                   f"would be over the limit ({too_long})")
        try:
            return base, job_name(request.model, request.tag, base), dropped, ()
        except JobNameTooLong:
            pass
        model = (resolve_model(repo, request.model) if repo is not None else None) \
            or request.model
        shim = carry.config_name(model, request.token)
        for args, note in ((with_token, None), (base, dropped)):
            try:
                fitted = fit(shim, request.tag, args)
            except JobNameTooLong as e:
                last = e
                continue
            return list(fitted.named), fitted.name, note, fitted.carried
        hint = f"; shorten the profile's name ({request.profile})" if placed else ""
        raise SpecRefused(f"{last}{hint}") from last

    @staticmethod
    def _sh_passthrough(request: JobRequest, placed: train_env.Placement | None) -> list[str]:
        """The overrides and env, where a profile's own env vars ride in its train_env.sh
        arm (and its flags never in the passthrough: `_env_XLA_FLAGS=` would replace)."""
        if placed is None:
            return passthrough_args(request)
        env = {k: v for k, v in request.env.items() if k not in request.profile_env}
        return [*(f"{k}={v}" for k, v in request.overrides.items()),
                *(f"_env_{k}={v}" for k, v in env.items()), *placed.passthrough]

    async def _run_submit_sh(self, request: JobRequest, repo: Path, passthrough: list[str],
                             name: str) -> Submitted:
        argv = [*self._workspace_env(repo), "./submit.sh", model_spec(request),
                *self._sbatch_args(request), "--", *passthrough]
        try:
            res = await self._run(argv, cwd=repo)
        except ControllerUnreachable as e:
            # Timed out: it may have submitted before it was stopped.
            found = await self._settle_unclear(request.token, None, str(e))
            if found is None:
                raise
            return found
        job_id = submit_sh_job_id(res.out)
        if res.rc == 0 and job_id is not None:
            return await self._submitted_sh(job_id, name)
        why = f"submit.sh exited {res.rc}" + ("" if job_id else " and printed no job id")
        found = await self._settle_unclear(request.token, job_id, why)
        if found is not None:
            return found
        output = failing_line_first(res.out + "\n" + res.err)
        if _UNREACHABLE.search(output):
            raise ControllerUnreachable(f"submit.sh: {output}")
        first, _, rest = output.partition("\n")
        raise SubmitRefused(f"{first} ({why}; its whole output follows)\n{rest}".rstrip())

    def _job_workspace(self) -> Path:
        """Where submit.sh writes logs: `JOB_WORKSPACE` as submit.sh sees it (relative to
        the configured repo), else that repo's `outputs/` — also for a commit's checkout
        (see _workspace_env)."""
        assert self.settings.repo is not None
        ssh = bool(self.settings.command_prefix) and \
            Path(self.settings.command_prefix[0]).name == "ssh"
        seen = self._env if ssh else {**os.environ, **self._env}
        raw = seen.get("JOB_WORKSPACE")
        return self.settings.repo / raw if raw else self.settings.repo / "outputs"

    def _workspace_env(self, repo: Path) -> list[str]:
        """A commit's checkout would keep its logs in its own `outputs/`, which goes when
        the sweep ends: point submit.sh at the person's workspace instead."""
        if repo == self.settings.repo:
            return []
        return ["env", f"JOB_WORKSPACE={self._job_workspace()}"]

    async def _submitted_sh(self, job_id: str, name: str, note: str | None = None) -> Submitted:
        """The job's record as Slurm has it: submit.sh resolves the model name (`70b` ->
        `llama2-70b`), and `StdOut` is the log's real path wherever JOB_WORKSPACE points.
        The job exists now, so a failed lookup must not turn into an exception."""
        try:
            found = await self._job_record(job_id)
        except (ControllerUnreachable, SlurmCommandError):
            found = None
        if found is not None:
            name = found[0]
        log_path = found[1] if found is not None and found[1] is not None else \
            self._job_workspace() / f"{job_id}-{name}.log"
        return Submitted(job_id, name, log_path, note=note)

    async def _settle_unclear(self, token: str, printed: str | None,
                              why: str) -> Submitted | None:
        """A submission whose outcome is unclear (no job id, an exit code after one, a
        timeout): the queue decides. The job submit.sh named, else the newest with our
        token, is adopted; any other job with our token is a duplicate and is cancelled.
        None: the scheduler has no such job (a refusal). Raises ControllerUnreachable
        when the queue cannot be asked (the write-ahead row is reconciled later)."""
        ids = [str(i) for i in sorted(await self._jobs_with_token(token), reverse=True)]
        for candidate in dict.fromkeys([*([printed] if printed else []), *ids]):
            record = await self._job_record(candidate)
            if record is None:
                continue
            extra = [i for i in ids if i != candidate]
            for other in extra:
                await self.cancel(other)
            note = (f"{why}; job {candidate} with token {token} found in the queue: adopted"
                    + (f"; duplicate job(s) {', '.join(extra)} cancelled" if extra else ""))
            return await self._submitted_sh(candidate, record[0], note)
        return None

    def _submit_result(self, argv0: str, res: _Result) -> str:
        if res.rc != 0:
            text = (res.err + res.out).strip()
            if _UNREACHABLE.search(text):
                raise ControllerUnreachable(f"{argv0}: {text}")
            raise SubmitRefused(f"{argv0} exited {res.rc}: {text}")
        return _submitted_id(res.out)

    # -- queries ----------------------------------------------------------------------

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        ids = list(dict.fromkeys(backend_ids))
        if not ids:
            return {}
        res = await self._run(["squeue", "--noheader", "--states=all", "-j", ",".join(ids),
                               "-O", "JobID:|,State:|,exit_code:|,Reason:|,StartTime:|,"
                               "EndTime:"])
        if res.rc != 0 and not _UNKNOWN_JOB.search(res.err):
            self._raise_for("squeue", res)
        found = parse_squeue_poll(res.out) if res.rc == 0 else {}
        result: dict[str, JobStatus] = {}
        for job_id in ids:
            status = found.get(job_id)
            if status is None:
                status = await self._scontrol_status(job_id)
            result[job_id] = status
        return result

    async def _scontrol_status(self, job_id: str) -> JobStatus:
        res = await self._run(["scontrol", "show", "job", job_id])
        if res.rc != 0:
            if _UNKNOWN_JOB.search(res.err):
                return await self._gone(job_id)
            self._raise_for("scontrol", res)
        return parse_scontrol_job(res.out) or await self._gone(job_id)

    async def _gone(self, job_id: str) -> JobStatus:
        """A job the controller has forgotten (MinJobAge passed): its times from accounting
        where the cluster keeps it; without accounting, none (the log's own times serve)."""
        try:
            res = await self._run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "Start,End"])
        except SlurmCommandError:   # no sacct on this host
            return JobStatus(SchedulerState.GONE)
        start, end = parse_sacct_times(res.out) if res.rc == 0 else (None, None)
        return JobStatus(SchedulerState.GONE, start=start, end=end)

    async def _job_record(self, job_id: str) -> tuple[str, Path | None] | None:
        """(job name, expanded StdOut path) from `scontrol show job -o`."""
        res = await self._run(["scontrol", "show", "job", "-o", job_id])
        if res.rc != 0:
            if _UNKNOWN_JOB.search(res.err):
                return None
            self._raise_for("scontrol", res)
        # JobName may hold spaces in general, but the next field is always UserId.
        name = re.search(r"\bJobName=(.*?) UserId=", res.out)
        stdout = re.search(r"\bStdOut=(\S+)", res.out)
        if name is None:
            return None
        return name.group(1), Path(stdout.group(1)) if stdout else None

    async def _jobs_with_token(self, token: str) -> list[int]:
        res = await self._run(["squeue", "--noheader", "--states=all",
                               "-O", "JobID:|,Comment:1000|,Name:"])
        if res.rc != 0:
            self._raise_for("squeue", res)
        matches: list[int] = []
        for line in res.out.splitlines():
            parts = [p.strip() for p in line.split("|", 2)]
            if len(parts) == 3 and parts[0].isdigit() and token_matches(token, parts[2], parts[1]):
                matches.append(int(parts[0]))
        return matches

    async def find_by_token(self, token: str) -> Submitted | None:
        matches = await self._jobs_with_token(token)
        if not matches:
            return None
        job_id = str(max(matches))  # a resubmission under the same token is the live one
        record = await self._job_record(job_id)
        if record is None or record[1] is None:
            return None
        return Submitted(job_id, record[0], record[1])

    async def live_tokens(self) -> dict[str, str]:
        """Job id -> sweepd token of every job not yet finished that carries one."""
        res = await self._run(["squeue", "--noheader", "-O", "JobID:|,Comment:1000|,Name:"])
        if res.rc != 0:
            self._raise_for("squeue", res)
        found: dict[str, str] = {}
        for line in res.out.splitlines():
            parts = [p.strip() for p in line.split("|", 2)]
            token = token_of(parts[2], parts[1]) if len(parts) == 3 else None
            if token is not None and parts[0].isdigit():
                found[parts[0]] = token
        return found

    async def cancel(self, backend_id: str) -> None:
        res = await self._run(["scancel", backend_id])
        if res.rc != 0 and not _ALREADY_DONE.search(res.err):
            self._raise_for("scancel", res)

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        if not nodes:
            return {}
        res = await self._run(["sinfo", "-N", "-h", "-n", hostlist.collect_hostlist(list(nodes)),
                               "-o", "%N|%T"])
        if res.rc != 0:
            self._raise_for("sinfo", res)
        states = parse_node_states(res.out)
        return {n: states.get(n, NOT_IN_CLUSTER) for n in nodes}

    async def resume_node(self, node: str) -> None:
        """Return a drained/down node to service (xla-tuning.SKILL.md: drained node -> RESUME)."""
        if not self.settings.allow_resume:
            raise PermissionError("resuming nodes is not allowed (cluster.slurm.allow_resume)")
        res = await self._run(["scontrol", "update", f"NodeName={node}", "State=RESUME",
                               "Reason=sweepd"])
        if res.rc != 0:
            self._raise_for("scontrol", res)

    async def show_node(self, node: str) -> str:
        res = await self._run(["scontrol", "show", "node", node])
        if res.rc != 0:
            text = (res.err or res.out).strip()
            if _UNREACHABLE.search(text):
                raise ControllerUnreachable(f"scontrol: {text}")
            return f"scontrol exited {res.rc}: {text}"
        return res.out

    def node_shell(self) -> list[str]:
        # BatchMode: never wait for a password nobody will type; ConnectTimeout: a dead
        # node answers "unreachable" well before the probe's own time limit.
        return ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "{node}"]

    async def ping(self) -> None:
        """Whether the Slurm client can talk to its controller: returns when it answers;
        ControllerUnreachable when it is configured but away (wait, as for an outage);
        SlurmCommandError when the client cannot run at all (no configuration source, a
        bad slurm.conf): a configuration problem, refused at start."""
        res = await self._run(["sinfo", "-h", "-o", "%P"])
        if res.rc != 0:
            self._raise_for("sinfo", res)

    async def end_note(self, output_dir: Path) -> str | None:
        return await asyncio.to_thread(leftover_note, output_dir)


    async def idle_nodes(self, partition: str | None) -> Listing:
        argv = ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N", *_partition_args(partition)]
        res = await self._run(argv)
        if res.rc != 0:
            self._raise_for("sinfo", res)
        found = hostlist.numerically_sorted(
            {line.strip() for line in res.out.splitlines() if line.strip()})
        return Listing(found, f"{' '.join(argv)}: {hostlist.collect_hostlist(found) or 'none'}")

    async def _user(self) -> str:
        """The user Slurm's commands run as: behind a `command_prefix` (ssh to a login node,
        sudo -u) that is the remote one, asked there once; locally, this process's."""
        if not self.settings.command_prefix:
            return getpass.getuser()
        if self._remote_user is None:
            res = await self._run(["id", "-un"])
            name = res.out.strip()
            if res.rc != 0 or not name:
                raise SlurmCommandError(f"id -un behind {self.settings.command_prefix[0]} "
                                        f"exited {res.rc}: {(res.err or res.out).strip()}")
            self._remote_user = name
        return self._remote_user

    async def others_jobs(self, partition: str | None) -> Listing:
        argv = ["squeue", "-h", "-t", "PENDING,RUNNING", "-o", "%i|%u|%T|%N",
                *_partition_args(partition)]
        res = await self._run(argv)
        if res.rc != 0:
            self._raise_for("squeue", res)
        me = await self._user()
        rows = [line.split("|") for line in res.out.splitlines() if line.count("|") == 3]
        return Listing([" ".join(r) for r in rows if r[1] != me],
                       f"{' '.join(argv)} (users other than {me})")

    async def close(self) -> None:
        return None


def _write_script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _partition_args(partition: str | None) -> list[str]:
    return ["-p", partition] if partition else []
