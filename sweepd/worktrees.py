"""One git worktree per commit, so a model sweep never touches the user's working tree.

batch-sweep.SKILL.md checks commits out in place (stashing uncommitted changes); here each
commit gets a detached worktree under the sweep's own directory instead, so the user's
checkout, index and stash stay exactly as they were, and two commits can be live at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class GitError(RuntimeError):
    """A git command failed; the message carries git's own words."""


@dataclass(frozen=True)
class Worktree:
    ref: str      # what the user asked for (branch, tag, short or full SHA)
    sha: str      # the full commit id it resolved to
    path: Path


async def _git(repo: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "git", "-C", str(repo), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        text = (err or out).decode(errors="replace").strip()
        raise GitError(f"git {' '.join(args)} in {repo}: {text}")
    return out.decode().strip()


async def resolve(repo: Path, ref: str) -> str:
    """The full SHA of `ref`; refs move, SHAs do not, so runs record the SHA."""
    if ref.startswith("-"):
        raise GitError(f"{ref!r} is not a commit")  # would be read as an option
    if not await asyncio.to_thread(repo.is_dir):
        raise GitError(f"repo {repo} does not exist")
    try:
        return await _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitError:
        raise GitError(f"{ref!r} is not a commit in {repo}") from None


def worktree_dir(root: Path, sha: str) -> Path:
    return root / sha[:12]


async def add(repo: Path, ref: str, root: Path) -> Worktree:
    """A detached worktree of `ref` under `root`; an existing one at that commit is reused
    (a restarted daemon prepares the same sweep again)."""
    sha = await resolve(repo, ref)
    path = worktree_dir(root, sha)
    if path.exists():
        if await _git(path, "rev-parse", "HEAD") != sha:
            raise GitError(f"{path} exists but is not at {sha}")
        return Worktree(ref, sha, path)
    await _git(repo, "worktree", "add", "--detach", str(path), sha)
    return Worktree(ref, sha, path)


async def prepare(repo: Path, refs: Sequence[str], root: Path) -> list[Worktree]:
    """Worktrees for every commit of a sweep, in order (git locks the repo: one at a time)."""
    return [await add(repo, ref, root) for ref in refs]


async def remove(repo: Path, tree: Worktree) -> None:
    await _git(repo, "worktree", "remove", "--force", str(tree.path))
