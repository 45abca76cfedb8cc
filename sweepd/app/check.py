"""`sweepd check`: the SKILL.md's pre-flight, for the daemon's configuration.

Each check is one line, ok or FAIL with the reason: the scheduler answers, the toolkit
repo is a repo root with submit.sh, a dry job prints what sweepd reads (opt-in: it uses
the cluster), the image container_env.sh names is reachable, the chat receives a test
message. Nothing is written to sweepd's state.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweepd.app import startup
from sweepd.clusters.base import (
    ControllerUnreachable,
    JobRequest,
    SubmitRefused,
)
from sweepd.clusters.factory import make_cluster
from sweepd.config import Config, ConfigError, SlurmConfig
from sweepd.monitor.facts import SignalFact, StepFact, SummaryFact
from sweepd.monitor.parse import parse_line

IMAGE_TIMEOUT_S = 30.0
_DOCKER_IMAGE = re.compile(r"^\s*(?:export\s+)?DOCKER_IMAGE=(.*)$")


@dataclass(frozen=True)
class Line:
    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


@dataclass(frozen=True)
class DryJob:
    """A short job to submit (`--job MODEL --nodes NODES`): it costs cluster time."""

    model: str
    nodes: Sequence[str]
    overrides: Mapping[str, str]
    timeout_s: float


async def run_checks(config: Config, say: Callable[[str], None],
                     dry_job: DryJob | None = None,
                     env: Mapping[str, str] | None = None) -> int:
    """Prints one line per check; the count of failures."""
    lines = [_dirs(config), *await _scheduler(config, env)]
    for line in lines:
        say(str(line))
    if not config.cluster.planning_pool:   # a warning, no failure (docs/local.md "Memory")
        say("warn memory: the config names no gpu_memory_gib, so the pool is unknown until "
            "a run prints Memstats (set it: sweepd init --gpu-memory-gib, e.g. 15.75 for one "
            "TPU v5e chip)")
    slurm = config.cluster.slurm
    more: list[Line] = []
    if config.cluster.backend == "slurm" and slurm.mode == "submit_sh":
        more.append(_repo(slurm))
        more.append(await _image(slurm))
    for line in more:
        say(str(line))
    job = await _dry_job(config, dry_job, scheduler_ok=all(x.ok for x in lines))
    say(str(job))
    chat = await _chat(config, env)
    say(str(chat))
    return sum(not x.ok for x in [*lines, *more, job, chat])


def _dirs(config: Config) -> Line:
    try:
        startup.check_dirs(config)
    except ConfigError as e:
        return Line("state", False, str(e))
    d = config.daemon
    return Line("state", True, f"database in {d.state_dir}, socket {d.socket}")


async def _scheduler(config: Config, env: Mapping[str, str] | None) -> list[Line]:
    if config.cluster.backend == "sim":
        scenario = config.cluster.sim.scenario or "the embedded default"
        return [Line("scheduler", True, f"the simulated cluster (scenario: {scenario})")]
    if config.cluster.backend == "local":
        return _local(config)
    slurm = config.cluster.slurm
    try:
        startup.check_slurm_files(slurm, env)
        note = await startup.ping_slurm(slurm)
    except ConfigError as e:
        return [Line("scheduler", False, str(e))]
    if note is not None:
        return [Line("scheduler", False, f"{note}: sweepd would start and wait")]
    how = shlex.join(slurm.command_prefix) + " " if slurm.command_prefix else ""
    return [Line("scheduler", True, f"Slurm answers ({how}sinfo)"),
            *([await _partition(slurm)] if slurm.partition else [])]


async def _partition(slurm: SlurmConfig) -> Line:
    """The configured partition, against sinfo's (a spec's own is checked by validate)."""
    from sweepd.clusters.slurm import SlurmCluster
    from sweepd.clusters.slurm.partition import partition_problem

    assert slurm.partition is not None
    try:
        known = await SlurmCluster(slurm).partitions()
    except (ControllerUnreachable, RuntimeError) as e:
        return Line("partition", False, f"sinfo did not list the partitions: "
                    f"{str(e).strip().splitlines()[0] if str(e).strip() else e!r}")
    problem = partition_problem(slurm.partition, known)
    if problem is not None:
        return Line("partition", False, problem)
    return Line("partition", True, f"partition {slurm.partition!r} exists")


def _local(config: Config) -> list[Line]:
    from sweepd.clusters.local.checks import describe, train_command_problem
    from sweepd.clusters.local.slot import lock_problem

    local = config.cluster.local
    problem = train_command_problem(local)
    slot = lock_problem(local.lock_path())
    return [Line("scheduler", True, f"the local backend: one node, {local.node_name()} "
                 "(this host); jobs run one at a time as process groups here"),
            Line("train command", problem is None, problem or describe(local)),
            Line("slot", slot is None, slot or f"{local.lock_path()}: one job at a time "
                 "across every sweepd process on this machine")]


def _repo(slurm: SlurmConfig) -> Line:
    try:
        startup.check_repo(slurm)
    except ConfigError as e:
        return Line("toolkit", False, str(e))
    assert slurm.repo is not None
    if not (slurm.repo / ".git").is_dir():
        # submit.sh takes a `.git` directory beside it for the repo root, else snapshots
        # the parent folder (maxtext-slurm-facts.md §1; a git worktree has a `.git` file).
        return Line("toolkit", False, f"{slurm.repo} has submit.sh but is not a repo root "
                    "(no .git directory): submit.sh would snapshot its parent folder")
    return Line("toolkit", True, f"{slurm.repo} is a repo root with submit.sh")


def docker_image(repo: Path) -> str | None:
    """container_env.sh's `DOCKER_IMAGE=…` (the SKILL.md reads it with grep/cut/tr)."""
    path = repo / "container_env.sh"
    if not path.is_file():
        return None
    for line in path.read_text("utf-8", errors="replace").splitlines():
        if m := _DOCKER_IMAGE.match(line):
            value = m.group(1).split("#", 1)[0].strip()
            return value.strip("\"'") or None
    return None


async def _image(slurm: SlurmConfig) -> Line:
    assert slurm.repo is not None
    if not (slurm.repo / "container_env.sh").is_file():
        return Line("image", False, f"no {slurm.repo / 'container_env.sh'} (where the "
                    "toolkit names its image)")
    image = docker_image(slurm.repo)
    if image is None:
        return Line("image", False, f"{slurm.repo / 'container_env.sh'} sets no DOCKER_IMAGE")
    argv = [*slurm.command_prefix, *slurm.image_check_command, image]
    if slurm.command_prefix and os.path.basename(slurm.command_prefix[0]) == "ssh":
        argv = [*slurm.command_prefix, shlex.join([*slurm.image_check_command, image])]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
    except OSError as e:
        return Line("image", False, f"cannot run {argv[0]}: {e.strerror}")
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), IMAGE_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return Line("image", False, f"{shlex.join(argv)} did not answer within "
                    f"{IMAGE_TIMEOUT_S:g} s")
    text = out.decode(errors="replace").strip()
    first = text.splitlines()[0] if text else ""
    if proc.returncode != 0:
        return Line("image", False, f"{image} is not reachable: {shlex.join(argv)} exited "
                    f"{proc.returncode}" + (f": {first}" if first else ""))
    return Line("image", True, f"{image} is reachable ({shlex.join(argv[:-1])})")


async def _dry_job(config: Config, job: DryJob | None, scheduler_ok: bool) -> Line:
    if config.cluster.backend == "sim":
        return Line("dry job", True, "the simulated trainer prints the toolkit's lines")
    if job is None:
        return Line("dry job", True, "skipped (it uses the cluster): add --job MODEL "
                    "--nodes NODES to submit a short job and read its log")
    if not scheduler_ok:
        return Line("dry job", False, "not submitted: the scheduler check failed")
    return await asyncio.wait_for(_submit_dry(config, job), job.timeout_s + 120)


async def _submit_dry(config: Config, job: DryJob) -> Line:
    with tempfile.TemporaryDirectory(prefix="sweepd-check-") as out:
        # The local backend keeps the dry job's records in the scratch folder, not the state.
        cluster = make_cluster(config, Path(out))
        nodes = list(job.nodes) or [config.cluster.local.node_name()]
        request = JobRequest(token=f"check-{secrets.token_hex(4)}", model=job.model,
                             nodes=nodes, output_dir=Path(out),
                             overrides=dict(job.overrides), tag="sweepd-check")
        try:
            sub = await cluster.submit(request)
        except (SubmitRefused, ControllerUnreachable, RuntimeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
            return Line("dry job", False, f"not submitted: {first}")
        deadline = time.monotonic() + job.timeout_s
        while True:
            try:
                status = (await cluster.poll([sub.backend_id]))[sub.backend_id]
            except ControllerUnreachable:
                status = None
            if status is not None and status.state.finished:
                break
            if time.monotonic() > deadline:
                await cluster.cancel(sub.backend_id)
                return Line("dry job", False, f"job {sub.backend_id} did not end within "
                            f"{job.timeout_s:g} s (cancelled)")
            await asyncio.sleep(1.0)
        return read_dry_log(sub.backend_id, sub.log_path)


def read_dry_log(job_id: str, log: Path) -> Line:
    """What sweepd reads from a job's log: step lines with Tokens/s/device (rank 0) and
    the JOB SUMMARY status. Missing ones are named."""
    try:
        text = log.read_text("utf-8", errors="replace")
    except OSError as e:
        return Line("dry job", False, f"job {job_id}: its log {log} cannot be read "
                    f"({e.strerror})")
    facts = [parse_line(raw) for raw in text.splitlines()]
    steps = [f for f in facts if isinstance(f, StepFact) and f.tgs is not None]
    summary = next((f for f in facts if isinstance(f, SummaryFact)), None)
    missing = []
    if not steps:
        missing.append("no `completed step: N, …, Tokens/s/device: X` line")
    if summary is None:
        missing.append("no JOB SUMMARY block with a `Status:` line")
    if missing:
        cause = failure_cause(text.splitlines(), facts, summary)
        return Line("dry job", False, f"job {job_id}: {'; '.join(missing)} in {log}"
                    + (f"; cause: {cause}" if cause else ""))
    assert summary is not None
    return Line("dry job", True, f"job {job_id}: {len(steps)} step line(s) with TGS "
                f"(last {steps[-1].tgs:g}/device), summary {summary.status} "
                f"(exit {summary.exit_code}) in {log}")


# A line that looks like an error where no failure signature matched (the trainer's own
# refusal, a shell's `command not found`).
_ERROR_LOOKING = re.compile(r"error|fatal|failed|exception|traceback|not found|denied",
                            re.IGNORECASE)


def failure_cause(lines: Sequence[str], facts: Sequence[object],
                  summary: SummaryFact | None) -> str | None:
    """Why a dry job printed no step line, in one line: the first failure signature the
    classifier knows, else the log's last error-looking line (not the summary's), with the
    summary's status; None when the log says nothing of it."""
    signal = next((f.text for f in facts if isinstance(f, SignalFact)), None)
    found = signal or next((ln.strip() for ln in reversed(lines)
                            if _ERROR_LOOKING.search(ln) and "Status:" not in ln
                            and "JOB SUMMARY" not in ln), None)
    status = None
    if summary is not None:
        inner = f"exit {summary.exit_code}" if summary.exit_code is not None else summary.detail
        status = f"Status: {summary.status} ({inner})"
    if found and status:
        return f"{found} ({status})"
    return found or status


async def _chat(config: Config, env: Mapping[str, str] | None) -> Line:
    tg = config.telegram
    if not tg.enabled:
        return Line("chat", True, "Telegram off: messages go to the log")
    from sweepd.notify import chat_credentials, timing_of
    from sweepd.notify.bot import make_bot

    try:
        creds, chat_ids = chat_credentials(tg, env)
    except ConfigError as e:
        return Line("chat", False, str(e))
    bot = make_bot(creds.token, tg.base_url, timing_of(tg), proxy=tg.proxy)
    try:
        for chat in chat_ids:
            await bot.send_message(chat, "sweepd check: this chat receives sweepd's "
                                   "messages")
    except Exception as e:   # the Bot API's and the network's errors alike: one line
        why = str(e).replace(creds.token.value, "[REDACTED]")
        return Line("chat", False, f"the test message was not delivered ({type(e).__name__}:"
                    f" {why}); without direct internet set telegram.proxy or telegram.base_url")
    finally:
        await bot.shutdown()
    return Line("chat", True, f"test message delivered to {', '.join(map(str, chat_ids))}")
