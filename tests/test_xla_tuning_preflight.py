"""xla-tuning's pre-flight (issue 14): the Inventory read from the checkout's env file, the
cluster slot resolved to idle nodes at submission, the checks recorded, the 8 h timebox
inside a wave. Real store, the simulated cluster, the fixture toolkit checkout."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sweepd.config import load_config
from sweepd.kinds.api import SweepContext
from sweepd.kinds.registry import GatherContext, gather_context
from sweepd.kinds.xla_tuning import adapter, gather
from sweepd.kinds.xla_tuning.flags import IMAGE_DEFAULTS
from sweepd.kinds.xla_tuning.gather import XlaFacts
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes

FIXTURE = Path(__file__).parent / "fixtures" / "maxtext"
MODEL = "deepseek3-671b"
NODES = "n[01-08]"
AG = "xla_gpu_all_gather_combine_threshold_bytes"
MEM = "XLA_PYTHON_CLIENT_MEM_FRACTION"


def spec_of(**changes: Any) -> XlaTuningSpec:
    data = {"kind": "xla-tuning", "model": MODEL, "nodes": NODES, "parallelism": "FSDP=8",
            **changes}
    return XlaTuningSpec.model_validate(data)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "state.db")
    yield s
    await s.close()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "toolkit"
    shutil.copytree(FIXTURE, repo)
    return repo


def context(facts: XlaFacts) -> SweepContext[XlaFacts]:
    return SweepContext(runs=[], nodes=expand_nodes(NODES), gpu_memory_gib=192.0, facts=facts)


# --- 1. the Inventory ------------------------------------------------------------------------

async def test_the_inventory_is_read_from_the_checkouts_env_file(store: Store,
                                                                 checkout: Path) -> None:
    """The toolkit's form (`XLA_FLAGS="..."` then `export XLA_FLAGS`, a trailing comment on
    an export): `adapter.inventory` read neither (no flag, `.97  # more HBM...`)."""
    facts = await gather.facts(store, spec_of(), GatherContext(checkout))
    assert [s.label for s in facts.deployed] == [f"{AG}=1073741824", f"{MEM}=.97"]
    assert facts.env_file == str(checkout / "configs" / f"{MODEL}.env.sh")
    # No checkout (sim, direct mode): nothing read, and the line says so.
    none = await gather.facts(store, spec_of(), GatherContext(None))
    assert none.deployed == () and "no env file read" in none.inventory_line()
    # A model without an env file runs as the image has it: nothing to restore.
    (checkout / "configs" / f"{MODEL}.env.sh").unlink()
    absent = await gather.facts(store, spec_of(), GatherContext(checkout))
    assert absent.deployed == () and "(absent)" in (absent.env_file or "")


async def test_wave1_restores_the_inventory_to_the_image_defaults_and_records_it(
        store: Store, checkout: Path) -> None:
    facts = await gather.facts(store, spec_of(), GatherContext(checkout))
    planned = adapter.plan(spec_of(), context(facts))
    assert isinstance(planned, list)
    by_label = {n.label: n for n in planned}
    restore = by_label["restore_default"]
    assert restore.rule == "wave1.restore_default"
    # Appended last, so the image's values win again (last wins); the env var re-set.
    assert restore.params.xla_flags == [f"--{AG}={IMAGE_DEFAULTS[AG]}"]
    assert restore.params.env == {MEM: IMAGE_DEFAULTS[MEM]}
    # The Inventory is recorded with the baseline's decision (its reason), and the verdict.
    assert f"Inventory: {checkout}/configs/{MODEL}.env.sh sets {AG}=1073741824, {MEM}=.97" \
        in by_label["baseline"].reason


def test_the_daemon_gives_gather_the_checkout_in_submit_sh_mode_only(tmp_path: Path) -> None:
    sh = load_config(None, {"cluster.backend": "slurm", "cluster.slurm": {
        "mode": "submit_sh", "repo": str(tmp_path)}})
    assert gather_context(sh).repo == tmp_path
    direct = load_config(None, {"cluster.backend": "slurm",
                                "cluster.slurm": {"repo": str(tmp_path)}})
    assert gather_context(direct).repo is None
