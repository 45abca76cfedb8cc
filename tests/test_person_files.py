"""The person's files (issue 23, item 3): every write sweepd makes into their checkout goes
through `util.person_files`. A person's editor takes no lock, so these tests run a real
concurrent writer appending lines while sweepd adds train_env.sh arms and applies an env-file
patch, and check that no line of theirs is lost, that owner, mode, inode and link count stay,
and that the file parses; and a file owned by another user keeps its owner."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from sweepd.clusters import train_env as te
from sweepd.kinds.model_perf.hooks import apply_to_config
from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Setting
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.hooks_apply import apply_env_patch
from sweepd.util import person_files
from tests.golden_files import GOLDEN, check_golden
from tests.slurm_cluster import MAXTEXT_FIXTURE


class Appender(threading.Thread):
    """A person's editor: opens the file, appends a line, closes it, every ~0.05 s."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.lines = path, []  # type: list[str]
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            line = f"# the person's line {i}"
            with self.path.open("a") as fh:
                fh.write(line + "\n")
            self.lines.append(line)
            i += 1
            self.stop.wait(0.05)

    def __enter__(self) -> Appender:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()


def identity(path: Path) -> tuple[int, int, int, int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_ino, st.st_nlink


def parses(path: Path) -> bool:
    return subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def linked(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o640)
    link = tmp_path / f"hardlink-{name}"
    os.link(path, link)
    return path, link


def test_arms_and_a_patch_under_a_concurrent_editor_lose_none_of_its_lines(
        tmp_path: Path) -> None:
    path, link = linked(tmp_path, "train_env.sh", (MAXTEXT_FIXTURE / "train_env.sh").read_text())
    env, env_link = linked(tmp_path, "m.env.sh", "export NCCL_X=1\n")
    before, env_before = identity(path), identity(env)
    arms: list[te.Arm] = []
    with Appender(path) as editor, Appender(env) as editor2:
        # Edits go on until the editors have saved a few times in between (no clock read).
        while len(arms) < 200 and (len(arms) < 12 or len(editor.lines) < 8):
            arms.append(te.arm(f"p{len(arms)}", [f"--xla_gpu_knob_{len(arms)}=1"],
                               {f"NCCL_K{len(arms)}": "2"}))
            assert te.apply(path, arms[-1]) is True
        n = 0
        while n < 200 and (n < 6 or len(editor2.lines) < 8):
            apply_env_patch(env, "m", Parallelism.parse("PP=8"), [f"# try {n}"],
                            deploy.body([deploy.Part("r", (Setting("xla_a", str(n)),))]))
            n += 1
    text, env_text = path.read_text(), env.read_text()
    assert len(editor.lines) >= 8 and len(editor2.lines) >= 8
    assert all(line in text.splitlines() for line in editor.lines)
    assert all(line in env_text.splitlines() for line in editor2.lines)
    assert te.arms(text) == tuple(arms) and env_text.count(">>> sweepd:") == 1
    assert identity(path) == before and identity(env) == env_before
    assert link.read_text() == text and env_link.read_text() == env_text
    assert parses(path) and parses(env)
    assert te.clean(path) is True and identity(path) == before and parses(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_file_owned_by_another_user_keeps_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "train_env.sh"
    path.write_text((MAXTEXT_FIXTURE / "train_env.sh").read_text())
    env = tmp_path / "m.env.sh"
    env.write_text("export NCCL_X=1\n")
    yml = tmp_path / "m.gpu.yml"
    yml.write_text("per_device_batch_size: 4  # tuned\nsteps: 15\n")
    for p in (path, env, yml):
        os.chown(p, 1000, 1000)
        p.chmod(0o664)
    before = {p: identity(p) for p in (path, env, yml)}
    assert te.apply(path, te.arm("p1", ["--xla_gpu_a=1"]))
    apply_env_patch(env, "m", Parallelism.parse("FSDP=8"), [],
                    deploy.body([deploy.Part("r", (Setting("xla_a", "1"),))]))
    assert apply_to_config(yml, "per_device_batch_size", 6) == "per_device_batch_size: 6"
    check_golden(GOLDEN / "person_files" / "owned_by_another.gpu.yml", yml.read_text())
    for p, ident in before.items():
        assert identity(p) == ident and identity(p)[:2] == (1000, 1000), p
    assert te.clean(path) and identity(path) == before[path]


def test_a_save_between_the_read_and_the_write_is_kept_and_the_edit_retried(
        tmp_path: Path) -> None:
    path = tmp_path / "f.sh"
    path.write_text("export A=1\n")
    calls = []

    def change(old: str | None) -> str:
        calls.append(old)
        if len(calls) == 1:  # the person saves while sweepd computes its text
            with path.open("a") as fh:
                fh.write("export B=2\n")
        return (old or "") + "export C=3\n"

    done = person_files.edit(path, change)
    assert done.attempts == 2   # the person's line kept, then sweepd's
    check_golden(GOLDEN / "person_files" / "saved_meanwhile.env.sh", path.read_text())


def test_a_file_that_keeps_changing_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "f.sh"
    path.write_text("export A=1\n")

    def change(old: str | None) -> str:
        with path.open("a") as fh:
            fh.write("# again\n")
        return (old or "") + "export C=3\n"

    with pytest.raises(person_files.PersonFileError, match="kept changing") as e:
        person_files.edit(path, change, attempts=3)
    assert "\n" not in str(e.value) and "export C=3" not in path.read_text()


def test_a_result_that_does_not_parse_gets_the_old_content_back(tmp_path: Path) -> None:
    path = tmp_path / "f.sh"
    path.write_text("export A=1\n")
    ino = path.stat().st_ino
    seen = []

    def check(text: str) -> None:  # passes before the write, fails on the file written
        seen.append(text)
        if len(seen) > 1:
            raise person_files.PersonFileError("would not parse, nothing written: test")

    with pytest.raises(person_files.PersonFileError):
        person_files.edit(path, lambda old: "export B=2\n", check=check)
    assert path.read_text() == "export A=1\n" and path.stat().st_ino == ino


def test_yaml_that_would_not_load_is_refused(tmp_path: Path) -> None:
    yml = tmp_path / "m.gpu.yml"
    yml.write_text("steps: 15\n")
    with pytest.raises(person_files.PersonFileError,
                       match="would not parse as YAML, nothing written"):
        person_files.edit(yml, lambda old: f"{old}remat_policy: [unclosed\n")
    assert yml.read_text() == "steps: 15\n"
    # model perf's --apply writes a value YAML would misread quoted: it loads as itself.
    apply_to_config(yml, "remat_policy", "[unclosed")
    check_golden(GOLDEN / "person_files" / "quoted_value.gpu.yml", yml.read_text())


def test_a_missing_file_is_refused_unless_created(tmp_path: Path) -> None:
    with pytest.raises(person_files.PersonFileError, match="no such file"):
        person_files.edit(tmp_path / "x.sh", lambda old: "export A=1\n")
    done = person_files.edit(tmp_path / "x.sh", lambda old: "export A=1\n", create=True)
    assert done.old is None and (tmp_path / "x.sh").read_text() == "export A=1\n"
    with pytest.raises(te.TrainEnvError, match="no such file"):
        te.apply(tmp_path / "train_env.sh", te.arm("p1", ["--xla_gpu_a=1"]))
