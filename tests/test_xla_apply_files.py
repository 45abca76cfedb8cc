"""xla-tuning's `report --apply` on the person's env file as it really is (red-team findings):
settings added since the sweep refuse the write (the recipe was measured without them); the
file's lines are kept byte for byte (a U+2028 in a comment, a form feed, CRLF endings); a
gpu.yml axis written quoted is read as MaxText reads it; a shared link names the other links,
never its own target."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Setting
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB
from sweepd.kinds.xla_tuning.deploy import deploy, sourced
from sweepd.kinds.xla_tuning.deploy.hooks_apply import apply_env_patch, env_patch_text
from sweepd.kinds.xla_tuning.hooks_client import _shared
from sweepd.kinds.xla_tuning.inventory import since_sweep
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.support.service import Daemon
from tests.support.xla import DEEPSEEK, IMAGE, MODEL, OVL2, checkout, in_effect
from tests.support.xla_report import FSDP, recorded, use_checkout

BODY = deploy.body([deploy.Part("r", (OVL2,))])
PIPELINED = "xla_gpu_enable_pipelined_all_gather"   # what FSDP's "fast" profile sets


def inventory(env: Path, sets: str) -> dict[str, str]:
    return {"inventory": f"Inventory: {env} sets {sets}"}


async def test_settings_added_since_the_sweep_refuse_the_write_unless_forced(
        daemon: Daemon, tmp_path: Path) -> None:
    """Was: a flag and an NCCL variable added after the sweep ran beside the recipe in every
    job, and apply said the recipe was in effect."""
    env = checkout(tmp_path, DEEPSEEK)
    use_checkout(daemon, env.parent.parent)
    sid = await recorded(daemon.store, tmp_path, FSDP,
                         verdict_extra=inventory(env, f"{AG}={GIB}"))
    added = DEEPSEEK + ('export XLA_FLAGS="$XLA_FLAGS '
                        '--xla_gpu_enable_latency_hiding_scheduler=false"\n'
                        "export NCCL_PROTO=LL\n")
    env.write_text(added)
    code, _, err = await daemon.run("report", str(sid), "--apply")
    assert code == 2 and err.count("\n") == 1 and env.read_text() == added
    check_golden_cases(GOLDEN / "xla_apply" / "changed_since_the_sweep.txt", {
        "refused": scrubbed(err, tmp=tmp_path, sweep=f"sweep {sid}")})
    code, out, err = await daemon.run("report", str(sid), "--apply", "--force")
    assert code == 0, err
    note = f"written with --force: the file sets what sweep {sid} did not measure: NCCL_PROTO=LL"
    assert note in out and f"# {note}" in env.read_text()


async def test_the_file_the_sweep_measured_is_written_and_written_again(
        daemon: Daemon, tmp_path: Path) -> None:
    """Unchanged since the sweep: written; applied again, the recipe's own block is no
    change the sweep did not measure."""
    env = checkout(tmp_path, DEEPSEEK)
    use_checkout(daemon, env.parent.parent)
    sid = await recorded(daemon.store, tmp_path, FSDP,
                         verdict_extra=inventory(env, f"{AG}={GIB}"))
    for _ in range(2):
        code, _, err = await daemon.run("report", str(sid), "--apply")
        assert code == 0, err
    assert in_effect(env, "FSDP=8")[PIPELINED] == "true"
    env.write_text(DEEPSEEK.replace(str(GIB), str(2 * GIB)))
    code, _, err = await daemon.run("report", str(sid), "--apply")
    assert code == 2 and f"{AG}={2 * GIB} (measured with {GIB})" in err


@pytest.mark.parametrize("text", [
    "# tuned on 2026-11-01\u2028 for the sparse path\nexport NCCL_DEBUG=WARN\n",
    "# section 1\n\f\nexport NCCL_DEBUG=WARN\n",
    "# crlf\r\nexport NCCL_DEBUG=WARN\r\n",
    "# \x85 next line, \x1c file separator\nexport NCCL_DEBUG=WARN",
])
def test_the_files_own_lines_are_kept_byte_for_byte(tmp_path: Path, text: str) -> None:
    """Was: str.splitlines() split on U+2028, \\f, \\x85 (a comment's tail became a
    command), and dropped every \\r."""
    env = checkout(tmp_path, None)
    env.write_bytes(text.encode("utf-8"))
    apply_env_patch(env, MODEL, Parallelism.parse("PP=8"), ["# sweep 1: r"], BODY)
    new = env.read_bytes().decode("utf-8")
    assert new.startswith(text if text.endswith("\n") else text + "\n")
    assert in_effect(env, "PP=8")[OVL2.key] == "2"
    assert sourced.source(env, ["dcn_pipeline_parallelism=8"]).env["NCCL_DEBUG"] == \
        ("WARN\r" if "\r" in text else "WARN")   # what its jobs ran with, unchanged
    # Written again: one block, the person's lines still as they were.
    again = env_patch_text(new, env, MODEL, Parallelism.parse("PP=8"), ["# sweep 2: r"], BODY)
    assert again.startswith(new.split("# >>> sweepd")[0]) and again.count(">>> sweepd") == 1


def test_a_crlf_files_earlier_block_is_found_and_replaced(tmp_path: Path) -> None:
    par = Parallelism.parse("PP=8")
    first = env_patch_text("# crlf\r\n", tmp_path, MODEL, par, ["# sweep 1: r"], BODY)
    crlf = first.replace("\r\n", "\n").replace("\n", "\r\n")  # an editor converted it all
    again = env_patch_text(crlf, tmp_path, MODEL, par, ["# sweep 2: r"], BODY)
    assert again.count(">>> sweepd") == 1 and "# sweep 1" not in again
    assert again.startswith("# crlf\r\n# >>> sweepd")


@pytest.mark.parametrize("quoted", ['"8"', "'8'"])
def test_a_quoted_axis_in_the_gpu_yml_is_the_cells(tmp_path: Path, quoted: str) -> None:
    """Was: the guard read `dcn_pipeline_parallelism: "8"` as 1, so a production job that
    passes no axis override skipped the recipe, and apply proved it only for the others."""
    env = checkout(tmp_path, DEEPSEEK,
                   yml=f"base_config: base.yml\ndcn_pipeline_parallelism: {quoted}\n")
    par = Parallelism.parse("PP=8")
    jobs = sourced.cell_jobs(env, MODEL, par, {"dcn_pipeline_parallelism": 8, "steps": 15})
    assert any(j.passthrough == () for j in jobs)   # the no-override job is proven too
    apply_env_patch(env, MODEL, par, ["# sweep 1: r"], BODY, jobs=jobs)
    got = {s.key: s.value for s in sourced.source(env, [], IMAGE).settings()}
    assert got[OVL2.key] == "2"
    fsdp = {s.key: s.value for s in sourced.source(env, ["dcn_fsdp_parallelism=8"],
                                                   IMAGE).settings()}
    assert OVL2.key not in fsdp   # another cell (FSDP=8 x PP=8) gets none of it


def test_a_shared_link_never_names_its_own_target_as_sharing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: given a relative path, the target itself was listed as "shared with"."""
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "common.env.sh").write_text("# shared\n")
    (configs / f"{MODEL}.env.sh").symlink_to("common.env.sh")
    (configs / "grok-1.env.sh").symlink_to("common.env.sh")
    monkeypatch.chdir(tmp_path)
    said = _shared(Path("configs") / f"{MODEL}.env.sh", MODEL)
    assert said is not None
    check_golden_cases(GOLDEN / "xla_apply" / "shared_relative_link.txt", {
        "shared": scrubbed(said, tmp=tmp_path.resolve())})
    (configs / "grok-1.env.sh").unlink()
    said = _shared(Path("configs") / f"{MODEL}.env.sh", MODEL)
    assert said is not None and "shared with" not in said


def test_a_read_only_env_file_is_refused_by_the_check_model_perf_shares(tmp_path: Path) -> None:
    from sweepd.kinds.xla_tuning.deploy.hooks_apply import ApplyError

    env = checkout(tmp_path, DEEPSEEK)
    env.chmod(0o444)
    with pytest.raises(ApplyError, match=r"read-only \(mode 0444\).*add --force"):
        apply_env_patch(env, MODEL, Parallelism.parse("PP=8"), [], BODY)
    assert env.read_text() == DEEPSEEK
    assert Setting(AG, str(GIB)) in sourced.source(env).settings()


def test_a_fifo_at_the_env_file_is_not_sourced_to_compare_it(tmp_path: Path) -> None:
    """The check for settings changed since the sweep sourced the file with bash before the
    write refused a FIFO: bash blocked on it for its 30 s timeout (red team recheck, D13)."""
    fifo = tmp_path / "deepseek3-671b.env.sh"
    os.mkfifo(fifo)
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(since_sweep.changed(
        fifo, [], "Inventory: x sets no XLA flag or NCCL/XLA env var", [])), daemon=True)
    worker.start()
    worker.join(20)   # a guard against the old hang, not a timing assert
    if worker.is_alive():   # unblock bash: open the FIFO for writing, then close it
        with open(fifo, "w"):
            pass
        worker.join(40)
    assert out == [None]
    assert since_sweep.changed(tmp_path / "gone.env.sh", [], "Inventory: x sets a=1", []) is None
