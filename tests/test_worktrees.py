"""A checkout per commit: the person's checkout, index, stash and worktree list are never
touched, each checkout is a repo root for submit.sh, and it goes when the sweep ends."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sweepd.app.service import Service
from sweepd.clusters.factory import make_backend
from sweepd.config import load_config
from sweepd.core.engine import Engine
from sweepd.core.states import SweepState
from sweepd.store.store import Store
from sweepd.util import worktrees
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import NODES, write_scenario


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
    # Repo roots for submit.sh (a `.git` directory), nothing registered in the person's repo.
    assert all((t.path / ".git").is_dir() for t in trees)
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "branch", "--list") == "* main"


async def test_adding_again_reuses_and_remove_cleans_up(repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "wt"
    first = await worktrees.add(repo, "v1", root)
    again = await worktrees.add(repo, "v1", root)
    assert again == first
    await worktrees.remove(repo, first)
    assert not first.path.exists()
    assert str(first.path) not in git(repo, "worktree", "list")


async def test_remove_all_leaves_nothing(repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "sweep-1" / "worktrees"
    refs_before = git(repo, "for-each-ref")
    trees = await worktrees.prepare(repo, ["v1", "main"], root)
    (root / "abc.partial").mkdir()   # a clone a crash interrupted
    removed = await worktrees.remove_all(repo, root)
    assert sorted(removed) == sorted([root / "abc.partial", *(t.path for t in trees)])
    assert not root.exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "for-each-ref") == refs_before
    assert await worktrees.remove_all(repo, root) == []


async def test_a_git_worktree_an_older_sweepd_made_becomes_a_clone(repo: Path,
                                                                   tmp_path: Path) -> None:
    root = tmp_path / "wt"
    sha = git(repo, "rev-parse", "v1^{commit}")
    old = worktrees.worktree_dir(root, sha)
    git(repo, "worktree", "add", "-q", "--detach", str(old), sha)
    tree = await worktrees.add(repo, "v1", root)
    assert tree.path == old and (old / ".git").is_dir()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


@contextlib.asynccontextmanager
async def sim_service(tmp_path: Path) -> AsyncIterator[Service]:
    """A real store, engine (simulated cluster) and service; stepped by the test."""
    scenario = write_scenario(tmp_path, time_scale=0.05)
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "cluster.sim": {"scenario": str(scenario)}})
    config.daemon.state_dir.mkdir(parents=True, exist_ok=True)
    store = await Store.open(config.daemon.db_path)
    backend, clock = make_backend(config)
    engine = Engine(store, backend, clock, config)
    try:
        yield Service(engine)
    finally:
        await engine.close()   # its log tailers keep files open
        await backend.close()
        await store.close()


async def start_model_sweep(service: Service, repo: Path) -> tuple[int, Path]:
    """A model sweep over two commits, stepped until both checkouts exist."""
    sweep_id = int((await service.submit({
        "kind": "model-sweep", "nodes": NODES, "repo": str(repo),
        "commits": ["v1", "main"], "matrix": {"llama2-70b": [1]}}))["id"])
    root = service.engine.outputs / f"sweep-{sweep_id}" / "worktrees"
    for _ in range(20):
        await service.engine.step()
        if len(list(root.glob("*"))) == 2:
            break
    assert len(list(root.glob("*"))) == 2
    return sweep_id, root


async def released(service: Service, sweep_id: int) -> list[list[str]]:
    """Each `checkouts.released` record's removed checkouts (its evidence), sorted."""
    return [sorted((e.evidence or "").split(", "))
            for e in await service.store.events.of_sweep(sweep_id)
            if e.rule == "checkouts.released"]


def checkouts(root: Path) -> list[list[str]]:
    """What `released` reads once the checkouts under `root` are removed."""
    return [sorted(str(p) for p in root.glob("*"))]


async def test_an_ended_model_sweep_removes_its_checkouts(repo: Path, tmp_path: Path) -> None:
    """Aborted while its jobs run (the finished and failed ends: test_slurm_kinds)."""
    status_before = git(repo, "status", "--porcelain")
    async with sim_service(tmp_path) as service:
        sweep_id, root = await start_model_sweep(service, repo)
        made = checkouts(root)
        await service.abort(sweep_id)
        assert not root.exists()
        assert await released(service, sweep_id) == made
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "status", "--porcelain") == status_before


async def test_a_restart_removes_what_a_crash_left_behind(repo: Path, tmp_path: Path) -> None:
    """The sweep ended, then the daemon died before its clean-up."""
    async with sim_service(tmp_path) as service:
        sweep_id, root = await start_model_sweep(service, repo)
        await service.store.sweeps.transition(sweep_id, SweepState.ABORTED, "test: crash")
        made = checkouts(root)
    async with sim_service(tmp_path) as service:   # a new process
        await service.engine.step()
        assert not root.exists()
        assert await released(service, sweep_id) == made


async def test_a_checkout_that_cannot_be_made_stops_the_sweep_under_its_rule(
        repo: Path, tmp_path: Path) -> None:
    """The repository went away after the sweep was accepted: no checkout, nothing
    submitted, the stop recorded under `worktree.failed` with git's words as evidence."""
    async with sim_service(tmp_path) as service:
        sweep_id = int((await service.submit({
            "kind": "model-sweep", "nodes": NODES, "repo": str(repo),
            "commits": ["v1", "main"], "matrix": {"llama2-70b": [1]}}))["id"])
        repo.rename(tmp_path / "gone")
        for _ in range(10):
            await service.engine.step()
            if (await service.store.sweeps.get(sweep_id)).state == \
                    SweepState.AWAITING_DECISION:
                break
        sweep = await service.store.sweeps.get(sweep_id)
        assert sweep.state == SweepState.AWAITING_DECISION
        assert sweep.reason is not None and sweep.reason.startswith("cannot check out ")
        [stop] = [e for e in await service.store.events.of_sweep(sweep_id)
                  if e.rule == "worktree.failed" and e.run_id is None]
        assert stop.to_state == SweepState.AWAITING_DECISION
        assert stop.evidence and str(repo) in stop.evidence
        # One stop, from the wave's first run: nothing submitted, nothing left open.
        jobs = await service.store.jobs.of_sweep(sweep_id)
        assert len(jobs) == 1 and jobs[0].backend_id is None


async def test_a_checkout_that_cannot_be_removed_is_recorded_and_the_end_stands(
        repo: Path, tmp_path: Path) -> None:
    """A checkout under the sweep's folder that git will not remove (here a `git worktree`
    link to nothing): the failure is a note under `checkouts.release_failed`, the abort
    stands."""
    async with sim_service(tmp_path) as service:
        sweep_id, root = await start_model_sweep(service, repo)
        stale = root / "0-stale"
        stale.mkdir()
        (stale / ".git").write_text(f"gitdir: {tmp_path / 'nowhere'}\n")
        await service.abort(sweep_id)
        assert (await service.store.sweeps.get(sweep_id)).state == SweepState.ABORTED
        failed = [e for e in await service.store.events.of_sweep(sweep_id)
                  if e.rule == "checkouts.release_failed"]
        assert failed and failed[0].kind == "note"
        # The reason: a clause of sweepd's, then git's error (the evidence) as git says it.
        assert failed[0].evidence and failed[0].reason.endswith(failed[0].evidence)
        check_golden(GOLDEN / "worktrees" / "release_failed.txt",
                     failed[0].reason.removesuffix(failed[0].evidence) + "\n")
        assert failed[0].evidence and "0-stale" in failed[0].evidence
        assert await released(service, sweep_id) == []
