"""Daemon settings: a TOML file, with the SKILL.md numbers as defaults."""

from __future__ import annotations

import difflib
import ipaddress
import os
import shlex
import socket
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from sweepd.util.text import escape


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyConfig(_Section):
    """Every threshold a rule uses. Durations are cluster seconds."""

    hang_timeout_s: float = Field(600, gt=0, description="no new output while RUNNING = hung")
    max_retries: int = Field(2, ge=0, description="retries per run; the 3rd failure is final")
    max_exclusions: int = Field(2, ge=0, description="nodes excluded for faults per sweep "
                                "before a stop (a person's own do not count)")
    controller_down_limit_s: float = Field(900, gt=0, description="wait this long, then stop")
    checkout_retry_s: float = Field(3600, gt=0, description="retry period on checkout 5xx")
    coord_timeout_limit: int = Field(2, ge=1, description="consecutive coord timeouts: stop")
    poll_interval_s: float = Field(60, gt=0, description="scheduler poll period")
    tail_interval_s: float = Field(0.5, gt=0, description="log read period while output flows")
    tail_backoff_max_s: float = Field(300, gt=0, description="slowest log polling when silent")


class SimConfig(_Section):
    scenario: Path | None = None  # None: the embedded default scenario


class SlurmConfig(_Section):
    mode: Literal["direct", "submit_sh"] = "direct"
    repo: Path | None = None
    command_prefix: list[str] = Field(default_factory=list)
    partition: str | None = None
    time_limit: str | None = None
    train_command: list[str] = Field(default_factory=list)
    extra_sbatch: list[str] = Field(default_factory=list)
    allow_resume: bool = False
    slurm_conf: Path | None = None
    # Direct mode: commands that print the toolkit's log header and JOB SUMMARY block
    # around the training step (default: plain shell lines in the batch script).
    header_command: list[str] | None = None
    summary_command: list[str] | None = None
    # `sweepd check`: the command that shows the toolkit's image is reachable (the image,
    # container_env.sh's DOCKER_IMAGE, is appended; run behind `command_prefix`).
    image_check_command: list[str] = Field(default_factory=lambda: ["ls", "-la"])


class LocalConfig(_Section):
    """The `local` backend: one box (this host, its one node), jobs one at a time."""

    train_command: str = Field("", description="the trainer's command line (split as a "
                               "shell would, no shell features), e.g. \"python3 -m "
                               "maxtext.trainers.pre_train.train src/maxtext/configs/base.yml\"; "
                               "each run's overrides follow it as key=value arguments")
    node: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
                             description="the node's name in specs and reports; unset: "
                             "this host's short name")
    workdir: Path | None = Field(None, description="the trainer's working directory "
                                 "(e.g. the MaxText checkout); unset: the daemon's")
    env: dict[str, str] = Field(default_factory=dict, description="set for every job, "
                                "over the daemon's environment (a run's env wins)")
    cancel_grace_s: float = Field(30, gt=0, description="wall seconds between a cancel's "
                                  "SIGTERM and its SIGKILL to the job's process group")
    lock: Path | None = Field(None, description="the machine's one accelerator slot, shared "
                              "by every sweepd process on this host whatever its state "
                              "directory; unset: /tmp/sweepd-local-<node>.lock")

    @field_validator("train_command")
    @classmethod
    def _splits(cls, v: str) -> str:
        try:
            shlex.split(v)
        except ValueError as e:
            raise ValueError(f"cannot be split into words ({e}): {escape(repr(v))}") from None
        return v

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.train_command)

    def node_name(self) -> str:
        """`node`, else this host's short name."""
        return self.node or socket.gethostname().split(".")[0] or "localhost"

    def lock_path(self) -> Path:
        """`lock`, else a file per node in /tmp: not under a state directory, so two
        configs (a daemon's and a `sweepd run`'s) on one machine share it."""
        return self.lock or Path(f"/tmp/sweepd-local-{self.node_name()}.lock")


class ClusterConfig(_Section):
    backend: Literal["sim", "slurm", "local"] = "sim"
    gpu_memory_gib: float = Field(192, gt=0)
    gpus_per_node: int = Field(8, ge=1, le=1024, description="GPUs per node: the memory "
                               "estimate shards the weights over nodes x this")
    sim: SimConfig = Field(default_factory=SimConfig)
    slurm: SlurmConfig = Field(default_factory=SlurmConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)

    @property
    def pool_given(self) -> bool:
        """The config names the accelerator's memory (else 192, the toolkit's MI300X)."""
        return "gpu_memory_gib" in self.model_fields_set

    @property
    def planning_pool(self) -> float:
        """The memory the planner is told one accelerator has: 0 (unknown) on the local
        backend when the config names none, where the default describes no box the person
        has (a 16 GB TPU chip planned on 192 GB OOMed four times); the runs' Memstats then
        say it (docs/local.md "Memory: where the pool comes from")."""
        if self.backend == "local" and not self.pool_given:
            return 0.0
        return self.gpu_memory_gib

    @property
    def settings_form(self) -> str:
        """How the person's runs take their settings, so a verdict proposes its change in
        that form: "toolkit" (submit.sh reads the model's configs/<model>.gpu.yml) or
        "overrides" (the local backend and direct mode pass MaxText overrides as key=value
        after the train command)."""
        if self.backend == "slurm" and self.slurm.mode == "submit_sh":
            return "toolkit"
        return "overrides" if self.backend in ("local", "slurm") else "toolkit"

    @model_validator(mode="after")
    def _local_complete(self) -> ClusterConfig:
        if self.backend == "local" and not self.local.argv:
            raise ValueError('backend = "local" needs cluster.local.train_command, the '
                             "command each job runs (its overrides follow as key=value), "
                             'e.g. "python3 -m maxtext.trainers.pre_train.train '
                             'src/maxtext/configs/base.yml"')
        return self

    @model_validator(mode="after")
    def _slurm_mode_complete(self) -> ClusterConfig:
        """The key each Slurm mode cannot run without, named here rather than as a
        traceback from the backend."""
        s = self.slurm
        if self.backend != "slurm":
            return self
        if s.mode == "direct" and not s.train_command:
            raise ValueError(
                'direct mode (the default for backend = "slurm") needs '
                "cluster.slurm.train_command, the command srun runs on every node; or set "
                'cluster.slurm.mode = "submit_sh" and cluster.slurm.repo (a maxtext-slurm '
                "checkout)")
        if s.mode == "submit_sh" and s.repo is None:
            raise ValueError('mode = "submit_sh" needs cluster.slurm.repo (the maxtext-slurm '
                             "checkout whose ./submit.sh submits the jobs)")
        return self


class DaemonConfig(_Section):
    state_dir: Path = Path("/var/lib/sweepd")
    # The CLI's default too; systemd's RuntimeDirectory=sweepd creates /run/sweepd.
    socket: Path = Path("/run/sweepd/sweepd.sock")
    socket_group: str | None = Field(None, description="group allowed to use the socket")
    tick_s: float = Field(0.25, gt=0, description="wall seconds between engine passes")
    hang_floor_wall_s: float = Field(
        3.0, ge=0, description="least real silence called a hang (matters on a fast sim)")
    log_appear_wall_s: float = Field(
        10.0, ge=0, description="least real time a running job's log may take to appear "
        "before it is called lost (a loaded machine starts processes slowly)")
    max_body_bytes: int = Field(1 << 20, gt=0)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "sweepd.db"

    @property
    def outputs(self) -> Path:
        return self.state_dir / "outputs"

    @property
    def socket_path(self) -> Path:
        return self.socket


class TelegramConfig(_Section):
    """Off by default: messages then go to the structured log. Token: $TG_BOT_TOKEN or
    `token_file` (mode 0600, owned by the daemon's user; bare token or BotToken/ChatID)."""

    enabled: bool = False
    token_file: Path | None = Path("/etc/sweepd/telegram.token")
    chat_ids: list[int] = Field(default_factory=list,
                                description="chats obeyed; messages go to the first")
    base_url: str = "https://api.telegram.org/bot"
    proxy: str | None = Field(None, description='HTTP proxy to reach the Bot API through, e.g. '
                              '"http://proxy.example.org:3128" (login nodes often have no '
                              'direct internet); unset: HTTPS_PROXY, else direct')
    routine_per_hour: int | None = Field(2, ge=0, description="None: no limit")
    poll_timeout_s: int = Field(30, ge=0, description="getUpdates long-poll seconds")
    backoff_initial_s: float = Field(1.0, gt=0)
    backoff_max_s: float = Field(300.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    read_timeout_s: float = Field(20.0, gt=0)
    idle_s: float = Field(30.0, gt=0, description="outbox re-check period without news")

    @field_validator("proxy")
    @classmethod
    def _proxy_url(cls, v: str | None) -> str | None:
        # Refused here, in one line, rather than by the HTTP client when the first message
        # is sent (which would only leave messages waiting in the outbox).
        if v is None:
            return v
        url = urlsplit(v)
        try:
            port = url.port
        except ValueError:
            port = -1
        if url.scheme not in ("http", "https") or not url.hostname or port == -1 \
                or url.path not in ("", "/") or url.query or url.fragment:
            raise ValueError(f"{escape(repr(v))} is not a proxy URL: give "
                             "http(s)://host:port, e.g. http://proxy.example.org:3128")
        return v


class MetricsConfig(_Section):
    """Prometheus metrics: always at `GET /metrics` on the socket; on TCP only if asked."""

    listen: str | None = Field(None, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]*):[0-9]{1,5}$",
                               description='"host:port" to serve /metrics on, e.g. '
                                           '"127.0.0.1:9464"; off by default')


class WebConfig(_Section):
    """The read-only dashboard in a browser (`sweepd/web/`): off unless `listen` is set.
    Every request needs the token the daemon keeps in its state directory
    (`sweepd dashboard` prints the URL with it); a peer off this host is refused unless
    `allow` names its network."""

    listen: str | None = Field(None, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]*):[0-9]{1,5}$",
                               description='"host:port" to serve the dashboard on, e.g. '
                                           '"127.0.0.1:8765"; off by default')
    allow: list[str] = Field(default_factory=list,
                             description='networks beyond loopback whose peers may connect, '
                                         'e.g. ["10.1.0.0/16"]; empty: this host only')
    refresh_s: float = Field(2.0, gt=0, description="how often a watched sweep's page is "
                             "read again from the store for its live view")

    @field_validator("allow")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for net in value:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError:
                raise ValueError(f"{net!r} is not an address or network "
                                 '(e.g. "10.1.0.0/16")') from None
        return value


class RecoveryConfig(_Section):
    """The xla-tuning SKILL.md's recovery primitives, run on a node over ssh. Timeouts are
    wall seconds: they bound a real command, not a policy duration."""

    evidence: bool = Field(True, description="on a node fault, gather scontrol, dmesg and "
                           "rocm-smi from the node into the event and the stop message")
    ssh: list[str] | None = Field(None, description='how to run a command on a node, '
                                  '"{node}" the node, e.g. ["ssh", "-o", "BatchMode=yes", '
                                  '"{node}"]; unset: the cluster backend\'s (the simulated '
                                  'cluster\'s fake ssh)')
    timeout_s: float = Field(30, gt=0, description="each evidence command is killed after this")
    nic_reset: bool = Field(False, description="after a NIC fault, reset the node's ionic "
                            "stack between jobs and check ibstat before using it again")
    nic_reset_command: str = Field(
        "rmmod ionic_rdma; rmmod ionic; sleep 3; modprobe ionic; modprobe ionic_rdma; sleep 5")
    nic_reset_timeout_s: float = Field(90, gt=0)

    @field_validator("ssh")
    @classmethod
    def _names_node(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not any("{node}" in w for w in value):
            raise ValueError('must name the node as "{node}", e.g. ["ssh", "{node}"]')
        return value


class Config(_Section):
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    recovery: RecoveryConfig = Field(default_factory=RecoveryConfig)


class ConfigError(ValueError):
    pass


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> Config:
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path} is not UTF-8 text (byte {e.start}): a config is a "
                              "TOML text file") from None
        except OSError as e:
            raise ConfigError(f"cannot read config {path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path} is not valid TOML: {e}") from None
    for dotted, value in (overrides or {}).items():
        section, key = dotted.split(".", 1)
        data.setdefault(section, {})[key] = value
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        found = [_problem(err) for err in e.errors()]
        # One problem: one line; several: one line each.
        problems = f" {found[0]}" if len(found) == 1 else "".join(f"\n  {p}" for p in found)
        raise ConfigError(f"invalid config{f' {path}' if path else ''}:{problems}") from None


def _section(loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The settings model of the table at `loc` (() is the file's top level)."""
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(str(part))
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        model = sub
    return model


def _problem(err: ErrorDetails) -> str:
    """One line per problem: the key, what is wrong, and for a typo the valid keys."""
    loc = err["loc"]
    key = ".".join(map(str, loc))
    if err["type"] == "extra_forbidden":
        section = _section(loc[:-1])
        valid = sorted(section.model_fields) if section else []
        close = difflib.get_close_matches(str(loc[-1]), valid, 1)
        where = f"[{'.'.join(map(str, loc[:-1]))}]" if loc[:-1] else "the top level"
        return (f"{key}: unknown key{f' (did you mean {close[0]}?)' if close else ''}; "
                f"valid keys in {where}: {', '.join(valid)}")
    if err["type"] == "value_error":   # a rule over several keys: its message names them
        return f"{key}: {str(err['msg']).removeprefix('Value error, ')}"
    shown = escape(repr(err.get("input")))
    return f"{key}: {err['msg']} (got {shown if len(shown) <= 60 else shown[:60] + '…'})"


# -- where the config and the socket are found ------------------------------------------------
# One order for every verb, so that `sweepd init`'s personal config is found by `serve`,
# `validate`, the client verbs and `check` alike, with nothing exported.

SYSTEM_CONFIG = Path("/etc/sweepd/sweepd.toml")   # the systemd unit's
DEFAULT_SOCKET = Path("/run/sweepd/sweepd.sock")   # DaemonConfig.socket's default


def _xdg(name: str, default: str) -> Path:
    value = os.environ.get(name)
    return Path(value) if value and os.path.isabs(value) else Path.home() / default


def personal_config_path() -> Path:
    """Where `sweepd init` writes the personal config: $XDG_CONFIG_HOME/sweepd/sweepd.toml."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "sweepd" / "sweepd.toml"


def personal_dirs() -> tuple[Path, Path]:
    """(state directory, socket) of a personal config: XDG's state directory; the socket in
    the runtime directory when the session has one (it is the user's own, mode 0700), else
    beside the state."""
    state = _xdg("XDG_STATE_HOME", ".local/state") / "sweepd"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    socket = Path(runtime) / "sweepd" / "sweepd.sock" if runtime and os.path.isabs(runtime) \
        else state / "sweepd.sock"
    return state, socket


def find_config(given: Path | None = None) -> Path | None:
    """The config a verb uses: `--config`, else $SWEEPD_CONFIG, else the personal config
    `sweepd init` wrote when it exists, else /etc/sweepd/sweepd.toml when it exists; None:
    no config (the built-in defaults, the simulated cluster)."""
    if given is not None:
        return given
    named = os.environ.get("SWEEPD_CONFIG")
    if named:
        return Path(named)
    for path in (personal_config_path(), SYSTEM_CONFIG):
        if path.is_file():
            return path
    return None


def find_socket(given: Path | None = None, config: Path | None = None) -> Path:
    """The daemon's socket a client verb talks to: `--socket`, else $SWEEPD_SOCKET, else the
    `[daemon] socket` of the config `find_config(config)` names, else /run/sweepd/sweepd.sock.
    Only that key is read: a client needs no more of the daemon's settings to be valid."""
    if given is not None:
        return given
    named = os.environ.get("SWEEPD_SOCKET")
    if named:
        return Path(named)
    path = find_config(config)
    if path is None:
        return DEFAULT_SOCKET
    try:
        socket = tomllib.loads(path.read_text("utf-8")).get("daemon", {}).get("socket")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError) as e:
        raise ConfigError(f"cannot read the daemon's socket from {path}: {e}") from None
    return Path(socket) if isinstance(socket, str) else DEFAULT_SOCKET
