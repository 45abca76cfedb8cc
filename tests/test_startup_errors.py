"""Start-up refusals: a bad scenario and a second sweepd on one state directory get a
one-line error and an exit code, never a traceback or a hung process."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweepd.api.errors import AnotherSweepd
from sweepd.app.daemon import open_parts
from tests.daemon_proc import write_config
from tests.simrun import perf_spec, sim_config, write_scenario


def sweepd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("scenario", [
    'cluster: {nodes: "chi2832", bogus: 1}\n',     # an unknown key
    "cluster: [unclosed\n",                        # not YAML
])
def test_a_bad_scenario_is_one_line_and_exit_2(tmp_path: Path, scenario: str) -> None:
    (tmp_path / "s.yaml").write_text(scenario)
    (tmp_path / "spec.yaml").write_text("kind: model-perf\nmodel: llama2-70b\n"
                                        "nodes: chi2832\nvalues: [4]\n")
    done = sweepd("run", str(tmp_path / "spec.yaml"), "--scenario", str(tmp_path / "s.yaml"),
                  "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 2, done.stderr
    assert "s.yaml" in done.stderr and "Traceback" not in done.stderr


async def test_a_second_sweepd_on_one_state_dir_is_refused(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as first:
        sweep = await first.service.submit(perf_spec(values=[4]))
        with pytest.raises(AnotherSweepd, match="another sweepd uses"):
            async with open_parts(config):
                pass
        # The refused one touched nothing: the first still has its sweep.
        assert (await first.service.show(int(sweep["id"])))["state"] == "queued"
    async with open_parts(config) as again:       # released when the first one closed
        assert len(await again.service.list_sweeps()) == 1


def test_serve_listens_on_a_socket_given_before_the_verb(tmp_path: Path) -> None:
    config = write_config(tmp_path, write_scenario(tmp_path))   # its socket: sweepd.sock
    other = tmp_path / "other.sock"
    proc = subprocess.Popen([sys.executable, "-m", "sweepd", "--socket", str(other), "serve",
                             "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not other.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert other.exists() and not (tmp_path / "sweepd.sock").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
