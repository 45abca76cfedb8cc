"""Git worktrees per commit: the user's checkout, index and stash are never touched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sweepd import worktrees


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@example.com", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "train.py").write_text("v1\n")
    git(path, "add", "train.py")
    git(path, "commit", "-q", "-m", "one")
    git(path, "tag", "v1")
    (path / "train.py").write_text("v2\n")
    git(path, "commit", "-q", "-am", "two")
    # The user's uncommitted work, which a worktree must leave alone.
    (path / "train.py").write_text("dirty\n")
    (path / "notes.txt").write_text("untracked\n")
    return path


async def test_resolve_refs_to_full_shas(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert await worktrees.resolve(repo, "HEAD") == head
    assert await worktrees.resolve(repo, "main") == head
    assert await worktrees.resolve(repo, head[:7]) == head
    assert await worktrees.resolve(repo, "v1") == git(repo, "rev-parse", "v1^{commit}")
    with pytest.raises(worktrees.GitError, match="not a commit"):
        await worktrees.resolve(repo, "no-such-branch")
    with pytest.raises(worktrees.GitError):
        await worktrees.resolve(repo, "--all")
    with pytest.raises(worktrees.GitError, match=r"repo /nonexistent/maxtext does not exist"):
        await worktrees.resolve(Path("/nonexistent/maxtext"), "main")


async def test_worktrees_check_out_each_commit_and_leave_the_user_tree_alone(
        repo: Path, tmp_path: Path) -> None:
    status_before = git(repo, "status", "--porcelain")
    root = tmp_path / "sweep-1" / "worktrees"
    trees = await worktrees.prepare(repo, ["v1", "main"], root)
    assert [t.ref for t in trees] == ["v1", "main"]
    assert (trees[0].path / "train.py").read_text() == "v1\n"
    assert (trees[1].path / "train.py").read_text() == "v2\n"
    assert all(t.path.parent == root for t in trees)
    assert git(trees[0].path, "rev-parse", "HEAD") == trees[0].sha
    # Detached: no branch checked out in the worktree, the user's branch is free.
    assert git(trees[1].path, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
    assert (repo / "train.py").read_text() == "dirty\n"
    assert git(repo, "status", "--porcelain") == status_before
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(repo, "stash", "list") == ""


async def test_adding_again_reuses_and_remove_cleans_up(repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "wt"
    first = await worktrees.add(repo, "v1", root)
    again = await worktrees.add(repo, "v1", root)
    assert again == first
    await worktrees.remove(repo, first)
    assert not first.path.exists()
    assert str(first.path) not in git(repo, "worktree", "list")
