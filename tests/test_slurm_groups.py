"""The Slurm tests' split over the three local clusters (tests/slurm_cluster.py): every file in
one group, the groups' measured times balanced, each group on its own cluster directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import slurm_cluster
from tests.slurm_cluster import GROUPS, SLURM_S, SLURM_S_UNKNOWN, split_slurm_files

ROOT = Path(__file__).resolve().parents[1]
# A test asking for the cluster fixture, or a file or test marked `slurm`.
SLURM_TEST = re.compile(r"slurm_env:\s*dict|^(pytestmark\s*=\s*|@)pytest\.mark\.slurm\b", re.M)


def test_every_file_gets_one_of_the_groups_and_the_times_balance() -> None:
    files = [*SLURM_S, "test_slurm_new.py"]   # a file not measured yet is placed too
    group = split_slurm_files(files)
    assert set(group) == set(files) and set(group.values()) == set(GROUPS)
    load = {g: sum(SLURM_S.get(f, SLURM_S_UNKNOWN) for f in files if group[f] == g)
            for g in GROUPS}
    # Greedy longest-first: the groups differ by at most the longest file.
    assert max(load.values()) - min(load.values()) <= max(SLURM_S.values())
    assert split_slurm_files(list(reversed(files))) == group   # order of collection: no matter


def test_the_measured_files_exist() -> None:
    # A renamed or deleted file would leave its time counted for nothing.
    missing = [f for f in SLURM_S if not (ROOT / "tests" / f).exists()]
    assert missing == []


def test_every_file_with_slurm_tests_is_measured() -> None:
    # A file left out counts as SLURM_S_UNKNOWN: a long one would unbalance the groups.
    uses = [p.name for p in sorted((ROOT / "tests").glob("test_*.py"))
            if SLURM_TEST.search(p.read_text())]
    assert uses and [f for f in uses if f not in SLURM_S] == []


def test_the_groups_use_a_cluster_directory_each(monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = set()
    for number in sorted(set(GROUPS.values())):
        monkeypatch.setattr(slurm_cluster, "_current", number)
        dirs.add(slurm_cluster.slurm_dir())
    assert len(dirs) == len(GROUPS) == 3
