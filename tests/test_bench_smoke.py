"""Every benchmark in bench/ still runs: each one's `--smoke` mode (seconds), as a subprocess.

A bench that no longer runs against the package (a protocol method it lacks, a renamed
import) fails here instead of on the day someone wants its figure. New scripts are picked up
by the glob; a script (one with a `__main__` block) without a `--smoke` mode fails with that
said. A module the scripts import (no `__main__` block) is run the same way, which executes
its top level only: its code is exercised by the scripts' smoke runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))
SOURCES = sorted(BENCH.glob("*.cpp"))
TIMEOUT_S = 100   # below pytest's 120 s, so a hung bench reports its own output


def _run(cmd: list[str], timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          check=False)


def _failed(what: str, done: subprocess.CompletedProcess[str]) -> str:
    return (f"{what} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
            f"\n--- stderr\n{done.stderr[-3000:]}")


def test_the_glob_finds_the_benches() -> None:
    # An empty parametrization would pass vacuously if bench/ moved.
    assert len(SCRIPTS) >= 5, SCRIPTS
    assert SOURCES, "bench/isolation_optimum.cpp is gone"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_bench_smoke(script: Path) -> None:
    text = script.read_text()
    runnable = 'if __name__ == "__main__":' in text
    if runnable and "--smoke" not in text:
        pytest.fail(f"bench/{script.name} has no --smoke mode", pytrace=False)
    done = _run([sys.executable, str(script), "--smoke"])
    assert done.returncode == 0, _failed(f"{script.name} --smoke", done)
    if runnable:
        assert done.stdout.strip(), f"{script.name} --smoke printed nothing"


@pytest.mark.parametrize("source", SOURCES, ids=[p.name for p in SOURCES])
def test_cpp_bench_builds_and_smokes(source: Path, tmp_path: Path) -> None:
    compiler = shutil.which("g++")
    assert compiler is not None, "g++ is needed to build bench/*.cpp (apt-get install g++)"
    binary = tmp_path / source.stem
    built = _run([compiler, "-O2", "-std=c++17", "-o", str(binary), str(source)])
    assert built.returncode == 0, _failed(f"g++ {source.name}", built)
    done = _run([str(binary), "--smoke"])
    assert done.returncode == 0, _failed(f"{source.name} --smoke", done)
    assert "smoke:" in done.stdout
