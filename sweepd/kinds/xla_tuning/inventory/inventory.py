"""The Inventory: what the model's env file sets for the sweep's jobs (restore_default puts
it back), read from the checkout's `configs/<model>.env.sh` (submit.sh mode) sourced by a real
bash as the toolkit sources it for a job of the primary config tag (its guards read that
job's overrides), or on the simulated cluster from its tuning landscape's `deployed`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from sweepd.clusters.train_env import env_file_settings
from sweepd.kinds.api import GatherError
from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
from sweepd.kinds.xla_tuning.deploy.job_overrides import job_overrides
from sweepd.kinds.xla_tuning.deploy.sourced import SourceError, source

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.spec import XlaTuningSpec

# The env vars of a model's env file the Inventory keeps (the rest is not tuned here).
_TUNED_ENV = ("NCCL_", "RCCL_", "XLA_PYTHON_")

Read = tuple[tuple[Setting, ...], str]
# Per env file version and passthrough: a gather each pass spawns no bash for an unchanged file.
_INVENTORY: dict[tuple[str, int, int, tuple[str, ...]], Read] = {}
_INVENTORY_MAX = 256


def inventory(repo: Path | None, spec: XlaTuningSpec) -> tuple[tuple[Setting, ...], str | None]:
    """What the checkout's `configs/<model>.env.sh` leaves in effect for a job of the sweep's
    primary config tag, and its path (with a note when it could only be read line by line);
    a missing file sets nothing (the model runs as the image has it). No checkout: (), None."""
    if repo is None:
        return (), None
    path = repo / "configs" / f"{spec.model}.env.sh"
    try:
        st = path.stat()
    except FileNotFoundError:
        return (), f"{path} (absent)"
    except OSError as e:
        raise GatherError(f"cannot read the model's env file {path}: {e.strerror}") from None
    passthrough = job_passthrough(spec)
    key = (str(path), st.st_mtime_ns, st.st_size, passthrough)
    if key in _INVENTORY:
        return _INVENTORY[key]
    read, lasting = _read(path, passthrough)
    if lasting:  # a timeout or a bash that could not start is tried again next pass
        if len(_INVENTORY) >= _INVENTORY_MAX:
            _INVENTORY.clear()
        _INVENTORY[key] = read
    return read


def job_passthrough(spec: XlaTuningSpec) -> tuple[str, ...]:
    """The `key=value` overrides a job of the primary config tag passes (its PASSTHROUGH_ARGS
    as the env file's guards read them; the batch size is left out, it needs the facts)."""
    primary = next(iter(spec.config_tags))
    return tuple(f"{k}={v}" for k, v in job_overrides(spec, primary).items())


def _read(path: Path, passthrough: tuple[str, ...]) -> tuple[Read, bool]:
    """Sourced as the job would; a file that fails when sourced (its jobs would fail too, or
    bash is missing here) is read line by line instead, last wins, and the path says so.
    The flag: whether the reading holds for this file version (a file bash rejects does;
    a timeout or a bash that could not start may not)."""
    lasting = True
    try:
        settings = source(path, passthrough).settings()
        return (tuned(settings), str(path)), True
    except (SourceError, subprocess.TimeoutExpired, OSError) as e:
        lasting = isinstance(e, SourceError)
        why = str(e).replace(f"sourcing {path} failed ", "")
        note = f"sourcing it failed{'' if why.startswith('(') else ':'} {why}"
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError as e:
        raise GatherError(f"cannot read the model's env file {path}: {e.strerror}") from None
    flags, env = env_file_settings(text)
    settings = tuple([Setting(k, v, Layer.XLA) for k, v in flags.items()]
                     + [Setting(k, v, Layer.ENV) for k, v in env.items()])
    return (tuned(settings), f"{path} ({note}; read line by line)"), lasting


def tuned(settings: tuple[Setting, ...]) -> tuple[Setting, ...]:
    """XLA flags and the tuned env vars (no MaxText override, no other env var)."""
    return tuple(s for s in settings if s.layer is Layer.XLA
                 or (s.layer is Layer.ENV and s.key.startswith(_TUNED_ENV)))


_SIM_INVENTORY: dict[tuple[str, int, str, str], tuple[Setting, ...]] = {}


def sim_inventory(scenario: Path, spec: XlaTuningSpec) -> tuple[tuple[Setting, ...], str | None]:
    """On the simulated cluster the model's env file is its tuning landscape's `deployed`
    (what its jobs run with as baseline-deployed); read once per scenario file version."""
    from sweepd.kinds.xla_tuning.sim.tuning import parallelism_overrides, tuning_for
    from sweepd.sim.scenario import load_scenario  # the simulator only when it is the backend

    try:
        key = (str(scenario), scenario.stat().st_mtime_ns, spec.model, spec.parallelism)
    except OSError:
        return (), None
    if key not in _SIM_INVENTORY:
        try:
            tuning = tuning_for(load_scenario(scenario).section("tuning"), spec.model)
            land = None if tuning is None else tuning.landscape_for(
                parallelism_overrides(spec.parallelism))
        except ValueError:   # no landscape for the parallelism: its jobs will say so
            land = None
        _SIM_INVENTORY[key] = () if land is None else land.deployed_settings()
    where = f"the simulated cluster's tuning landscape for {spec.parallelism} ({scenario})"
    return _SIM_INVENTORY[key], where


_FILE_FLAGS: dict[tuple[str, int, int], frozenset[str]] = {}


def flags_on_its_lines(repo: Path | None, model: str) -> frozenset[str]:
    """Every XLA flag the model's env file sets on any of its lines, whatever guards them:
    what the submission's check reads (`train_env.placement`: an arm's flag the file also
    sets loses to it), so the catalog leaves them all out in submit.sh mode. The Inventory
    (what restore_default puts back) is what the file sets for this sweep's jobs. Read once
    per file version."""
    if repo is None:
        return frozenset()
    path = repo / "configs" / f"{model}.env.sh"
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _FILE_FLAGS:
            if len(_FILE_FLAGS) >= _INVENTORY_MAX:
                _FILE_FLAGS.clear()
            text = path.read_text("utf-8", errors="replace")
            _FILE_FLAGS[key] = frozenset(env_file_settings(text)[0])
    except OSError:
        return frozenset()
    return _FILE_FLAGS[key]
