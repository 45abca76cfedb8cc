"""The golden-file check both verdict-prose tests use: it fails on a difference and, with
`SWEEPD_REWRITE_GOLDEN=1`, rewrites the file instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden_files import REWRITE_VAR, check_golden


def test_a_differing_golden_file_fails_and_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REWRITE_VAR, raising=False)
    path = tmp_path / "case.txt"
    path.write_text("old verdict\n")
    with pytest.raises(AssertionError, match="SWEEPD_REWRITE_GOLDEN=1 rewrites it"):
        check_golden(path, "new verdict\n")
    assert path.read_text() == "old verdict\n"
    check_golden(path, "old verdict\n")


def test_rewrite_writes_the_file_and_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REWRITE_VAR, "1")
    path = tmp_path / "kind" / "case.txt"
    check_golden(path, "new verdict\n")
    assert path.read_text() == "new verdict\n"
