"""bench/tpu_recorded_sweep.py as a module for the tests: the recorded real TPU runs
(`recorded`) and a sweep replaying them through the local backend (`sweep`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tpu_recorded_sweep",
                                                  ROOT / "bench" / "tpu_recorded_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
