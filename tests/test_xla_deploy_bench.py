"""`bench/xla_deploy_realizes.py --smoke` runs and every deployed verdict is realized; the
patch as it was written before loses some (the bench can tell the two apart)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("xla_deploy_realizes",
                                                  BENCH / "xla_deploy_realizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_smoke_realizes_every_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    b = bench()
    assert b.main(["--smoke"]) == 0
    # One row per family, up to the timing line (the landscape generators' families grow).
    out = capsys.readouterr().out.splitlines()[1:]
    rows = [ln.split() for ln in out[:next(i for i, ln in enumerate(out) if ln.startswith("("))]
            if not ln.startswith(" ")]
    assert [r[0] for r in rows] == ["real", *b.GENERATORS, "envfile"]
    assert all(r[3] == "100%" and r[4] == "100%" for r in rows), rows
    assert b.main(["--smoke", "--before"]) == 0
    before = [ln.split() for ln in capsys.readouterr().out.splitlines()[1:]
              if ln.split() and ln.split()[0] in ("real", "tuned", "fresh", "envfile")]
    assert any(r[3] != "100%" for r in before)
