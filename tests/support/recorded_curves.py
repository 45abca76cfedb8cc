"""bench/recorded_curves.py as a module for the tests: the recorded real curves, their replay
through the local backend, and the check of a verdict's statements against their truth."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@cache
def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recorded_curves",
                                                  ROOT / "bench" / "recorded_curves.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["recorded_curves"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
