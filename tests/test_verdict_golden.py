"""The prose of a handful of model perf verdicts, held to tests/golden/model_perf/<case>.txt
(the verdict line, then its caveats one per line with their kinds).
`SWEEPD_REWRITE_GOLDEN=1 pytest tests/test_verdict_golden.py` rewrites them: review the diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden_files import check_golden
from tests.verdict_cases import CASES

GOLDEN = Path(__file__).parent / "golden" / "model_perf"


def _prose(name: str) -> str:
    done = CASES[name]()
    caveats = done.verdict.get("caveats") or []
    return done.summary + "\n" + "".join(f"  [{c['kind']}] {c['text']}\n" for c in caveats)


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdict_prose_matches_its_golden_file(name: str) -> None:
    check_golden(GOLDEN / f"{name}.txt", _prose(name))


def test_every_golden_file_has_its_case() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(CASES)
