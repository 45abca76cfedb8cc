"""submit.sh mode: a profile's arms in the toolkit's train_env.sh (clusters/train_env/).

The text functions are checked on their own; what the arms do is checked by real bash: the
fake toolkit's `_train.sh` (tests/fixtures/maxtext) layers train_env.sh, the per-model env
file and the `_env_` passthrough as the toolkit does, and prints the job's environment.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweepd.clusters import train_env as te
from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
from sweepd.kinds.xla_tuning.evidence.logread import applied as logread_applied
from sweepd.kinds.xla_tuning.evidence.logread import effective
from tests.golden_files import GOLDEN, check_golden
from tests.slurm_cluster import MAXTEXT_FIXTURE

AG = "xla_gpu_all_gather_combine_threshold_bytes"
# The image's own flags, inherited by every job (the all-gather threshold is 8 GiB there).
IMAGE = f"--xla_gpu_enable_latency_hiding_scheduler=true --{AG}=8589934592"
# What the fixture's train_env.sh appends to the inherited XLA_FLAGS on its own.
TOOLKIT = ("--xla_gpu_unsupported_use_ragged_all_to_all_one_shot_kernel=false "
           "--xla_gpu_enable_command_buffer=''")

AG512 = te.arm("ag512M", [f"--{AG}=536870912"])
NCH8 = te.arm("nch8", env={"NCCL_NCHANNELS_PER_NET_PEER": "8"})
LATE = te.arm("late", env={"NCCL_IB_TC": "106", "NCCL_PXN_DISABLE": "1"})
MEM95 = te.arm("mem95", env={"XLA_PYTHON_CLIENT_MEM_FRACTION": ".95"})
BOTH = te.arm("Gco1G+nch8", ["--xla_gpu_enable_pipelined_p2p=true", "--xla_gpu_enable_x"],
              {"NCCL_NCHANNELS_PER_NET_PEER": "8", "NCCL_PROTO": "Simple"})


def fixture_text() -> str:
    return (MAXTEXT_FIXTURE / "train_env.sh").read_text()


def toolkit(tmp_path: Path, *arms: te.Arm) -> Path:
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    for a in arms:
        te.apply(repo / "train_env.sh", a)
    return repo


def job_env(repo: Path, model: str, *passthrough: str) -> tuple[dict[str, str], list[str], str]:
    """What a job of `model` runs with: (its environment, the lines _train.sh printed, stderr)."""
    env = {"PATH": os.environ["PATH"], "XLA_FLAGS": IMAGE, "HOME": str(repo)}
    res = subprocess.run(["bash", str(repo / "_train.sh"), "--model", model, "--", "steps=15",
                          *passthrough], capture_output=True, text=True, env=env, check=True)
    lines = res.stdout.splitlines()
    shown = lines[lines.index("Show all environment variables:") + 1:]
    return dict(line.split("=", 1) for line in shown if "=" in line), lines, res.stderr


MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"  # a variable's name, not prose


def flag_values(xla_flags: str, key: str) -> list[str]:
    return [t.split("=", 1)[1] for t in xla_flags.split() if t.startswith(f"--{key}=")]


# ---- the text ----------------------------------------------------------------------------------


def test_blocks_take_the_skill_md_shape_at_the_end() -> None:
    base = fixture_text()
    text = te.add_arm(te.add_arm(base, AG512), NCH8)
    assert text.startswith(base)  # the file itself is untouched, blocks appended
    tail = text[len(base):]
    # The whole appended text: the XLA block (each arm's flags joined to XLA_FLAGS), then the
    # post-NCCL block after every NCCL export.
    check_golden(GOLDEN / "train_env" / "two_arms_tail.sh", tail)
    lines = tail.splitlines()
    assert lines.index("# ---- TUNE_PROFILE: post-NCCL overrides ----") > lines.index("esac")
    assert te.arms(text) == (AG512, NCH8)


def test_round_trip_idempotence_and_removal() -> None:
    base = fixture_text()
    text = base
    for a in (AG512, NCH8, BOTH, LATE):
        text = te.add_arm(text, a)
    assert te.arms(text) == (AG512, NCH8, BOTH, LATE)
    for a in (AG512, NCH8, BOTH, LATE, te.arm("baseline")):
        assert te.add_arm(text, a) == text  # the same arm again: nothing changes
    assert te.add_arm(base, te.arm("baseline")) == base
    assert te.remove_arms(text) == base  # byte for byte
    assert te.remove_arms(base) == base
    # The blocks stay where they are when the person appended lines after them.
    edited = text + "export MY_OWN=1\n"
    more = te.add_arm(edited, MEM95)
    assert more.endswith("export MY_OWN=1\n") and te.arms(more)[-1] == MEM95
    assert te.remove_arms(more) == base + "export MY_OWN=1\n"
    assert te.arms(base) == () and "no TUNE_PROFILE blocks" in te.describe(base)
    check_golden(GOLDEN / "train_env" / "describe_four_arms.txt", te.describe(text) + "\n")


def test_an_arm_of_the_same_name_with_other_content_is_refused(tmp_path: Path) -> None:
    text = te.add_arm(fixture_text(), AG512)
    other = te.arm("ag512M", [f"--{AG}=536870913"])
    with pytest.raises(te.TrainEnvError, match="already has an arm 'ag512M' with other content"):
        te.add_arm(text, other)
    with pytest.raises(te.TrainEnvError, match="other content"):
        te.add_arm(text, te.arm("ag512M", [f"--{AG}=536870912"], {"NCCL_PROTO": "Simple"}))
    path = tmp_path / "train_env.sh"
    path.write_text(text)
    with pytest.raises(te.TrainEnvError):
        te.apply(path, other)
    assert path.read_text() == text  # nothing written
    assert te.apply(path, AG512) is False


def test_blocks_sweepd_did_not_write_are_never_edited() -> None:
    person = fixture_text() + 'case "${TUNE_PROFILE:-}" in\n    x) export A=1 ;;\nesac\n'
    with pytest.raises(te.TrainEnvError, match="line 69 has a TUNE_PROFILE block sweepd did not"):
        te.add_arm(person, AG512)
    text = te.add_arm(fixture_text(), AG512)
    hand = text.replace(f"--{AG}=536870912", f"--{AG}=1")
    hand = hand.replace('    ag512M)\n', '    ag512M)\n        echo hi\n')
    with pytest.raises(te.TrainEnvError, match="edited by hand"):
        te.add_arm(hand, NCH8)
    cut = text.replace(te.ENV_END + "\n", "")
    with pytest.raises(te.TrainEnvError, match="not whole"):
        te.arms(cut)


@pytest.mark.parametrize("name", [
    "", "a b", "a;rm -rf ~", "$(id)", "`id`", "*", "a*", "x|y", "-x", "../x", "a/b", "a\nb",
    "a'b", 'a"b', "a)b", "a(b", "@(x)", "x" * 101, "é", "esac"])
def test_hostile_profile_names_are_refused(name: str) -> None:
    with pytest.raises(te.TrainEnvError, match="not usable as a TUNE_PROFILE"):
        te.arm(name, ["--xla_a=1"])


def test_shell_words_as_names_stay_literal(tmp_path: Path) -> None:
    """Names that are shell words or hold case-pattern characters: the file still parses and
    each arm matches its own name alone (bash decides, not a regex)."""
    words = ["case", "do", "done", "elif", "else", "fi", "for", "function", "if", "in",
             "select", "then", "time", "until", "while", "coproc", "a.b", "a+b", "a-b_c", "1"]
    repo = toolkit(tmp_path, *(te.arm(w, [f"--xla_w{i}=1"]) for i, w in enumerate(words)))
    for i, w in enumerate(words):
        env, _, err = job_env(repo, "llama2-70b", te.selector(w))
        assert env["XLA_FLAGS"].endswith(f"{TOOLKIT} --xla_w{i}=1") and err == ""
    _, _, err = job_env(repo, "llama2-70b", te.selector("aXb"))  # `.` is no wildcard
    assert "unknown TUNE_PROFILE='aXb'" in err


def test_a_text_that_does_not_parse_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "train_env.sh"
    path.write_text("if true; then\n")  # the person's file is already broken
    with pytest.raises(te.TrainEnvError, match="would not parse, nothing written"):
        te.apply(path, AG512)
    assert path.read_text() == "if true; then\n"


@pytest.mark.parametrize(("flags", "env"), [
    (["--xla_a=$(touch /tmp/pwned)"], {}), (["--xla_a=`id`"], {}), (['--xla_a="x'], {}),
    (["--xla_a=1 --xla_b=2"], {}), (["xla_a=1"], {}), (["--xla_a=\\"], {}), (["--xla_a=1\n"], {}),
    ([], {"NCCL_X": "1; rm -rf ~"}), ([], {"NCCL_X": "$HOME"}), ([], {"NCCL_X": "a b"}),
    ([], {"nccl_x": "1"}), ([], {"XLA_FLAGS": "--xla_a=1"}), ([], {"TUNE_PROFILE": "x"}),
    ([], {"A=B": "1"}), ([], {"NCCL_X": "*"})])
def test_hostile_flags_and_env_are_refused(flags: list[str], env: dict[str, str]) -> None:
    with pytest.raises(te.TrainEnvError, match="refused"):
        te.arm("p1", flags, env)


def test_baseline_stays_a_no_op() -> None:
    """Every job that names no profile runs the baseline arm: it takes nothing."""
    for flags, env in (([f"--{AG}=1"], {}), ([], {"NCCL_PROTO": "Simple"})):
        with pytest.raises(te.TrainEnvError, match="baseline is the config as deployed"):
            te.arm("baseline", flags, env)


def test_job_name_budget() -> None:
    assert te.selector("ag512M") == "_env_TUNE_PROFILE=ag512M"
    name = te.job_name_for("llama2-70b", None, ["steps=15", te.selector("ag512M")])
    assert name == "JAX-llama2-70b-steps_15-_env_TUNE_PROFILE_ag512M"
    fixed = len("JAX-llama2-70b-_env_TUNE_PROFILE_")
    assert len(te.job_name_for("llama2-70b", None, [te.selector("a" * (243 - fixed))])) == 243
    with pytest.raises(te.TrainEnvError, match=r"244 bytes.*shorten the profile's name"):
        te.job_name_for("llama2-70b", None, [te.selector("a" * (244 - fixed))])


def test_placement_names_what_the_env_file_would_win() -> None:
    env_file = (MAXTEXT_FIXTURE / "configs" / "deepseek3-671b.env.sh").read_text()
    flags, env = te.env_file_settings(env_file)
    assert flags == {AG: "1073741824"} and env == {MEM_FRACTION: ".97"}
    p = te.placement(MEM95, env_file)
    # The profile's selector, then the env file's variable passed through to win over it.
    assert p.passthrough == (te.selector("mem95"), f"_env_{MEM_FRACTION}=.95")
    assert p.lost == ()
    p = te.placement(AG512, env_file)
    assert p.passthrough == ("_env_TUNE_PROFILE=ag512M",)
    assert p.lost == (te.Override(AG, True, "536870912", "1073741824"),)
    assert te.placement(AG512, None) == te.Placement(AG512, ("_env_TUNE_PROFILE=ag512M",), ())


def test_atomic_write_keeps_the_mode_and_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real_train_env.sh"
    real.write_text(fixture_text())
    real.chmod(0o750)
    link = tmp_path / "train_env.sh"
    link.symlink_to(real.name)
    assert te.apply(link, AG512) is True
    assert link.is_symlink() and te.arms(real.read_text()) == (AG512,)
    assert stat.S_IMODE(real.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real_train_env.sh", "train_env.sh"]
    assert "ag512M" in te.leftover(link)
    assert te.clean(link) is True and real.read_text() == fixture_text()
    assert te.clean(link) is False


def test_the_offered_command_lists_and_removes_the_blocks(tmp_path: Path) -> None:
    """The command a sweep's end message offers (`leftover_note`) runs as printed, with no
    warning from the package it lives in, and gives the file back line for line."""
    from sweepd.clusters.slurm import TRAIN_ENV_MARK, leftover_note

    path = tmp_path / "train_env.sh"
    path.write_text(fixture_text())
    te.apply(path, BOTH)
    (tmp_path / TRAIN_ENV_MARK).write_text(f"{path}\n")
    note = leftover_note(tmp_path)
    assert note is not None
    clean = note.splitlines()[-1].split(": ", 1)[1].split()
    # The interpreter sweepd runs under (a bare `python` may be the system's, without sweepd).
    assert clean == [sys.executable, "-m", "sweepd.clusters.train_env", "clean", str(path)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-W", "error", *args], capture_output=True,
                              text=True, timeout=60)

    shown = run("-m", "sweepd.clusters.train_env", "show", str(path))
    assert shown.returncode == 0 and shown.stderr == ""
    assert f"  {BOTH.describe()}" in shown.stdout.splitlines()
    removed = run(*clean[1:])
    assert (removed.returncode, removed.stderr) == (0, "")
    assert removed.stdout == f"{path}: sweepd's blocks removed\n"
    assert path.read_text() == fixture_text()
    usage = run("-m", "sweepd.clusters.train_env")
    assert usage.returncode == 2
    check_golden(GOLDEN / "train_env" / "cli_usage.txt", usage.stderr)


# ---- real bash: what a job runs with ------------------------------------------------------------


def test_a_profile_is_appended_to_the_inherited_flags_and_its_env_set(tmp_path: Path) -> None:
    repo = toolkit(tmp_path, AG512, NCH8, BOTH, LATE)
    plain, _, _ = job_env(toolkit(tmp_path / "plain"), "llama2-70b")
    assert plain["XLA_FLAGS"] == f"{IMAGE} {TOOLKIT}"
    for name in ("baseline", None):  # no profile named: the baseline arm, a no-op
        env, _, err = job_env(repo, "llama2-70b", *([te.selector(name)] if name else []))
        assert env["XLA_FLAGS"] == plain["XLA_FLAGS"] and "WARNING" not in err
        assert {k: env[k] for k in plain if k not in ("HOME", "OUTPUT_PATH")} == {
            k: v for k, v in plain.items() if k not in ("HOME", "OUTPUT_PATH")}
    env, _, err = job_env(repo, "llama2-70b", te.selector("ag512M"))
    assert env["XLA_FLAGS"] == f"{IMAGE} {TOOLKIT} --{AG}=536870912" and err == ""
    assert flag_values(env["XLA_FLAGS"], AG)[-1] == "536870912"  # last wins over the image's
    env, _, _ = job_env(repo, "llama2-70b", te.selector("Gco1G+nch8"))
    assert env["XLA_FLAGS"] == " ".join([IMAGE, TOOLKIT, *BOTH.xla_flags])
    assert (env["NCCL_NCHANNELS_PER_NET_PEER"], env["NCCL_PROTO"]) == ("8", "Simple")
    env, _, _ = job_env(repo, "llama2-70b", te.selector("nch8"))
    assert env["NCCL_NCHANNELS_PER_NET_PEER"] == "8"  # over train_env.sh's own 4
    assert env["XLA_FLAGS"] == plain["XLA_FLAGS"]
    # Set after the NCCL auto-detection helper and after the file's last NCCL exports.
    env, _, _ = job_env(repo, "llama2-70b", te.selector("late"))
    assert (env["NCCL_IB_TC"], env["NCCL_PXN_DISABLE"]) == ("106", "1")
    _, _, err = job_env(repo, "llama2-70b", te.selector("nosuch"))
    check_golden(GOLDEN / "train_env" / "unknown_profile_warning.txt", err)


def test_the_post_nccl_block_is_where_env_arms_win(tmp_path: Path) -> None:
    """Moved above the NCCL auto-detection, the same arm loses: placement is what wins."""
    repo = toolkit(tmp_path, LATE)
    text = (repo / "train_env.sh").read_text()
    start, end = text.index(te.ENV_HEADER), text.index(te.ENV_END) + len(te.ENV_END) + 1
    block, rest = text[start:end], text[:start] + text[end:]
    helper = rest.index("# ---- Auto-detected NCCL")
    early = rest[:helper] + 'TUNE_PROFILE="${TUNE_PROFILE:-}"\n' + block + rest[helper:]
    (repo / "train_env.sh").write_text(early)
    env, _, _ = job_env(repo, "llama2-70b", te.selector("late"))
    assert (env["NCCL_IB_TC"], env["NCCL_PXN_DISABLE"]) == ("104", "0")


def test_the_extracted_env_map_path(tmp_path: Path) -> None:
    """TUNE_PROFILE not exported, only in EXTRACTED_ENV_MAP (the SKILL.md's block reads it)."""
    repo = toolkit(tmp_path, AG512, NCH8)
    script = ('declare -A EXTRACTED_ENV_MAP=([TUNE_PROFILE]="$1")\n'
              f'source {repo}/train_env.sh\n'
              'printf "%s\\n" "XLA_FLAGS=$XLA_FLAGS" "NCCL=$NCCL_NCHANNELS_PER_NET_PEER"\n')
    env = {"PATH": os.environ["PATH"], "XLA_FLAGS": IMAGE}
    for name, tail, nch in (("ag512M", f" --{AG}=536870912", "4"), ("nch8", "", "8"),
                            ("", "", "4")):
        out = subprocess.run(["bash", "-c", script, "bash", name], capture_output=True,
                             text=True, env=env, check=True).stdout.splitlines()
        assert out == [f"XLA_FLAGS={IMAGE} {TOOLKIT}{tail}", f"NCCL={nch}"]


def test_the_per_model_env_file_wins_over_an_arm(tmp_path: Path) -> None:
    """configs/<model>.env.sh is sourced after train_env.sh: what it sets beats the arm. The
    job's printed environment says so (a NOT_APPLIED result, the culprit named); an env var's
    `_env_` passthrough (placement) wins back; an XLA flag it sets is reported lost."""
    env_file = (MAXTEXT_FIXTURE / "configs" / "deepseek3-671b.env.sh").read_text()
    repo = toolkit(tmp_path, AG512, MEM95)
    env, lines, _ = job_env(repo, "deepseek3-671b", te.selector("ag512M"))
    assert flag_values(env["XLA_FLAGS"], AG) == ["8589934592", "536870912", "1073741824"]
    ok, culprit = logread_applied([Setting(AG, "536870912")], effective(lines))
    assert not ok and culprit and f"{AG}=1073741824 won" in culprit
    assert [o.key for o in te.placement(AG512, env_file).lost] == [AG]

    mem = Setting(MEM_FRACTION, ".95", Layer.ENV)
    env, lines, _ = job_env(repo, "deepseek3-671b", te.selector("mem95"))
    assert env[MEM_FRACTION] == ".97"
    assert not logread_applied([mem], effective(lines))[0]
    env, lines, _ = job_env(repo, "deepseek3-671b", *te.placement(MEM95, env_file).passthrough)
    assert env[MEM_FRACTION] == ".95"
    assert logread_applied([mem], effective(lines)) == (True, None)
    # Without an env file setting it, the arm alone wins.
    env, lines, _ = job_env(repo, "llama2-70b", te.selector("mem95"))
    assert logread_applied([mem], effective(lines)) == (True, None)


# ---- real Slurm: a submission freezes its own train_env.sh -------------------------------------


def wait_for_summary(log: Path, limit_s: float = 60) -> list[str]:
    deadline = time.monotonic() + limit_s
    while not (log.exists() and "JOB SUMMARY" in log.read_text()):
        assert time.monotonic() < deadline, f"no JOB SUMMARY in {log}"
        time.sleep(0.3)
    return log.read_text().splitlines()


@pytest.mark.slurm
def test_a_submitted_job_keeps_its_arm_when_the_file_changes(slurm_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    """submit.sh snapshots the repo: the arms a pending job was submitted with are the ones it
    runs, whatever train_env.sh holds later (why sweepd only ever adds arms)."""
    repo = toolkit(tmp_path, NCH8)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    train = f"bash {repo}/_train.sh {sys.executable} {repo}/fake_train.py"
    passthrough = ["steps=2", te.selector("nch8")]
    name = te.job_name_for("llama2-70b", None, passthrough)
    res = subprocess.run(
        [str(repo / "submit.sh"), "llama2-70b", "-N", "1", "-w", "chi2880", "--", *passthrough],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **slurm_env, "SWEEPD_TRAIN_CMD": train, "XLA_FLAGS": IMAGE})
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"JOB_NAME={name}" in res.stdout.splitlines()
    assert te.clean(repo / "train_env.sh")  # the live file changes at once
    assert te.apply(repo / "train_env.sh", te.arm("nch8", env={"NCCL_NCHANNELS_PER_NET_PEER": "2"}))
    job_id = re.findall(r"Submitted batch job (\d+)", res.stdout)[-1]
    lines = wait_for_summary(repo / "outputs" / f"{job_id}-{name}.log")
    eff = effective(lines)
    assert eff.env["NCCL_NCHANNELS_PER_NET_PEER"] == "8"
    assert eff.xla_text == f"{IMAGE} {TOOLKIT}"
    assert "0: env TUNE_PROFILE=nch8" in lines  # fake_train.py saw the passthrough
    assert any(line.startswith("0: completed step: 1,") for line in lines)


def test_a_sweeps_own_arms_are_removed_and_anothers_stay(tmp_path: Path) -> None:
    path = tmp_path / "train_env.sh"
    original = (MAXTEXT_FIXTURE / "train_env.sh").read_text()
    path.write_text(original)
    mine = te.arm("pag", ["--xla_gpu_enable_pipelined_all_gather=true"], {"NCCL_PROTO": "Simple"})
    theirs = te.arm("dbuf", ["--xla_gpu_enable_while_loop_double_buffering=true"])
    te.apply(path, mine)
    te.apply(path, theirs)
    assert te.remove(path, ["pag", "gone"]) == (mine,)
    assert te.arms(path.read_text()) == (theirs,)
    assert te.remove(path, ["pag"]) == ()           # nothing of it left: the file unchanged
    assert te.remove(path, ["dbuf"]) == (theirs,)
    assert path.read_text() == original              # no arm left: both blocks gone
