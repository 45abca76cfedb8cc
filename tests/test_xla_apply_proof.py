"""`report --apply` proves what it wrote (red-team findings on the apply path): the patched
env file, sourced as the cell's jobs would, must leave the measured recipe in effect, else it
is put back byte for byte and apply fails naming why; a read-only file is not written without
--force; a link shared by several models carries the block for the measured model only; a
config-tag regression is named when a conditional verdict is refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Setting
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, IMAGE_DEFAULTS, OVERLAP_LIMIT
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.hooks_apply import ApplyError, apply_env_patch
from sweepd.kinds.xla_tuning.deploy.sourced import source
from sweepd.kinds.xla_tuning.hooks_client import conditional_refusal
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.support.service import Daemon
from tests.support.xla import DEEPSEEK, IMAGE, MODEL, OVL2, RESTORE_AG, checkout, in_effect
from tests.support.xla_report import FAST, FSDP, recorded, use_checkout

OTHER = "llama2-70b-fp8"
# The sweep's PP=8 jobs: the axis, the tag's and the template's overrides.
SWEEP_PP8 = {"dcn_pipeline_parallelism": 8, "steps": 15, "dataset_type": "synthetic"}
RECIPE = (OVL2, RESTORE_AG)   # overlap limit 2, and the env file's 1 GiB back to the image's
# What apply says when it refuses, or when the file it wrote is shared.
GOLDEN_DIR = GOLDEN / "xla_apply"


def apply(env: Path, par: str = "PP=8", force: bool = False) -> str:
    from sweepd.kinds.xla_tuning.deploy.sourced import cell_jobs

    cell = Parallelism.parse(par)
    return apply_env_patch(env, MODEL, cell, ["# sweep 1: r"],
                           deploy.body([deploy.Part("r", RECIPE)]), force=force,
                           jobs=cell_jobs(env, MODEL, cell, SWEEP_PP8))


def ident(path: Path) -> tuple[bytes, int, int, int]:
    st = path.stat()
    return path.read_bytes(), st.st_mode, st.st_uid, st.st_ino


@pytest.mark.parametrize("stop", ["return 0", "exit 0", "exit 3"])
def test_a_block_the_file_never_reaches_is_refused_and_the_file_put_back(
        tmp_path: Path, stop: str) -> None:
    """Was: the block appended after the `return`, never run for the cell, exit 0."""
    text = (DEEPSEEK + "# Nothing below applies to pipeline jobs\n"
            f'[[ " ${{PASSTHROUGH_ARGS[*]}} " == *"pipeline_parallelism="* ]] && {stop}\n'
            "export NCCL_DEBUG=INFO\n")
    env = checkout(tmp_path, text)
    env.chmod(0o640)
    before = ident(env)
    with pytest.raises(ApplyError) as err:
        apply(env)
    msg = str(err.value)
    assert "\n" not in msg and "would not take effect" in msg
    how = "returns early" if stop.startswith("return") else "exits"
    assert how in msg, msg
    check_golden_cases(GOLDEN_DIR / f"block_never_reached_{stop.replace(' ', '_')}.txt",
                       {stop: scrubbed(msg, tmp=tmp_path)})
    assert ident(env) == before


def test_an_axis_the_gpu_yml_leaves_to_minus_one_is_refused(tmp_path: Path) -> None:
    """Was: the guard read `1 -1 1` for production jobs without an axis override and
    skipped the block silently."""
    env = checkout(tmp_path, DEEPSEEK, yml="base_config: base.yml\ndcn_pipeline_parallelism: -1\n")
    before = ident(env)
    with pytest.raises(ApplyError, match="a job that passes no parallelism override") as err:
        apply(env)
    check_golden_cases(GOLDEN_DIR / "axis_minus_one.txt", {
        "refused": scrubbed(str(err.value), tmp=tmp_path)})
    assert ident(env) == before


def test_a_proven_file_holds_the_recipe_for_every_job_of_the_cell(tmp_path: Path) -> None:
    """The gpu.yml names the cell's axis: jobs with and without the override get it."""
    env = checkout(tmp_path, DEEPSEEK, yml="dcn_pipeline_parallelism: 8\n")
    apply(env)
    for passthrough in ([], ["dcn_pipeline_parallelism=8"]):
        got = {s.key: s.value for s in source(env, passthrough, IMAGE).settings()}
        assert got[AG] == IMAGE_DEFAULTS[AG] and got[OVERLAP_LIMIT] == "2"
    assert in_effect(env, "FSDP=8")[AG] == str(GIB)


def test_a_created_file_that_cannot_be_proven_is_removed(tmp_path: Path) -> None:
    env = checkout(tmp_path, None, yml="dcn_pipeline_parallelism: -1\n")
    with pytest.raises(ApplyError, match="the file it created is removed"):
        apply(env)
    assert not env.exists()


def test_a_read_only_env_file_is_refused_without_force(tmp_path: Path) -> None:
    """Was: written anyway, as the daemon's user (root) may write a 0444 file."""
    env = checkout(tmp_path, DEEPSEEK)
    env.chmod(0o444)
    before = ident(env)
    with pytest.raises(ApplyError, match=r"is read-only \(mode 0444\): nothing written") as e:
        apply(env)
    assert "--force" in str(e.value) and ident(env) == before
    if os.geteuid() != 0:
        return   # only root can write it even with --force
    apply(env, force=True)
    assert stat.S_IMODE(env.stat().st_mode) == 0o444
    assert in_effect(env, "PP=8")[OVERLAP_LIMIT] == "2"


def test_a_shared_link_gives_the_recipe_to_the_measured_model_only(tmp_path: Path) -> None:
    """Two models' env files link to one file: the block lands in it (the link kept), and
    the other model, sourcing it at the same parallelism, gets none of the recipe."""
    configs = tmp_path / "repo" / "configs"
    configs.mkdir(parents=True)
    common = configs / "common.env.sh"
    common.write_text(DEEPSEEK)
    env, other = configs / f"{MODEL}.env.sh", configs / f"{OTHER}.env.sh"
    env.symlink_to(common.name)
    other.symlink_to(common.name)
    for m in (MODEL, OTHER):
        (configs / f"{m}.gpu.yml").write_text("base_config: base.yml\n")
    other_before = source(other, ["dcn_pipeline_parallelism=8"], IMAGE).settings()
    apply(env)
    assert env.is_symlink() and other.is_symlink() and "sweepd" in common.read_text()
    assert source(other, ["dcn_pipeline_parallelism=8"], IMAGE).settings() == other_before
    assert in_effect(env, "PP=8")[OVERLAP_LIMIT] == "2"


def test_an_older_block_without_the_model_condition_gets_it(tmp_path: Path) -> None:
    """A shared file's earlier block (another parallelism) written before the condition."""
    env = checkout(tmp_path, DEEPSEEK)
    apply_env_patch(env, MODEL, Parallelism.parse("FSDP=8"), ["# sweep 0: a"],
                    deploy.body([deploy.Part("a", (Setting("xla_a", "1"),))]))
    old = env.read_text().replace(deploy.model_line(MODEL) + "\n", "")
    env.write_text(old)
    assert deploy.model_line(MODEL) not in env.read_text()
    apply(env)
    text = env.read_text()
    assert text.count(deploy.model_line(MODEL)) == 2 and text.count("# only for jobs") == 2
    assert "# sweep 0: a" in text and in_effect(env, "FSDP=8")["xla_a"] == "1"


def test_a_tag_regression_is_named_when_a_conditional_verdict_is_refused() -> None:
    """Was: the verdict's bool `conditional` read as a list of tags, so a regression was
    refused as "its confirmation or Wave 6 was not done"."""
    verdict = {"conditional": True, "regressed": ["moe"],
               "conditional_reason": "regresses moe by > 1%: config-conditional"}
    msg = conditional_refusal(7, verdict)
    assert msg is not None and "regresses config tag moe" in msg and "Wave 6" not in msg
    msg = conditional_refusal(7, {"conditional": True, "regressed": [],
                                  "conditional_reason": "Wave 6 not run on moe"})
    assert msg is not None and "Wave 6 not run on moe" in msg
    assert conditional_refusal(7, {"conditional": False, "regressed": []}) is None


async def test_apply_says_the_file_is_shared_and_proves_it_with_the_sweeps_jobs(
        daemon: Daemon, tmp_path: Path) -> None:
    env = checkout(tmp_path, DEEPSEEK)
    common = env.with_name("common.env.sh")
    env.rename(common)
    env.symlink_to(common.name)
    env.with_name(f"{OTHER}.env.sh").symlink_to(common.name)
    use_checkout(daemon, env.parent.parent)
    sid = await recorded(daemon.store, tmp_path, FSDP)
    code, out, err = await daemon.run("report", str(sid), "--apply")
    assert code == 0, err
    check_golden_cases(GOLDEN_DIR / "shared_link.txt", {
        "apply's output": scrubbed(out, tmp=tmp_path)})
    assert env.is_symlink() and FAST in common.read_text()
