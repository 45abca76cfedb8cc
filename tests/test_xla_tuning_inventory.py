"""The Inventory in submit.sh mode: the model's env file as the sweep's jobs see it (sourced by
bash with the primary config tag's overrides), not a line-by-line reading that skips its
guards and keeps the last assignment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweepd.kinds.xla_tuning.catalog.flags import restore_default
from sweepd.kinds.xla_tuning.inventory import inventory as inv
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed

MODEL = "llama2-70b"
AG = "xla_gpu_all_gather_combine_threshold_bytes"
NCCL = "NCCL_NCHANNELS_PER_NET_PEER"
# PP=8 keeps FSDP's old winner off: the else branch is what any other parallelism runs with.
GUARDED = """\
if [[ " ${PASSTHROUGH_ARGS[*]:-} " == *" dcn_pipeline_parallelism=8 "* ]]; then
    export NCCL_NCHANNELS_PER_NET_PEER=8
    export XLA_FLAGS="${XLA_FLAGS} --xla_gpu_all_gather_combine_threshold_bytes=1073741824"
else
    export XLA_FLAGS="${XLA_FLAGS} --xla_gpu_all_gather_combine_threshold_bytes=8589934592"
fi
"""


def spec_of(parallelism: str, **more: Any) -> XlaTuningSpec:
    return XlaTuningSpec.model_validate({"kind": "xla-tuning", "model": MODEL,
                                         "nodes": "n[01-08]", "parallelism": parallelism,
                                         **more})


def checkout(tmp_path: Path, text: str) -> Path:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / f"{MODEL}.env.sh").write_text(text)
    return tmp_path


def deployed(repo: Path, spec: XlaTuningSpec) -> dict[str, str]:
    settings, _ = inv.inventory(repo, spec)
    return {s.key: s.value for s in settings}


def test_a_guarded_env_file_is_read_for_the_sweeps_parallelism(tmp_path: Path) -> None:
    repo = checkout(tmp_path, GUARDED)
    assert deployed(repo, spec_of("PP=8")) == {AG: "1073741824", NCCL: "8"}
    assert deployed(repo, spec_of("FSDP=8")) == {AG: "8589934592"}


def test_restore_default_covers_the_flag_a_guard_sets_for_the_sweep(tmp_path: Path) -> None:
    settings, _ = inv.inventory(checkout(tmp_path, GUARDED), spec_of("PP=8"))
    restore = restore_default(settings)
    assert restore is not None
    assert {s.key: s.value for s in restore.settings} == {AG: "8589934592", NCCL: "4"}


def test_the_primary_config_tags_overrides_reach_the_guard(tmp_path: Path) -> None:
    """A guard on a tag's override reads the primary tag's (the first), not another's."""
    repo = checkout(tmp_path, GUARDED)
    tags = {"pp": {"dcn_pipeline_parallelism": 8}, "other": {}}
    assert NCCL in deployed(repo, spec_of("FSDP=8", config_tags=tags))
    assert NCCL not in deployed(repo, spec_of("FSDP=8", config_tags=tags, primary_tag="other"))


def test_the_inventory_is_cached_per_file_version(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo = checkout(tmp_path, GUARDED)
    calls = []
    real = inv.source
    monkeypatch.setattr(inv, "source", lambda *a: calls.append(a) or real(*a))
    spec = spec_of("PP=8")
    first = inv.inventory(repo, spec)
    assert inv.inventory(repo, spec) == first and len(calls) == 1
    (repo / "configs" / f"{MODEL}.env.sh").write_text(GUARDED + "export NCCL_ALGO=Ring\n")
    assert ("NCCL_ALGO", "Ring") in [(s.key, s.value) for s in inv.inventory(repo, spec)[0]]
    assert len(calls) == 2


def test_a_file_that_fails_when_sourced_is_read_line_by_line_and_says_so(
        tmp_path: Path) -> None:
    repo = checkout(tmp_path, f"export {NCCL}=2\nexit 1\n")
    settings, where = inv.inventory(repo, spec_of("FSDP=8"))
    assert [s.label for s in settings] == [f"{NCCL}=2"]
    path = repo / "configs" / f"{MODEL}.env.sh"
    assert where.startswith(f"{path} (")
    check_golden_cases(GOLDEN / "xla_inventory" / "sourcing_failed.txt", {
        "exit 1": scrubbed(where, tmp=tmp_path)})


def test_a_sourcing_that_timed_out_is_tried_again_next_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy machine's timeout says nothing of the file: it is not kept for the file's
    version (it was, so the line-by-line reading, guards unread, stayed until the file
    changed); a file bash rejects is (its jobs fail the same way every time)."""
    import subprocess

    repo = checkout(tmp_path, GUARDED)
    real, calls = inv.source, []

    def slow_once(*a: Any) -> Any:
        calls.append(a)
        if len(calls) == 1:
            raise subprocess.TimeoutExpired("bash", 30.0)
        return real(*a)

    monkeypatch.setattr(inv, "source", slow_once)
    spec = spec_of("PP=8")
    _, where = inv.inventory(repo, spec)
    assert where is not None and "read line by line" in where
    assert deployed(repo, spec) == {AG: "1073741824", NCCL: "8"} and len(calls) == 2
    assert deployed(repo, spec) == {AG: "1073741824", NCCL: "8"} and len(calls) == 2


def test_a_flag_only_another_cells_guard_sets_is_still_not_tuned_here(tmp_path: Path) -> None:
    """The submission's check (`train_env.placement`) reads every line of the file, guards
    or not: a catalog flag set only inside another parallelism's block (an earlier
    `--apply`) would lose there and the run be refused, stopping the sweep. So the catalog
    leaves out every flag on the file's lines, while the Inventory holds what this
    sweep's jobs get."""
    from sweepd.clusters.train_env import Arm, placement
    from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts

    p2p = "xla_gpu_enable_pipelined_p2p"
    text = GUARDED + (
        'if [[ " ${PASSTHROUGH_ARGS[*]:-} " == *" dcn_pipeline_parallelism=2 "* ]]; then\n'
        f'    export XLA_FLAGS="${{XLA_FLAGS}} --{p2p}=true"\nfi\n')
    repo = checkout(tmp_path, text)
    spec = spec_of("FSDP=8")
    settings, where = inv.inventory(repo, spec)
    assert p2p not in {s.key for s in settings}   # this sweep's jobs do not get it
    lost = placement(Arm("p2p", (f"--{p2p}=true",), ()), text).lost
    assert [o.key for o in lost] == [p2p]   # but a profile of it would be refused at submit
    facts = XlaFacts(None, settings, where, sourced_last=True,
                     file_flags=inv.flags_on_its_lines(repo, MODEL))
    assert p2p in facts.fixed_flags() and AG in facts.fixed_flags()
