"""`sweepd parse LOG`: what sweepd reads from one log, as text and JSON, with no daemon."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweepd.cli.main import main
from sweepd.cli.parse_log import MAX_LINE, lines
from tests.golden_files import GOLDEN, check_golden, scrubbed

FIXTURES = Path(__file__).parent / "fixtures"
SUCCESS = FIXTURES / "maxtext-tpu-success.log"
OOM = FIXTURES / "maxtext-tpu-oom.log"
Capture = pytest.CaptureFixture[str]


def _run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(["parse", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_success_log_as_text(capsys: Capture) -> None:
    code, out, err = _run(capsys, str(SUCCESS))
    assert (code, err) == (0, "")
    check_golden(GOLDEN / "cli" / "parse" / "success.txt", out)


def test_the_success_log_as_json(capsys: Capture) -> None:
    code, out, _ = _run(capsys, str(SUCCESS), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["tgs"] == pytest.approx(43083.6385)
    assert data["tgs_mean"] == pytest.approx(43103.1505)
    assert data["window"] == list(range(5, 15)) and data["window_fallback"] is False
    assert (data["steps"], data["memory_gb"], data["failure"]) == (14, 4.4, None)
    assert (data["memstats_used_gb"], data["memstats_total_gb"]) == (3.01, 15.75)
    assert (data["oom_required_gb"], data["oom_available_gb"], data["failure_line"]) == \
        (None, None, None)
    assert data["compiled"]["temp_gb"] == 1.4


def test_the_oom_log_as_text(capsys: Capture) -> None:
    code, out, _ = _run(capsys, str(OOM))
    assert code == 0
    # No step, no memory lines; the OOM's figures and the line that proves it.
    check_golden(GOLDEN / "cli" / "parse" / "oom.txt", out)


def test_the_oom_log_as_json(capsys: Capture) -> None:
    code, out, _ = _run(capsys, "--json", str(OOM))
    data = json.loads(out)
    assert code == 0
    assert (data["failure"], data["oom_required_gb"], data["oom_available_gb"]) == \
        ("oom", 26.06, 15.75)
    assert data["failure_line"].startswith("jax.errors.JaxRuntimeError: ")
    assert "RESOURCE_EXHAUSTED" in data["failure_line"]
    assert data["failure_line_number"] == 854
    assert (data["tgs"], data["steps"], data["memory_gb"], data["window"]) == \
        (None, None, None, [])


def test_json_given_before_the_verb(capsys: Capture) -> None:
    code = main(["--json", "parse", str(OOM)])
    assert code == 0 and json.loads(capsys.readouterr().out)["failure"] == "oom"


def test_a_missing_log_is_one_line_and_exit_2(tmp_path: Path, capsys: Capture) -> None:
    missing = tmp_path / "nope.log"
    code, out, err = _run(capsys, str(missing))
    assert (code, out) == (2, "")
    check_golden(GOLDEN / "cli" / "parse" / "missing.txt", scrubbed(err, tmp=tmp_path))
    code, out, err = _run(capsys, str(missing), "--json")
    assert code == 2 and json.loads(out)["exit"] == 2 and err == ""
    code, out, err = _run(capsys, str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "is a directory" in err


def test_an_unreadable_log_is_one_line_and_exit_2(tmp_path: Path, capsys: Capture) -> None:
    log = tmp_path / "locked.log"
    log.write_text("completed step: 5, seconds: 1, Tokens/s/device: 10, loss: 1\n")
    log.chmod(0)
    try:
        with log.open("rb"):
            denied = False   # root reads it anyway: then it is read like any log
    except PermissionError:
        denied = True
    code, _, err = _run(capsys, str(log))
    assert code == (2 if denied else 0)
    if denied:
        check_golden(GOLDEN / "parse_verb" / "unreadable_log.txt", scrubbed(err, tmp=tmp_path))
    else:
        assert err == ""


def test_the_flags_change_the_window_and_the_steps(tmp_path: Path, capsys: Capture) -> None:
    _, out, _ = _run(capsys, str(SUCCESS), "--json", "--profiler")
    assert json.loads(out)["window"] == list(range(9, 15))
    _, out, _ = _run(capsys, str(SUCCESS), "--json", "--steps", "30")
    data = json.loads(out)
    assert (data["expected_steps"], data["failure"]) == (30, "unknown")   # it stopped early
    code, _, err = _run(capsys, str(SUCCESS), "--steps", "0")
    assert code == 2 and "--steps" in err


def test_a_short_log_names_its_fallback_window(tmp_path: Path, capsys: Capture) -> None:
    short = tmp_path / "short.log"
    kept = [line for line in SUCCESS.read_text().splitlines()
            if not any(f"completed step: {n}," in line for n in range(5, 15))]
    short.write_text("\n".join(kept) + "\n")
    _, out, _ = _run(capsys, str(short), "--steps", "5")
    check_golden(GOLDEN / "cli" / "parse" / "short_log_steady.txt", out.splitlines()[1] + "\n")


def test_the_reader_keeps_a_last_line_without_newline_and_bounds_long_ones(
        tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\r\n" + b"b" * (3 * MAX_LINE) + b"\nlast, cut")
    with log.open("rb") as f:
        got = list(lines(f))
    assert got == ["a", "b" * MAX_LINE, "last, cut"]


def test_a_hostile_log_through_the_verb(tmp_path: Path, capsys: Capture) -> None:
    log = tmp_path / "hostile.log"
    step = ("\x1b[31m0: completed step: {n}, seconds: 1, TFLOP/s/device: 1, Tokens/s/device: "
            "{v}, total_weights: 1, loss: 1\x1b[0m")
    log.write_bytes("\n".join(step.format(n=n, v="9" * 400) for n in range(15)).encode()
                    + b"\n\xff\xfe\x00garbage\ncompleted step: 1")
    code, out, _ = _run(capsys, str(log), "--json")
    data = json.loads(out)
    assert code == 0 and data["tgs"] is None and data["steps"] == 14   # inf is no JSON number
    code, out, _ = _run(capsys, str(log))
    assert code == 0 and "steady TGS: inf" in out
