"""The built wheel carries the top-level migrations/: an installed sweepd (a fresh venv,
no source checkout on its path) still creates and migrates its store."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Run by the wheel-installed sweepd: where it was imported from, and the store's version.
CHECK = """
import asyncio, sys
import aiosqlite
import sweepd
from sweepd.store.migrate import current_version, latest_version, sql_dir
from sweepd.store.store import Store

async def main(db):
    await (await Store.open(db)).close()   # creates and migrates the store
    async with aiosqlite.connect(db) as conn:
        print(sweepd.__file__, sql_dir(), await current_version(conn), latest_version())

asyncio.run(main(sys.argv[1]))
"""


def _run(*cmd: str | Path) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.mark.timeout(600)
def test_an_installed_wheel_finds_its_migrations_and_migrates_a_store(tmp_path: Path) -> None:
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp_path / "dist",
         REPO)
    wheel = next((tmp_path / "dist").glob("sweepd-*.whl"))
    shipped = sorted(Path(n).name for n in zipfile.ZipFile(wheel).namelist()
                     if n.startswith("sweepd/migrations/"))
    assert shipped == sorted(p.name for p in (REPO / "migrations").glob("*.sql"))
    venv = tmp_path / "venv"
    # No pip of its own (ensurepip is most of a venv's making): this one's pip installs.
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
         "--no-index", wheel)
    # Its dependencies come from this interpreter's site-packages, appended after the fresh
    # venv's own (a path in a .pth file: that directory's own .pth files, such as an
    # editable install of this checkout, are not read).
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
                .strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    out = _run(python, "-I", "-c", CHECK, tmp_path / "sweepd.db").split()
    module, sql, version, latest = out
    assert module.startswith(str(site)) and sql.startswith(str(site)), out
    assert int(version) == int(latest) == len(shipped)
