"""What `report --apply` deploys is what the sweep measured (issue 21, item 1): the verdict's
recipe exactly (a restore_default part included), guarded by the cell's exact parallelism,
in every env-file shape the toolkit has, never leaving a file that does not parse. Each env
file is checked the way a job meets it: sourced by a real bash with the job's passthrough
overrides (`kinds.xla_tuning.sourced`), under the cell's parallelism and under others."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Parallelism, Setting
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, IMAGE_DEFAULTS, OVERLAP_LIMIT
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.hooks_apply import ApplyError, apply_env_patch, env_patch_text
from sweepd.kinds.xla_tuning.deploy.sourced import source
from sweepd.kinds.xla_tuning.evidence.logread import parse_flags
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.support.service import Daemon
from tests.support.xla import DEEPSEEK, IMAGE, MODEL, OVL2, PASS, RESTORE_AG, checkout, in_effect
from tests.support.xla_report import FAST, FSDP, SETTINGS, recorded, use_checkout

# The env files written, the shell lines and the refusals a person reads.
GOLDEN_DIR = GOLDEN / "xla_deploy"

LLAMA = ("#!/bin/bash\n# Per-model env overrides.\nexport RCCL_MSCCL_ENABLE=0\n"
         'export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_autotune_level=0 \\\n'
         f"    --xla_gpu_enable_triton_gemm=false \\\n    --{AG}={GIB}\"\n\n"
         "# 405B leaves narrow HBM headroom.\nexport XLA_PYTHON_CLIENT_MEM_FRACTION=0.97\n")
BRANCHES = ('if [[ "${MAXTEXT_DCN_PP:-1}" -le 1 ]]; then\n'
            f'    XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}--{AG}={GIB}"\nelse\n'
            f'    XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}--{OVERLAP_LIMIT}=4"\nfi\n'
            "export XLA_FLAGS\n")
SHAPES = {"deepseek": DEEPSEEK, "llama": LLAMA, "branches": BRANCHES,
          "no newline at the end": DEEPSEEK.rstrip("\n"), "empty": "",
          "plain flags": f'export XLA_FLAGS="${{XLA_FLAGS}} --{AG}={GIB}"  # tuned\n'}






def patch(env: Path, par: str, settings: tuple[Setting, ...], name: str = "r") -> str:
    return apply_env_patch(env, MODEL, Parallelism.parse(par), [f"# sweep 1: {name}"],
                           deploy.body([deploy.Part(name, settings)]))


def parses(path: Path) -> bool:
    return subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_env_file_shape_gets_the_recipe_for_its_cell_only(tmp_path: Path,
                                                                shape: str) -> None:
    env = checkout(tmp_path, SHAPES[shape])
    before = {p: in_effect(env, p) for p in PASS}
    patch(env, "PP=8", (OVL2,), "ovl2")
    patch(env, "PP=8", (OVL2,), "ovl2")   # applied again: replaced, not repeated
    assert parses(env) and env.read_text().count(">>> sweepd: xla-tuning") == 1
    assert env.read_text().startswith(SHAPES[shape].rstrip("\n"))
    after = {p: in_effect(env, p) for p in PASS}
    assert after["PP=8"] == {**before["PP=8"], OVERLAP_LIMIT: "2"}
    for other in ("FSDP=8", "TP=8", "PP=4,FSDP=2"):
        assert after[other] == before[other], other


def test_restore_default_resets_the_env_files_setting_for_the_cell(tmp_path: Path) -> None:
    """The PP=8 winner overlap-limit 2 + restore_default: the env file's `ag = 1 GiB` line
    stays for the other cells, PP=8 jobs run at the image's 8 GiB with overlap limit 2."""
    env = checkout(tmp_path, DEEPSEEK)
    patch(env, "PP=8", (OVL2, RESTORE_AG), "ovl2+restore_default")
    assert in_effect(env, "PP=8")[AG] == IMAGE_DEFAULTS[AG]
    assert in_effect(env, "PP=8")[OVERLAP_LIMIT] == "2"
    assert in_effect(env, "FSDP=8")[AG] == str(GIB) and OVERLAP_LIMIT not in in_effect(
        env, "FSDP=8")


def test_fsdp_and_tp_get_different_guards_and_a_fresh_file_is_guarded(tmp_path: Path) -> None:
    env = checkout(tmp_path, None)   # the model has no env file yet: created, guarded
    patch(env, "FSDP=8", (Setting("xla_a", "1"),))
    check_golden(GOLDEN_DIR / "fresh_env_file.txt", env.read_text())
    patch(env, "TP=8", (Setting("xla_b", "1"),))
    patch(env, "PP=4,FSDP=2", (Setting("NCCL_C", "1", Layer.ENV),))
    assert parses(env)
    assert in_effect(env, "FSDP=8").get("xla_a") == "1" and "xla_b" not in in_effect(
        env, "FSDP=8")
    assert in_effect(env, "TP=8").get("xla_b") == "1" and "xla_a" not in in_effect(env, "TP=8")
    assert in_effect(env, "PP=4,FSDP=2").get("NCCL_C") == "1"
    assert {"xla_a", "xla_b", "NCCL_C"}.isdisjoint(in_effect(env, "PP=8"))


def test_a_job_without_overrides_is_judged_by_the_models_config(tmp_path: Path) -> None:
    env = checkout(tmp_path, DEEPSEEK, yml="base_config: base.yml\ndcn_pipeline_parallelism: 8\n")
    patch(env, "PP=8", (OVL2,))
    got = source(env, [], IMAGE).settings()
    assert Setting(OVERLAP_LIMIT, "2") in got
    # An explicit override of the job's wins over the config, as MaxText reads it.
    assert Setting(OVERLAP_LIMIT, "2") not in source(
        env, ["dcn_pipeline_parallelism=1", "dcn_fsdp_parallelism=8"], IMAGE).settings()


def test_a_strict_shell_sources_the_block(tmp_path: Path) -> None:
    """`set -euo pipefail` in the sourcing shell, no gpu.yml, no PASSTHROUGH_ARGS at all."""
    env = checkout(tmp_path, DEEPSEEK)
    (env.parent / f"{MODEL}.gpu.yml").unlink()
    patch(env, "FSDP=8", (OVL2,))
    res = subprocess.run(["bash", "-c", f'set -euo pipefail; XLA_FLAGS=x; source "{env}"; '
                          'echo "$XLA_FLAGS"'], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert OVERLAP_LIMIT not in res.stdout   # no overrides, no config: FSDP=1, not the cell
    res = subprocess.run(["bash", "-c", "set -euo pipefail; PASSTHROUGH_ARGS=("
                          f'dcn_fsdp_parallelism=8); XLA_FLAGS=x; source "{env}"; '
                          'echo "$XLA_FLAGS"'], capture_output=True, text=True)
    assert res.returncode == 0 and f"--{OVERLAP_LIMIT}=2" in res.stdout, res.stderr


def test_earlier_blocks_get_their_own_guard_when_another_parallelism_comes(
        tmp_path: Path) -> None:
    """An unguarded block and one under the old PP-only guard (earlier versions)."""
    old = (DEEPSEEK + "# >>> sweepd: xla-tuning llama2-70b FSDP=8 >>>\n# sweep 3: a\n"
           'export XLA_FLAGS="${XLA_FLAGS} --xla_a=1"\n'
           "# <<< sweepd: xla-tuning llama2-70b FSDP=8 <<<\n"
           "# >>> sweepd: xla-tuning llama2-70b TP=8 >>>\n"
           'if [[ "${MAXTEXT_DCN_PP:-1}" -le 1 ]]; then\n'
           '    export XLA_FLAGS="${XLA_FLAGS} --xla_b=1"\nfi\n'
           "# <<< sweepd: xla-tuning llama2-70b TP=8 <<<\n")
    env = checkout(tmp_path, old)
    assert in_effect(env, "TP=8").get("xla_a") == "1"   # unguarded: it reached TP=8 jobs
    patch(env, "PP=8", (OVL2,))
    text = env.read_text()
    assert text.count('_sweepd_par=""') == 3 and "MAXTEXT_DCN_PP" not in text.split(
        "# >>> sweepd")[1] and "# sweep 3: a" in text
    assert in_effect(env, "FSDP=8").get("xla_a") == "1" and "xla_b" not in in_effect(
        env, "FSDP=8")
    assert in_effect(env, "TP=8").get("xla_b") == "1" and "xla_a" not in in_effect(env, "TP=8")
    assert {"xla_a", "xla_b"}.isdisjoint(in_effect(env, "PP=8"))


def test_nothing_to_guard_is_refused_never_an_empty_if_block(tmp_path: Path) -> None:
    env = checkout(tmp_path, DEEPSEEK)
    with pytest.raises(ApplyError, match="empty if-block"):
        apply_env_patch(env, MODEL, Parallelism.parse("PP=8"), [], ["# only a comment"])
    with pytest.raises(deploy.DeployError, match="no setting"):
        deploy.body([deploy.Part("restore_default", ())])
    assert env.read_text() == DEEPSEEK


def test_a_file_that_does_not_parse_is_refused_and_left_alone(tmp_path: Path) -> None:
    env = checkout(tmp_path, "if true; then\n")
    with pytest.raises(ApplyError, match="would not parse, nothing written"):
        patch(env, "PP=8", (OVL2,))
    assert env.read_text() == "if true; then\n"
    env.write_text(DEEPSEEK + "# >>> sweepd: xla-tuning llama2-70b PP=8 >>>\n")
    with pytest.raises(ApplyError, match="has no end line"):
        patch(env, "PP=8", (OVL2,))


def test_a_maxtext_part_goes_in_front_of_the_jobs_own_overrides(tmp_path: Path) -> None:
    env = checkout(tmp_path, DEEPSEEK)
    patch(env, "PP=8", (Setting("num_pipeline_microbatches", "16", Layer.MAXTEXT),))
    got = source(env, ["dcn_pipeline_parallelism=8"], IMAGE).passthrough
    assert got == ("num_pipeline_microbatches=16", "dcn_pipeline_parallelism=8")
    mine = source(env, ["dcn_pipeline_parallelism=8", "num_pipeline_microbatches=8"], IMAGE)
    assert {s.key: s.value for s in mine.settings()}["num_pipeline_microbatches"] == "8"


def test_env_patch_text_is_pure_and_keeps_every_other_line() -> None:
    text = env_patch_text(LLAMA, Path("x.env.sh"), MODEL, Parallelism.parse("FSDP=8"), [],
                          ["export NCCL_X=1"])
    assert text.startswith(LLAMA)
    check_golden(GOLDEN_DIR / "env_patch_block.txt", text[len(LLAMA):])


# ---- through the CLI, from a recorded sweep -------------------------------------------------


def _restore_ag(monkeypatch: Any) -> None:
    """The sweep's restore_default run put the env file's all-gather threshold back."""
    monkeypatch.setitem(SETTINGS, "restore_default", ([f"--{AG}={8 * GIB}"], {}))


async def test_restore_default_alone_is_a_real_patch(daemon: Daemon, tmp_path: Path,
                                                    monkeypatch: Any) -> None:
    """Was: "No change", "an unknown mechanism", and --apply exiting 2 on an empty
    if-block ("would not parse near fi")."""
    _restore_ag(monkeypatch)
    sid = await recorded(daemon.store, tmp_path, {**FSDP, "restore_default": [1082.0, 1083.0]},
                         recipe="restore_default")
    env = checkout(tmp_path, DEEPSEEK)
    use_checkout(daemon, env.parent.parent)
    code, _, err = await daemon.run("report", str(sid), "--apply", "--tuning-md", str(tmp_path))
    assert code == 0, err
    assert in_effect(env, "FSDP=8")[AG] == IMAGE_DEFAULTS[AG]
    assert in_effect(env, "PP=8")[AG] == str(GIB)
    md = (tmp_path / f"{MODEL}-tuning.md").read_text()
    assert "No change" not in md and "unknown mechanism" not in md
    # The part's own mechanism and the setting its runs carried (not the recipe's union).
    why = md.split("## Why the winning flag wins")[1].split("##")[0]
    check_golden_cases(GOLDEN_DIR / "restore_default_alone.txt", {
        "Why the winning flag wins": why})
    assert f"--{AG}={8 * GIB}" in md.split("## Recommended deployment")[1]


async def test_a_catalog_part_and_restore_default_are_both_deployed(
        daemon: Daemon, tmp_path: Path, monkeypatch: Any) -> None:
    _restore_ag(monkeypatch)
    sid = await recorded(daemon.store, tmp_path, {**FSDP, "restore_default": [990.0],
                                                      "fast+restore_default": [1100.0]},
                         recipe="fast+restore_default")
    code, out, _ = await daemon.run("report", str(sid), "--json")
    assert code == 0
    lines = json.loads(out)["tuning"]["deploy"]["lines"]
    assert any(FAST in ln for ln in lines)   # the catalog part's flag
    assert any(f"--{AG}={8 * GIB}" in ln for ln in lines)


async def test_a_conditional_verdict_needs_force(daemon: Daemon, tmp_path: Path) -> None:
    env = checkout(tmp_path, DEEPSEEK)
    use_checkout(daemon, env.parent.parent)
    refusals: dict[str, str] = {}
    for cond, why in ((True, "not done before the sweep stopped"), (["dense"], "dense")):
        sid = await recorded(daemon.store, tmp_path, FSDP, verdict_extra={"conditional": cond})
        code, _, err = await daemon.run("report", str(sid), "--apply")
        assert code == 2 and err.count("\n") == 1 and why in err
        refusals[f"conditional: {cond}"] = scrubbed(err, sweep=sid)
        assert env.read_text() == DEEPSEEK
    check_golden_cases(GOLDEN_DIR / "conditional_refused.txt", refusals)
    code, out, err = await daemon.run("report", str(sid), "--apply", "--force")
    assert code == 0, err
    assert in_effect(env, "FSDP=8").items() >= parse_flags(FAST).items()
    # What it was written without is said in the block and on the terminal: the env file
    # cannot tell config tags apart, so the block applies to the tag it regresses too.
    said = "applies to every config tag of this parallelism, including dense"
    assert said in out and f"# written with --force: {said}" in env.read_text()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


async def test_apply_commit_commits_the_file_on_a_feature_branch_only(
        daemon: Daemon, tmp_path: Path, monkeypatch: Any) -> None:
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "t")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "t@example.org")
    env = checkout(tmp_path, DEEPSEEK)
    repo = env.parent.parent
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "toolkit")
    use_checkout(daemon, repo)
    sid = await recorded(daemon.store, tmp_path, FSDP)
    code, _, err = await daemon.run("report", str(sid), "--apply", "--commit")
    assert code == 2
    check_golden_cases(GOLDEN_DIR / "commit_refused.txt", {
        "on the default branch": scrubbed(err, repo=repo, sweep=sid)})
    assert err.count("\n") == 1 and git(repo, "log", "--oneline").count("\n") == 1
    assert env.read_text() == DEEPSEEK   # refused before anything was written
    git(repo, "checkout", "-q", "-b", "tune-pp8")
    (repo / "other.txt").write_text("the person's own staged change\n")
    git(repo, "add", "other.txt")
    code, _, err = await daemon.run("report", str(sid), "--apply", "--commit")
    assert code == 0, err
    assert "# >>> sweepd: xla-tuning" in git(repo, "show", f"HEAD:configs/{MODEL}.env.sh")
    message = git(repo, "log", "-1", "--format=%s")
    assert f"sweepd sweep {sid}" in message and "fast" in message and "+8.00%" in message
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        f"configs/{MODEL}.env.sh"]
    assert git(repo, "diff", "--cached", "--name-only").split() == ["other.txt"]


def test_the_inventory_reads_a_multi_line_xla_flags_export() -> None:
    """The llama3.1 env files' shape: the flags after the first line were missed, so the
    restore_default profile (and submit.sh mode's fixed flags) left them out."""
    from sweepd.clusters.train_env import env_file_settings

    flags, env = env_file_settings(LLAMA)
    assert flags == {"xla_gpu_autotune_level": "0", "xla_gpu_enable_triton_gemm": "false",
                     AG: str(GIB)}
    assert env == {"RCCL_MSCCL_ENABLE": "0", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.97"}


def test_only_plain_words_reach_the_file_and_the_images_empty_value_is_one(
        tmp_path: Path) -> None:
    check_golden(GOLDEN_DIR / "empty_value_line.txt",
                 deploy.shell_line(Setting("xla_gpu_enable_command_buffer", "''")) + "\n")
    for bad in ('1" ; touch /tmp/owned; "', "$(id)", "a b", "`id`"):
        with pytest.raises(deploy.DeployError, match="not one plain shell word"):
            deploy.shell_line(Setting("xla_gpu_x", bad))
    assert deploy.shell_line(Setting("NCCL_X", "1; id", Layer.ENV)) == "export NCCL_X='1; id'"
    env = checkout(tmp_path, DEEPSEEK)
    patch(env, "FSDP=8", (Setting("xla_gpu_enable_command_buffer", "''"),))
    assert in_effect(env, "FSDP=8")["xla_gpu_enable_command_buffer"] == "''"


async def test_tuning_md_and_apply_write_the_persons_files_in_place(
        daemon: Daemon, tmp_path: Path) -> None:
    """Same inode, mode and hard links: written through util/person_files.py."""
    env = checkout(tmp_path, DEEPSEEK)
    use_checkout(daemon, env.parent.parent)
    md = tmp_path / f"{MODEL}-tuning.md"
    md.write_text("")
    for f in (env, md):
        f.chmod(0o640)
        (tmp_path / f"link-{f.name}").hardlink_to(f)
    before = {f: (f.stat().st_ino, f.stat().st_mode, f.stat().st_nlink) for f in (env, md)}
    sid = await recorded(daemon.store, tmp_path, FSDP)
    code, _, err = await daemon.run("report", str(sid), "--apply", "--tuning-md", str(md))
    assert code == 0, err
    for f, ident in before.items():
        assert (f.stat().st_ino, f.stat().st_mode, f.stat().st_nlink) == ident
        assert (tmp_path / f"link-{f.name}").read_text() == f.read_text() != ""
