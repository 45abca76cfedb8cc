"""`report --apply --commit`: commit what sweepd wrote into the person's repo (the SKILL.md's
step 8, "update the config file and amend the commit if on a feature branch").

Opt-in, and never on the repo's default branch (its `origin/HEAD`, else `main`/`master`
and `init.defaultBranch`) nor on a detached HEAD: a deployment goes through the person's
own review. Only the file written is committed (`git commit --only`), never anything else
they staged, and only a file that is in the repo (not a link out of it) and that has no
changes of theirs not yet committed: sweepd's commit would carry them under its message.
All that is checked before anything is written (`branch_of`). A new commit, not an amend:
the person's last commit stays as they made it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


class CommitError(ValueError):
    """One line: why nothing was committed."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git")
    if git is None:
        raise CommitError("git is not on PATH: nothing committed")
    return subprocess.run([git, "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=60, check=False)


def _first_line(res: subprocess.CompletedProcess[str]) -> str:
    text = (res.stderr or res.stdout).strip().splitlines()
    return text[0] if text else f"exit {res.returncode}"


def default_branches(repo: Path) -> set[str]:
    out = {"main", "master"}
    head = _git(repo, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if head.returncode == 0 and head.stdout.strip():
        out.add(head.stdout.strip().removeprefix("origin/"))
    init = _git(repo, "config", "--get", "init.defaultBranch")
    if init.returncode == 0 and init.stdout.strip():
        out.add(init.stdout.strip())
    return out


def branch_of(path: Path) -> tuple[Path, str]:
    """The repo holding `path` and its current branch, when sweepd may commit there: on a
    feature branch, the file (a link followed) in that repo and without uncommitted changes,
    staged or not. Called before anything is written; CommitError (one line) otherwise."""
    repo, name = _branch(path)
    rel = _in_repo(path, repo)
    status = _git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all",
                  "--", rel)
    if status.returncode != 0:
        raise CommitError(f"git status {rel} failed: {_first_line(status)}; nothing written "
                          "or committed")
    state = status.stdout[:2]
    if state == "!!":
        raise CommitError(f"{path} is ignored by git in {repo}: --commit cannot commit it; "
                          "nothing written or committed")
    if state == "??":
        raise CommitError(f"{path} is not committed in {repo} yet: --commit would commit "
                          "all of it under sweepd's message; commit it first, or apply "
                          "without --commit; nothing written or committed")
    if state:
        raise CommitError(f"{path} has changes not committed in {repo} (staged or not): "
                          "--commit would commit them under sweepd's message; commit or "
                          "stash them first, or apply without --commit; nothing written or "
                          "committed")
    return repo, name


def _in_repo(path: Path, repo: Path) -> str:
    """The file's path in the repo; a link to a file outside it is refused."""
    try:
        real = path.resolve()
    except (RuntimeError, OSError):  # a symbolic link loop
        raise CommitError(f"{path} is a symbolic link loop: nothing written or "
                          "committed") from None
    try:
        return str(real.relative_to(repo.resolve()))
    except ValueError:
        raise CommitError(f"{path} is a link to {real}, outside the repository {repo}: "
                          "--commit only commits a file in it; nothing written or "
                          "committed") from None


def _branch(path: Path) -> tuple[Path, str]:
    where = path.parent
    top = _git(where, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise CommitError(f"{path} is not in a git repository: nothing written or committed")
    repo = Path(top.stdout.strip())
    branch = _git(repo, "symbolic-ref", "--quiet", "--short", "HEAD")
    if branch.returncode != 0:
        raise CommitError(f"{repo} is on a detached HEAD: --commit only commits on a feature "
                          "branch; nothing written or committed")
    name = branch.stdout.strip()
    if name in default_branches(repo):
        raise CommitError(f"{repo} is on its default branch {name}: --commit never commits "
                          "there (check out a feature branch); nothing written or committed")
    return repo, name


def commit(path: Path, message: str) -> str:
    """Commit `path` alone in its repo on the current (feature) branch; returns
    `<branch> <short sha>`. CommitError (one line) when it cannot or must not."""
    repo, name = _branch(path)  # the file now holds sweepd's change: not branch_of's
    rel = _in_repo(path, repo)
    added = _git(repo, "add", "--", rel)
    if added.returncode != 0:
        raise CommitError(f"git add {rel} failed: {_first_line(added)}; nothing committed")
    done = _git(repo, "commit", "--only", "-m", message, "--", rel)
    if done.returncode != 0:
        raise CommitError(f"git commit failed: {_first_line(done)}; nothing committed")
    sha = _git(repo, "rev-parse", "--short", "HEAD").stdout.strip()
    return f"{name} {sha}"
