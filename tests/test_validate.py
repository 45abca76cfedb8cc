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
    assert out.startswith('spec OK: model-sweep sweep "model sweep main vs my-branch" on 8 '
                          "nodes") and "(cluster backend: sim, no config)" in out
    assert "first plan (20 job(s)):" in out and out.endswith("nothing was submitted\n")


def test_a_repo_that_does_not_exist_is_still_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_file(tmp_path, {"kind": "model-sweep", "nodes": NODES, "repo": "/nonexistent/r",
                                "matrix": {"llama2-70b": [1]}})
    assert main(["validate", spec]) == 2
    assert capsys.readouterr().err == "sweepd: repo /nonexistent/r does not exist\n"


def test_a_spec_key_typo_gets_did_you_mean(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_file(tmp_path, {"kind": "model-perf", "modle": "llama2-70b", "nodes": NODES})
    assert main(["validate", spec]) == 2
    err = capsys.readouterr().err
    assert "modle: unknown key (did you mean model?); valid keys: " in err
    assert "Field required" not in err   # one mistake, said once
    assert main(["submit", spec]) == 2   # the same answer before any daemon is asked
    assert "did you mean model?" in capsys.readouterr().err
    # A key of a nested section too (xla-tuning's thresholds).
    tuning = yaml.safe_load((EXAMPLES / "xla-tuning.yaml").read_text())
    tuning["thresholds"]["wn"] = tuning["thresholds"].pop("win")
    assert main(["validate", spec_file(tmp_path, tuning, "t.yaml")]) == 2
    assert "thresholds.wn: unknown key (did you mean win?)" in capsys.readouterr().err


def test_validate_names_what_leaves_the_job_name(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped xla-tuning example: the evidence run's profiler settings and the seed's
    heartbeat timeout on top of the sparse config tag make its name too long for submit.sh;
    validate says which overrides are carried outside it (longest first), and every name
    fits."""
    assert main(["validate", str(EXAMPLES / "xla-tuning.yaml")]) == 0
    out = capsys.readouterr().out
    assert "its job name leaves out (carried, over 243 bytes with them): " \
           "skip_first_n_steps_for_profiler=10" in out
    assert "jax_distributed_heartbeat_timeout_seconds=99999" in out
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
    assert len(err.splitlines()) == 1 and "submission would be refused" in err
    assert "what cannot be carried: _env_A_SETTING (126 bytes), _env_B_SETTING (126 bytes)" \
        in err and "(cut)" not in err


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
    assert "a resume would be refused the same way" in text and "Resume: /resume" not in text
    async with open_parts(config) as parts:
        with pytest.raises(SpecError, match="a resume would be refused the same way"):
            await resume(parts.engine, 1)
        assert (await parts.store.sweeps.get(1)).state == "awaiting_decision"
