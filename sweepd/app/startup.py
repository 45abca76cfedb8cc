"""What a start needs from its environment, checked before anything is written.

Every problem found here is a configuration or environment problem: one line, exit 2, no
state directory, lock or database left behind. A Slurm controller that is configured but
does not answer right now is not one: the daemon starts and waits, as for an outage.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sweepd.clusters.base import ControllerUnreachable
from sweepd.config import Config, ConfigError, SlurmConfig

# What the slurm backend runs (sacct is optional: job times fall back to the log's).
SLURM_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
PING_TIMEOUT_S = 30.0


def check_dirs(config: Config) -> None:
    """The root-owned defaults are the systemd unit's (StateDirectory=, RuntimeDirectory=
    create them): a start outside it must say where state goes, never create them."""
    daemon = config.daemon
    given = daemon.model_fields_set
    hint = ("set it in the config's [daemon] table, or write a personal config with "
            "`sweepd init` (state and socket under your own directories)")
    if "state_dir" not in given and not daemon.state_dir.is_dir():
        raise ConfigError(f"daemon.state_dir is not set and its default {daemon.state_dir} "
                          f"does not exist (the systemd unit creates it): {hint}")
    if "socket" not in given and not daemon.socket.parent.is_dir():
        raise ConfigError(f"daemon.socket is not set and the directory of its default "
                          f"{daemon.socket} does not exist (the systemd unit creates it): "
                          f"{hint}")
    check_state_dir(config)


def state_dir_problem(state_dir: Path) -> str | None:
    """Why the state directory cannot be written (a read-only file system, no permission, a
    file in its path), found by creating a file where it is or would be made and removing
    it again: a start would otherwise fail deep in opening the store. None: it can be."""
    where = state_dir
    while not where.exists() and where != where.parent:   # the directory a start would fill
        where = where.parent
    if not where.is_dir():
        return f"daemon.state_dir: {state_dir} cannot be made: {where} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=".sweepd-write-check-", dir=where)
    except OSError as e:
        what = "cannot be written" if where == state_dir else f"cannot be made in {where}"
        return f"daemon.state_dir: {state_dir} {what} ({e.strerror or e})"
    os.close(fd)
    os.unlink(probe)
    return None


def check_state_dir(config: Config) -> None:
    problem = state_dir_problem(config.daemon.state_dir)
    if problem is not None:
        raise ConfigError(problem)


def check_telegram(config: Config, env: Mapping[str, str] | None = None) -> None:
    """A token that cannot be used (missing, readable by others) refuses the start."""
    if config.telegram.enabled:
        from sweepd.notify import chat_credentials

        chat_credentials(config.telegram, env)


def _on_path(command: str, env: Mapping[str, str]) -> bool:
    return shutil.which(command, path=env.get("PATH", os.defpath)) is not None


def check_slurm_files(slurm: SlurmConfig, env: Mapping[str, str] | None = None) -> None:
    """The Slurm commands, slurm.conf and the toolkit checkout, where this host sees them
    (with an ssh `command_prefix` they are the login node's: only the prefix is checked)."""
    env = os.environ if env is None else env
    prefix = list(slurm.command_prefix)
    if prefix:
        if not _on_path(prefix[0], env):
            raise ConfigError(f"cluster.slurm.command_prefix: {prefix[0]} is not on PATH")
        return
    missing = [c for c in SLURM_COMMANDS if not _on_path(c, env)]
    if missing:
        raise ConfigError(f"the Slurm client commands are not on PATH ({', '.join(missing)} "
                          f"missing): install Slurm's client here, add it to PATH, or run "
                          f"them elsewhere with cluster.slurm.command_prefix = "
                          f'["ssh", "login1"]')
    conf = slurm.slurm_conf
    source = "cluster.slurm.slurm_conf"
    if conf is None and env.get("SLURM_CONF"):
        conf, source = Path(env["SLURM_CONF"]), "SLURM_CONF"
    if conf is not None and not conf.is_file():
        # Slurm's clients retry a missing slurm.conf for a minute before they fail.
        raise ConfigError(f"{source}: {conf} is not a file (the cluster's slurm.conf)")
    if slurm.mode == "submit_sh":
        check_repo(slurm)


def check_repo(slurm: SlurmConfig) -> None:
    repo = slurm.repo
    if repo is None:   # the config's own check names it first
        raise ConfigError('cluster.slurm.repo: mode = "submit_sh" needs the toolkit checkout')
    if not repo.is_dir():
        raise ConfigError(f"cluster.slurm.repo: {repo} does not exist or is not a directory "
                          "(the maxtext-slurm checkout)")
    submit = repo / "submit.sh"
    if not submit.is_file():
        raise ConfigError(f"cluster.slurm.repo: {repo} has no submit.sh (is it the "
                          "maxtext-slurm checkout?)")
    if not os.access(submit, os.X_OK):
        raise ConfigError(f"cluster.slurm.repo: {submit} is not executable "
                          f"(chmod +x {submit})")


async def ping_slurm(slurm: SlurmConfig) -> str | None:
    """None when the controller answers; a note when it is configured but away (the daemon
    starts and waits). ConfigError when the client cannot run at all."""
    from sweepd.clusters.slurm import SlurmCluster, SlurmCommandError

    cluster = SlurmCluster(slurm, timeout_s=PING_TIMEOUT_S)
    try:
        await cluster.queries.ping()
    except ControllerUnreachable as e:
        return f"the Slurm controller does not answer now ({_first_line(str(e))})"
    except SlurmCommandError as e:
        raise ConfigError(f"the Slurm client cannot run: {_reason(str(e))}") from None
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _reason(text: str) -> str:
    """The telling line of a Slurm client's refusal (`fatal:` first), with the fix for the
    usual one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = lines[0].split(":", 1)[0] if lines else ""
    telling = next((ln for ln in lines if "fatal:" in ln), None) or \
        next((ln for ln in lines if "error:" in ln), None) or (lines[0] if lines else text)
    if not telling.startswith(head):
        telling = f"{head}: {telling}"
    if "configuration source" in telling:
        telling += (" (no slurm.conf found: set cluster.slurm.slurm_conf or SLURM_CONF to the "
                    "cluster's slurm.conf)")
    return telling


async def check_start(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """Everything a start needs that can be known before anything is written. Raises
    ConfigError; returns notes to log (a controller away for the moment)."""
    check_dirs(config)
    check_telegram(config, env)
    return await check_cluster(config, env)


async def check_cluster(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """The scheduler's part of `check_start` (a foreground `run` has no socket or chat)."""
    if config.cluster.backend == "local":
        from sweepd.clusters.local.checks import train_command_problem
        from sweepd.clusters.local.slot import lock_problem

        problem = train_command_problem(config.cluster.local, env) or \
            lock_problem(config.cluster.local.lock_path())
        if problem is not None:
            raise ConfigError(problem)
        return []
    if config.cluster.backend != "slurm":
        return []
    check_slurm_files(config.cluster.slurm, env)
    note = await ping_slurm(config.cluster.slurm)
    return [note] if note else []
