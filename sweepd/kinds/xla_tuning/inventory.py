"""The Inventory: what the model's env file sets (restore_default puts it back), read from
the checkout's `configs/<model>.env.sh` (submit.sh mode), or on the simulated cluster from its
tuning landscape's `deployed`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sweepd.clusters.train_env import env_file_settings
from sweepd.kinds.api import GatherError
from sweepd.kinds.xla_tuning.catalog import Layer, Setting

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.spec import XlaTuningSpec

# The env vars of a model's env file the Inventory keeps (the rest is not tuned here).
_TUNED_ENV = ("NCCL_", "RCCL_", "XLA_PYTHON_")


def inventory(repo: Path | None, model: str) -> tuple[tuple[Setting, ...], str | None]:
    """What the checkout's `configs/<model>.env.sh` sets (last wins), and its path; a missing
    file sets nothing (the model runs as the image has it). No checkout: (), None."""
    if repo is None:
        return (), None
    path = repo / "configs" / f"{model}.env.sh"
    try:
        text = path.read_text("utf-8", errors="replace")
    except FileNotFoundError:
        return (), f"{path} (absent)"
    except OSError as e:
        raise GatherError(f"cannot read the model's env file {path}: {e.strerror}") from None
    flags, env = env_file_settings(text)
    out = [Setting(k, v, Layer.XLA) for k, v in flags.items()]
    out += [Setting(k, v, Layer.ENV) for k, v in env.items() if k.startswith(_TUNED_ENV)]
    return tuple(out), str(path)


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
