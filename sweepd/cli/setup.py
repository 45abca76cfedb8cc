"""`sweepd init` (a personal config: state and socket in the user's own directories, no
root needed) and `sweepd check` (the pre-flight for a config)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from pathlib import Path

from sweepd.cli.output import say
from sweepd.config import ConfigError, find_config, load_config, personal_dirs
from sweepd.config import personal_config_path as default_config_path
from sweepd.util.hostlists import expand_nodes

EXIT_FAILED_CHECK = 1


def _toml(value: object) -> str:
    """A TOML value: strings and lists of strings (JSON's escapes are TOML's)."""
    return json.dumps(value if not isinstance(value, Path) else str(value))


def config_text(args: argparse.Namespace, state: Path, socket: Path) -> str:
    lines = ["# Written by `sweepd init`: a personal daemon, no root needed.",
             "# Every verb finds it here (--config or $SWEEPD_CONFIG name another), and",
             "# the daemon's socket in it: start the daemon with `sweepd serve`.",
             "", "[daemon]", f"state_dir = {_toml(state)}", f"socket = {_toml(socket)}",
             "", "[cluster]", f"backend = {_toml(args.backend)}"]
    if args.gpus_per_node is not None:
        lines.append(f"gpus_per_node = {args.gpus_per_node}")
    if args.gpu_memory_gib is not None:
        lines.append(f"gpu_memory_gib = {args.gpu_memory_gib:g}")
    if args.backend == "local":
        lines += _local_lines(args)
    if args.backend == "slurm":
        lines += ["", "[cluster.slurm]", f"mode = {_toml(args.mode)}"]
        if args.mode == "submit_sh":
            lines.append(f"repo = {_toml(args.repo.resolve())}")
        else:
            lines.append(f"train_command = {_toml(shlex.split(args.train_command))}")
        for key in ("slurm_conf", "partition", "time_limit"):
            value = getattr(args, key)
            if isinstance(value, Path):
                value = value.resolve()
            if value is not None:
                lines.append(f"{key} = {_toml(value)}")
    lines += ["", "[telegram]", "enabled = false",
              "# enabled = true",
              f"# token_file = {_toml(default_config_path().parent / 'telegram.token')}"
              "   # mode 0600",
              "# chat_ids = [123456789]",
              '# base_url = "https://api.telegram.org/bot"   # a relay, without direct '
              "internet (or HTTPS_PROXY)", ""]
    return "\n".join(lines)


def _local_lines(args: argparse.Namespace) -> list[str]:
    """The local backend's table: one box, its jobs one at a time (docs/local.md)."""
    lines = ["# One box, its accelerators one node: gpus_per_node (chips or GPUs) and",
             "# gpu_memory_gib (per chip) above, e.g. 1 and 15.75 for one TPU v5e chip",
             "# (sweepd init --gpus-per-node 1 --gpu-memory-gib 15.75).",
             "", "[cluster.local]", f"train_command = {_toml(args.train_command)}"]
    if args.workdir is not None:
        lines.append(f"workdir = {_toml(args.workdir.resolve())}")
    if args.node is not None:
        lines.append(f"node = {_toml(args.node)}")
    return [*lines, "# cancel_grace_s = 30   # SIGTERM, then SIGKILL this much later",
            '# env = { LIBTPU_INIT_ARGS = "" }   # set for every job (a run\'s env wins)']


def cmd_init(args: argparse.Namespace) -> int:
    path: Path = args.config or default_config_path()
    if args.backend == "slurm" and args.mode == "submit_sh" and args.repo is None:
        raise ConfigError("init: --mode submit_sh needs --repo (the maxtext-slurm checkout)")
    if args.backend == "slurm" and args.mode == "direct" and not args.train_command:
        raise ConfigError("init: --mode direct needs --train-command (what srun runs on "
                          "every node)")
    if args.backend == "local" and not args.train_command:
        raise ConfigError("init: --backend local needs --train-command (what each job runs; "
                          "its overrides follow as key=value), e.g. --train-command "
                          "'python3 -m maxtext.trainers.pre_train.train "
                          "src/maxtext/configs/base.yml'")
    if path.exists() and not args.force:
        raise ConfigError(f"init: {path} exists (--force replaces it)")
    state, socket = personal_dirs()
    if args.state_dir is not None:
        # A config of its own state gets a socket of its own: the default one is another
        # config's daemon (a second `serve` would be refused, and the client verbs of this
        # config would ask the other daemon).
        state = args.state_dir.resolve()
        socket = state / "sweepd.sock"
    socket = args.socket.resolve() if args.socket is not None else socket
    text = config_text(args, state, socket)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, "utf-8")
    try:
        load_config(tmp)   # what was written must load
    except ConfigError:
        tmp.unlink()
        raise
    tmp.replace(path)
    say(f"wrote {path}")
    # The verbs find the config at the default place by themselves; elsewhere, name it.
    named = "" if path == default_config_path() else f" --config {path}"
    say(f"next: sweepd check{named}")
    say(f"then: sweepd serve{named}   (the daemon, on {socket})")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from sweepd.app.check import DryJob, run_checks

    path = find_config(args.config)
    if path is None:
        say(f"FAIL config: none found (looked at $SWEEPD_CONFIG, {default_config_path()} and "
            "/etc/sweepd/sweepd.toml): write one with `sweepd init`")
        return EXIT_FAILED_CHECK
    try:
        config = load_config(path)
    except ConfigError as e:
        say(f"FAIL config: {e}")
        return EXIT_FAILED_CHECK
    say(f"ok   config: {path}")
    job = None
    if args.job:
        if not args.nodes and config.cluster.backend != "local":
            raise ConfigError("check: --job needs --nodes (where the dry job runs)")
        overrides = dict(kv.split("=", 1) for kv in args.override)
        nodes = expand_nodes(args.nodes) if args.nodes else []   # local: its one node
        job = DryJob(args.job, nodes, overrides, args.job_timeout)
    failed = asyncio.run(run_checks(config, say, job))
    return EXIT_FAILED_CHECK if failed else 0


def _override(text: str) -> str:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r}: expected key=value")
    return text


def add_setup_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="write a personal config (no root needed)",
                       description="Write a config whose state and socket are under your "
                                   "own directories (XDG), for the simulated cluster, "
                                   "Slurm (direct or submit.sh mode) or one local box.")
    p.add_argument("--config", type=Path, help=f"where to write it (default: "
                   f"{default_config_path()})")
    p.add_argument("--backend", choices=["sim", "slurm", "local"], default="sim",
                   help="local: one box (this host), jobs one at a time (docs/local.md)")
    p.add_argument("--mode", choices=["direct", "submit_sh"], default="submit_sh",
                   help="Slurm: submit with the toolkit's ./submit.sh (default) or sweepd's "
                        "own batch script")
    p.add_argument("--repo", type=Path, help="submit_sh: the maxtext-slurm checkout")
    p.add_argument("--train-command", help="direct: the command srun runs on every node; "
                   "local: the command each job runs, its overrides following as key=value")
    p.add_argument("--workdir", type=Path, help="local: the train command's working "
                   "directory (e.g. the MaxText checkout)")
    p.add_argument("--node", help="local: the node's name (default: this host's short name)")
    p.add_argument("--slurm-conf", type=Path, help="the cluster's slurm.conf")
    p.add_argument("--partition")
    p.add_argument("--time-limit")
    p.add_argument("--gpus-per-node", type=int, help="accelerators per node (one TPU chip: 1)")
    p.add_argument("--gpu-memory-gib", type=float, help="memory per accelerator in GiB (one "
                   "TPU v5e chip: 15.75)")
    p.add_argument("--state-dir", type=Path, help="default: $XDG_STATE_HOME/sweepd")
    p.add_argument("--socket", type=Path, help="the daemon's socket (default: "
                   "sweepd.sock in --state-dir when it is given, else "
                   "$XDG_RUNTIME_DIR/sweepd/sweepd.sock)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("check", help="the pre-flight for a config: one line per check",
                       description="Check what a daemon with this config needs: its state "
                                   "directory, the scheduler, the toolkit repo, the image "
                                   "container_env.sh names, the chat (a test message) and, "
                                   "with --job, a short job whose log must have what sweepd "
                                   "reads. Exit 1 when a check fails.")
    p.add_argument("--config", type=Path, help=f"default: $SWEEPD_CONFIG, else "
                   f"{default_config_path()} (sweepd init's), else /etc/sweepd/sweepd.toml")
    p.add_argument("--job", metavar="MODEL", help="submit a dry job of this model")
    p.add_argument("--nodes", help="the dry job's nodes (a hostlist)")
    p.add_argument("--override", action="append", default=["steps=15"], type=_override,
                   metavar="KEY=VALUE", help="the dry job's overrides (default steps=15)")
    p.add_argument("--job-timeout", type=float, default=1800.0,
                   help="seconds the dry job may take (default 1800)")
    p.set_defaults(func=cmd_check)
