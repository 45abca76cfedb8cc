"""One checkout per commit, so a model sweep never touches the person's repo.

batch-sweep.SKILL.md checks commits out in place (stashing uncommitted changes); here each
commit gets its own clone under the sweep's directory instead (`git clone --shared`: it
borrows the repo's objects, copies nothing and registers nothing in the repo), detached
at the commit. The person's checkout, index, stash and worktree list stay exactly as they
were, and two commits can be live at once. A clone has a `.git` *directory*, which
maxtext-slurm's submit.sh needs to take it for a repo root (a `git worktree` has a `.git`
file, and submit.sh would then snapshot the worktree's parent folder). The checkouts are
removed when the sweep ends (`remove_all`); the jobs run from submit.sh's snapshots.
"""

from __future__ import annotations

import asyncio
import shutil
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
    """A checkout of `ref` under `root`; an existing one at that commit is reused (a
    restarted daemon prepares the same sweep again)."""
    sha = await resolve(repo, ref)
    path = worktree_dir(root, sha)
    if await asyncio.to_thread((path / ".git").is_file):
        # A `git worktree` an older sweepd made: submit.sh does not take it for a repo root.
        await _git(repo, "worktree", "remove", "--force", str(path))
    if path.exists():
        if await _git(path, "rev-parse", "HEAD") != sha:
            raise GitError(f"{path} exists but is not at {sha}")
        return Worktree(ref, sha, path)
    # Cloned aside and renamed: a crash mid-clone never leaves a checkout that looks whole.
    partial = path.with_name(path.name + ".partial")
    await asyncio.to_thread(shutil.rmtree, partial, True)
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    source = await asyncio.to_thread(repo.absolute)
    await _git(repo, "clone", "--quiet", "--shared", "--no-checkout", str(source), str(partial))
    await _git(partial, "checkout", "--quiet", "--detach", sha)
    await asyncio.to_thread(partial.rename, path)
    return Worktree(ref, sha, path)


async def prepare(repo: Path, refs: Sequence[str], root: Path) -> list[Worktree]:
    """Checkouts for every commit of a sweep, in order."""
    return [await add(repo, ref, root) for ref in refs]


async def remove(repo: Path, tree: Worktree) -> None:
    await _remove_path(repo, tree.path)


async def _remove_path(repo: Path, path: Path) -> None:
    if await asyncio.to_thread((path / ".git").is_file):   # an older sweepd's worktree
        await _git(repo, "worktree", "remove", "--force", str(path))
    else:
        await asyncio.to_thread(_delete, path)


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


async def remove_all(repo: Path, root: Path) -> list[Path]:
    """Remove every checkout under `root` (and `root`): the sweep has ended. Returns what
    was removed."""
    if not await asyncio.to_thread(root.is_dir):
        return []
    removed = []
    for path in sorted(await asyncio.to_thread(lambda: list(root.iterdir()))):
        await _remove_path(repo, path)
        removed.append(path)
    await asyncio.to_thread(root.rmdir)
    return removed
