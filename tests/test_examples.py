"""The example specs a new user copies from must be accepted as they are, validate without
a daemon, and run to a verdict on the simulated cluster (issue 23 item 6, issue 21 item 6:
the shipped xla-tuning example was refused at its first submission, its job name 263
bytes; the model-sweep example named a repo that does not exist on a fresh clone)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sweepd.app import foreground
from sweepd.cli.main import main
from sweepd.config import load_config
from sweepd.kinds.campaign.demo import SCENARIO as CAMPAIGN_SCENARIO
from sweepd.kinds.parse import load_spec_file
from sweepd.kinds.registry import kinds
from sweepd.kinds.xla_tuning.sim.tuning import TPU_SCENARIO, TUNING_SCENARIO
from sweepd.sim.scenario import DEFAULT_SCENARIO
from tests.simrun import run

EXAMPLES = Path(__file__).parent.parent / "examples"
# A kind's example is examples/<kind>.yaml; more of one kind go in examples/<kind>/.
# examples/scenarios/ holds simulated clusters (docs/scenario.md), not specs.
SCENARIOS = EXAMPLES / "scenarios"
ALL = sorted(p for p in EXAMPLES.rglob("*.yaml") if SCENARIOS not in p.parents)
# An example that replays a recorded cluster runs on it, not on its kind's default.
RUNS_ON = {"model-perf/tpu-v5e-replay.yaml": SCENARIOS / "tpu-v5e-maxtext-0.27b.yaml"}


def kind_of(path: Path) -> str:
    return path.stem if path.parent == EXAMPLES else path.parent.name
# Cluster seconds -> wall seconds: a 15-minute job in about a tenth of a second.
TIME_SCALE = 0.0001


def test_there_is_an_example_of_every_kind() -> None:
    assert {p.stem for p in ALL if p.parent == EXAMPLES} == set(kinds())
    assert {kind_of(p) for p in ALL} == set(kinds())


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_an_example_is_a_valid_spec_of_its_kind(path: Path) -> None:
    assert load_spec_file(path).kind == kind_of(path)


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_an_example_validates_without_a_daemon(path: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SWEEPD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.delenv("SWEEPD_CONFIG", raising=False)
    if (own := RUNS_ON.get(str(path.relative_to(EXAMPLES)))) is not None:
        config = tmp_path / "sweepd.toml"    # its nodes are its scenario's
        config.write_text(f'[cluster.sim]\nscenario = "{own}"\n')
        monkeypatch.setenv("SWEEPD_CONFIG", str(config))
    monkeypatch.setattr("sweepd.config.SYSTEM_CONFIG", tmp_path / "absent.toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-personal-config"))
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"spec OK: {kind_of(path)} sweep") and "nothing was submitted" in out


def fast_scenario(tmp_path: Path, kind: str, example: Path | None = None,
                  platform: str = "gpu") -> Path:
    """The scenario the kind's example is run on (the tuning one for xla-tuning, the demo's
    for a campaign: the flags stage needs its landscapes; a replay's own, RUNS_ON), its
    clock faster and its seeded faults off: the test is that the example as shipped
    reaches a verdict, not how a fault is handled (each kind's own tests do that)."""
    own = RUNS_ON.get(str(example.relative_to(EXAMPLES))) if example is not None else None
    scenario = own or {"xla-tuning": TUNING_SCENARIO, "campaign": CAMPAIGN_SCENARIO}.get(
        kind, DEFAULT_SCENARIO)
    if platform == "tpu":   # a one-chip TPU cell (`platform: tpu`)
        scenario = TPU_SCENARIO
    raw = yaml.safe_load(scenario.read_text())
    raw["cluster"]["time_scale"] = TIME_SCALE
    raw["faults"] = []
    if kind == "campaign":   # its slow node is the demo's fault: the example has no spare
        raw["nodes"] = {}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(EXAMPLES)))
async def test_an_example_runs_to_a_verdict_on_the_simulated_cluster(path: Path,
                                                                     tmp_path: Path) -> None:
    # A campaign as shipped, its 12 h budget too: it is counted on the simulated cluster's
    # own clock (the jobs' `Cluster time:` spans), which the machine's load does not move.
    spec = load_spec_file(path)
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "daemon.tick_s": 0.1,
                                "cluster.sim": {"scenario": str(fast_scenario(
                                    tmp_path, spec.kind, path,
                                    getattr(spec, "platform", "gpu")))}})
    code, lines = await run(config, spec.model_dump(mode="json", exclude_unset=True))
    text = "\n".join(lines)
    assert code == foreground.EXIT_VERDICT, text[-2000:]
    state = next(line for line in text.splitlines() if line.startswith("- State: "))
    assert state.startswith("- State: done — ")
    assert "budget spent" not in state, state   # a campaign ran every stage it names
    assert "submission refused" not in text
