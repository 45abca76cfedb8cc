"""`report --apply --commit` commits sweepd's change alone: a file with the person's own
uncommitted changes (staged or not, or not committed at all) or a link to a file outside the
repo is refused in one line by `person_commit.branch_of`, which both kinds' apply call before
anything is written. Real git repos in tmp dirs."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from sweepd.kinds.model_perf import hooks
from sweepd.kinds.registry import ClientOutput
from sweepd.util import person_commit
from tests.golden_files import GOLDEN, check_golden, scrubbed

MODEL = "llama2-70b"
TEXT = f"model_name: {MODEL}\nper_device_batch_size: 4\nsteps: 20\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A toolkit checkout on a feature branch, its model config committed."""
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "t")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "t@example.org")
    top = tmp_path / "toolkit"
    (top / "configs").mkdir(parents=True)
    (top / "configs" / f"{MODEL}.gpu.yml").write_text(TEXT)
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "toolkit")
    git(top, "checkout", "-q", "-b", "feat")
    return top


def apply(path: Path) -> tuple[int, list[str]]:
    said: list[str] = []

    def fail(args: argparse.Namespace, text: str) -> int:
        said.append(text)
        return 2

    io = ClientOutput(fail=fail, say=lambda text, err=False: said.append(text),
                      print_json=lambda data: None)
    args = argparse.Namespace(id=1, apply=path, commit=True, json=False, force=False)
    report = {"verdict": {"parameter": "per_device_batch_size", "best": 10},
              "sweep": {"spec": {"model": MODEL}}}
    return hooks.apply(args, report, io), said


def test_the_persons_uncommitted_edit_is_refused_before_anything_is_written(
        repo: Path) -> None:
    path = repo / "configs" / f"{MODEL}.gpu.yml"
    mine = TEXT.replace("steps: 20", "steps: 99  # my experiment, not ready")
    path.write_text(mine)
    code, said = apply(path)
    assert code == 2 and len(said) == 1 and "\n" not in said[0]
    assert "has changes not committed" in said[0] and "commit or stash" in said[0]
    assert path.read_text() == mine and git(repo, "log", "--oneline").count("\n") == 1
    git(repo, "add", "-A")  # staged is not committed either
    with pytest.raises(person_commit.CommitError, match="has changes not committed"):
        person_commit.branch_of(path)
    git(repo, "commit", "-qm", "my experiment")
    code, said = apply(path)
    assert code == 0, said
    shown = git(repo, "show", "HEAD")
    assert "+per_device_batch_size: 10" in shown and "+steps" not in shown


def test_a_file_not_committed_yet_is_refused(repo: Path) -> None:
    path = repo / "configs" / "other.gpu.yml"
    path.write_text(TEXT)
    with pytest.raises(person_commit.CommitError, match=r"is not committed in .* yet") as e:
        person_commit.branch_of(path)
    assert "\n" not in str(e.value)


def test_a_link_to_a_file_outside_the_repo_is_refused_before_the_write(
        repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / f"{MODEL}.gpu.yml"
    outside.parent.mkdir()
    outside.write_text(TEXT)
    path = repo / "configs" / f"{MODEL}.gpu.yml"
    path.unlink()
    path.symlink_to(outside)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config from elsewhere")
    code, said = apply(path)
    assert code == 2 and len(said) == 1 and "\n" not in said[0]
    check_golden(GOLDEN / "person_commit" / "link_outside.txt",
                 scrubbed(f"{said[0]}\n", tmp=tmp_path, repo=repo))
    assert outside.read_text() == TEXT


def test_a_clean_file_is_committed_alone(repo: Path) -> None:
    path = repo / "configs" / f"{MODEL}.gpu.yml"
    (repo / "notes.txt").write_text("the person's own staged change\n")
    git(repo, "add", "notes.txt")
    code, said = apply(path)
    assert code == 0, said
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        f"configs/{MODEL}.gpu.yml"]
    assert git(repo, "diff", "--cached", "--name-only").split() == ["notes.txt"]
