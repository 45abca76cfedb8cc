"""What a new user met in a first session, each fixed: a model name one typo away from a
known one is refused with the name meant; a misspelt nested spec key gets "did you mean";
`top` says in one line that the daemon is not running; `sweepd stop` shuts the daemon down
cleanly over its socket."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sweepd.cli.main import main
from sweepd.cli.top_api import Api, ApiError
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.util.model_shapes import UnknownModel, resolve_model
from tests.daemon_proc import Daemon, write_config
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.simrun import write_scenario

XLA = {"kind": "xla-tuning", "model": "llama2-70b", "nodes": "chi[2832-2839]"}


@pytest.mark.parametrize("typo", ["lama2-70b", "llama2-7b", "llama3-70b", "llama2_70b"])
def test_a_model_name_one_typo_away_is_refused_with_the_name_meant(typo: str) -> None:
    with pytest.raises(UnknownModel, match=r"did you mean llama2-70b\?"):
        resolve_model(typo)


def test_a_shorthand_and_an_exact_name_are_still_taken() -> None:
    assert resolve_model("70b").name == "llama2-70b"   # submit.sh's unique substring
    assert resolve_model("llama2-70b").name == "llama2-70b"


def test_a_typo_in_a_spec_model_says_what_was_meant() -> None:
    with pytest.raises(SpecError, match=r"model: .*did you mean llama2-70b\?"):
        parse_spec({"kind": "model-perf", "model": "lama2-70b", "nodes": "chi2832"})


def test_a_misspelt_nested_key_gets_did_you_mean() -> None:
    with pytest.raises(SpecError) as e:
        parse_spec({**XLA, "profiles": [{"name": "p1", "setings": {"xla_x": "1"}}]})
    bad = [x for x in e.value.errors if x["loc"][:3] == ["profiles", 0, "setings"]]
    assert bad and "did you mean settings?" in bad[0]["msg"], e.value.errors


async def test_top_says_in_one_line_that_the_daemon_is_not_running(tmp_path: Path) -> None:
    stale = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:   # a socket file nobody listens on
        s.bind(str(stale))
    for path in (stale, tmp_path / "absent.sock"):
        api = Api(path)
        try:
            with pytest.raises(ApiError) as e:
                await api.sweeps()
        finally:
            await api.close()
        check_golden(GOLDEN / "new_user_fixes" / "daemon_not_running.txt",
                     scrubbed(f"{e.value}\n", socket=path))


def test_stop_shuts_the_daemon_down_cleanly_over_its_socket(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    try:
        daemon.start()
        assert main(["stop", "--socket", str(daemon.socket)]) == 0
        assert daemon.proc is not None and daemon.proc.wait(60) == 0
        out = capsys.readouterr().out
        assert out.strip() == f"sweepd stopped (was on {daemon.socket})"
        assert not daemon.socket.exists()
        assert '"daemon.stopped"' in daemon.log.read_text() or \
            "daemon.stopped" in daemon.log.read_text()
        # Nothing to stop: one line, exit 1.
        assert main(["stop", "--socket", str(daemon.socket)]) == 1
        assert "not running" in capsys.readouterr().err
    finally:
        daemon.kill()
