"""`sweepd validate` without a daemon (issue 23 item 6): the daemon's checks on a throwaway
state directory, the job-name limit and what is carried outside it, spec typos, and the
refusals a person reads (issue 21 item 6: a spec whose names cannot fit stops once, and
`resume` says why it would not help)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from sweepd.app.daemon import open_parts
from sweepd.cli.main import main
from sweepd.cli.output import fail
from sweepd.clusters import train_env
from sweepd.core.control import resume
from sweepd.kinds.spec import SpecError
from sweepd.kinds.xla_tuning.runs.preflight import leftover
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import NODES, run, sim_config, write_scenario

EXAMPLES = Path(__file__).parent.parent / "examples"
FIXTURE_TRAIN_ENV = Path(__file__).parent / "fixtures" / "maxtext" / "train_env.sh"


@pytest.fixture(autouse=True)
def no_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No daemon anywhere: a socket path nobody listens on, no daemon config."""
    monkeypatch.setenv("SWEEPD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.delenv("SWEEPD_CONFIG", raising=False)
    monkeypatch.setattr("sweepd.config.SYSTEM_CONFIG", tmp_path / "absent.toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-personal-config"))


def spec_file(tmp_path: Path, data: dict[str, object], name: str = "spec.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_validate_checks_the_shipped_model_sweep_without_a_daemon(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(EXAMPLES / "model-sweep.yaml")])
    out, err = capsys.readouterr()
    assert code == 0, err
    # The whole plan: the sweep on 8 nodes, the sim backend with no config, the first plan's
    # 20 jobs, and that nothing was submitted.
    check_golden(GOLDEN / "cli" / "validate_model_sweep.txt", out)


def test_a_repo_that_does_not_exist_is_still_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_file(tmp_path, {"kind": "model-sweep", "nodes": NODES, "repo": "/nonexistent/r",
                                "matrix": {"llama2-70b": [1]}})
    assert main(["validate", spec]) == 2
    check_golden(GOLDEN / "cli" / "validate_no_such_repo.txt", capsys.readouterr().err)


def test_a_spec_key_typo_gets_did_you_mean(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_file(tmp_path, {"kind": "model-perf", "modle": "llama2-70b", "nodes": NODES})
    assert main(["validate", spec]) == 2
    err = capsys.readouterr().err
    said = {"modle (one mistake, said once)": err}
    assert main(["submit", spec]) == 2   # the same answer before any daemon is asked
    assert "did you mean model?" in capsys.readouterr().err
    # A key of a nested section too (xla-tuning's thresholds).
    tuning = yaml.safe_load((EXAMPLES / "xla-tuning.yaml").read_text())
    tuning["thresholds"]["wn"] = tuning["thresholds"].pop("win")
    assert main(["validate", spec_file(tmp_path, tuning, "t.yaml")]) == 2
    said["thresholds.wn"] = capsys.readouterr().err
    check_golden_cases(GOLDEN / "cli" / "validate_key_typos.txt", said)


def test_validate_names_what_leaves_the_job_name(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped xla-tuning example: the evidence run's profiler settings and the seed's
    heartbeat timeout on top of the sparse config tag make its name too long for submit.sh;
    validate says which overrides are carried outside it (longest first), and every name
    fits."""
    assert main(["validate", str(EXAMPLES / "xla-tuning.yaml")]) == 0
    out = capsys.readouterr().out
    # The evidence run's profiler setting and the heartbeat timeout, longest first.
    check_golden(GOLDEN / "cli" / "validate_job_name_leaves_out.txt",
                 "".join(f"{line}\n" for line in out.splitlines() if "leaves out" in line))
    assert main(["validate", "--json", str(EXAMPLES / "xla-tuning.yaml")]) == 0
    names = json.loads(capsys.readouterr().out)["job_names"]
    assert {n["label"] for n in names} == {"baseline", "baseline@dense", "evidence"}
    assert all(n["bytes"] <= 243 and len(n["name"].encode()) == n["bytes"] for n in names)
    assert [n["carried"] for n in names if n["label"] == "evidence"] == [
        ["skip_first_n_steps_for_profiler=10",
         "jax_distributed_heartbeat_timeout_seconds=99999"]]


def test_validate_refuses_what_cannot_be_carried(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    env = {"A_SETTING": "a" * 110, "B_SETTING": "b" * 110}
    spec = spec_file(tmp_path, {"kind": "model-perf", "model": "llama2-70b", "nodes": NODES,
                                "env": env})
    assert main(["validate", spec]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "(cut)" not in err
    check_golden(GOLDEN / "cli" / "validate_cannot_be_carried.txt", err)


def test_a_preflight_refusal_prints_lines_not_literal_newlines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The pre-flight's leftover-arms refusal is several lines: each printed as a line, none
    escaped to a literal `\\n`, none cut."""
    path = tmp_path / "train_env.sh"
    path.write_text(FIXTURE_TRAIN_ENV.read_text())
    for name in ("ovl2", "hpas", "ag768M"):
        train_env.apply(path, train_env.arm(name, [f"--xla_gpu_{name.lower()}=1"]))
    check = leftover(path)
    assert not check.ok and "\n" in check.text
    refusal = SpecError("pre-flight: " + check.text, [{"loc": [check.rule], "msg": check.text}])
    code = fail(argparse.Namespace(json=False), str(refusal), refusal.errors)
    err = capsys.readouterr().err
    assert code == 2
    assert "\\n" not in err and "(cut)" not in err
    lines = err.splitlines()
    assert lines[0] == "sweepd: pre-flight"
    for name in ("ovl2", "hpas", "ag768M"):
        assert sum(name in line for line in lines) == 1


async def test_a_spec_the_toolkit_cannot_take_stops_once_and_resume_says_why(
        tmp_path: Path) -> None:
    """A job name over the limit with nothing left to carry: the sweep stops at its first
    submission; the stop message offers no resume, and a resume is refused in one line."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    spec = {"kind": "model-perf", "model": "llama2-70b", "nodes": NODES,
            "env": {"A_SETTING": "a" * 110, "B_SETTING": "b" * 110}}
    code, lines = await run(config, spec)
    text = "\n".join(lines)
    assert code == 3
    assert "Resume: /resume" not in text
    [stop] = [line for line in lines if "STOP]" in line]
    check_golden(GOLDEN / "validate" / "spec_refused_stop.txt",
                 scrubbed(f"{stop}\n", tmp=tmp_path))
    async with open_parts(config) as parts:
        with pytest.raises(SpecError, match="a resume would be refused the same way"):
            await resume(parts.engine, 1)
        assert (await parts.store.sweeps.get(1)).state == "awaiting_decision"
