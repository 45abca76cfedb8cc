"""The prose of xla-tuning verdicts (tests/xla_verdict_cases.py), held to
tests/golden/xla_tuning/<case>.txt: the verdict line (`report`, `explain`, Telegram), then its
caveats one per line with their kinds. `SWEEPD_REWRITE_GOLDEN=1 pytest
tests/test_xla_verdict_golden.py` rewrites them: review the diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden_files import check_golden
from tests.xla_verdict_cases import CASES

GOLDEN = Path(__file__).parent / "golden" / "xla_tuning"


def _prose(name: str) -> str:
    case = CASES[name]()
    return case.summary + "\n" + "".join(f"  [{c.kind}] {c.text}\n" for c in case.said.caveats)


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_verdict_prose_matches_its_golden_file(name: str) -> None:
    check_golden(GOLDEN / f"{name}.txt", _prose(name))


def test_every_xla_golden_file_has_its_case() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(CASES)
