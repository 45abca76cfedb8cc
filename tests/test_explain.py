"""`sweepd explain`: every decision with the rule that fired and the log line that proved it."""

from __future__ import annotations

from pathlib import Path

from sweepd.cli.main import main
from sweepd.reports.report import explain_lines
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario
from tests.support.service import SPEC, Daemon


async def test_explain_names_rule_and_evidence(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "hsa_error", "node": "chi2880",
                                                 "times": 1}])
    config = sim_config(tmp_path, scenario)
    await run(config, perf_spec(values=[4, 64]))
    store = await open_store(config)
    try:
        lines = explain_lines(await store.events.of_sweep(1),
                              {r.id: r.seq for r in await store.runs.of_sweep(1)})
    finally:
        await store.close()
    text = "\n".join(lines)
    exclude = next(i for i, line in enumerate(lines) if "[fault.exclude_node]" in line)
    assert "HSA_STATUS_ERROR" in lines[exclude + 1] and "evidence:" in lines[exclude + 1]
    assert "[oom.never_retry]" in text and "RESOURCE_EXHAUSTED" in text
    assert "[success]" in text and "[model_perf.first_probe]" in text
    assert "run #2 " in text   # the run's number in its sweep, as `show` names it


async def test_explain_cli_on_unknown_id_is_a_clear_error(daemon: Daemon) -> None:
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    code, out, err = await daemon.run("explain", str(sweep_id))   # the daemon answers...
    assert code == 0 and out
    code, out, err = await daemon.run("explain", str(sweep_id + 6))   # ...and knows no 7
    assert (code, out, err) == (2, "", f"sweepd: sweep {sweep_id + 6} not found\n")


def test_explain_cli_without_a_daemon_says_it_is_not_running(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(["explain", "7", "--socket", str(tmp_path / "none.sock")])
    assert code == 1
    assert "not running" in capsys.readouterr().err
    code = main(["--socket", str(tmp_path / "none.sock"), "explain", "7"])   # before the verb
    assert code == 1
    assert f"{tmp_path / 'none.sock'}" in capsys.readouterr().err


async def test_a_retry_is_explained_once(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path, [{"kind": "rccl_flake", "times": 1}]))
    await run(config, perf_spec(values=[4]))
    store = await open_store(config)
    try:
        events = await store.events.of_sweep(1)
    finally:
        await store.close()
    retry = [e for e in events if e.rule == "hang.retry_once"]
    assert len(retry) == 2   # the job's transition and the decision: both recorded
    lines = explain_lines(events, {})
    assert sum("[hang.retry_once]" in line for line in lines) == 1   # shown once


NODE_EVIDENCE = ("chi2863:\n  scontrol show node: NodeName=chi2863 State=IDLE\n"
                 "  dmesg: 1 recent line(s) matching oom|kill|fault:\n"
                 "    amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!")
FAULT_LINE = "1: HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception"


def test_a_nodes_evidence_is_shown_once() -> None:
    """A node fault records the node's evidence on its note, the job's transition and the
    exclusion's decision (as the engine writes them): explain shows it once, then says
    where it was shown."""
    from sweepd.store.rows import Event

    def event(i: int, kind: str, rule: str, reason: str, evidence: str,
              to: str | None = None) -> Event:
        return Event(id=i, sweep_id=1, run_id=None, job_id=1, at=f"2026-12-06T02:41:2{i}Z",
                     kind=kind, from_state="running" if to else None, to_state=to, rule=rule,
                     reason=reason, evidence=evidence)

    both = f"{FAULT_LINE}\n{NODE_EVIDENCE}"
    lines = explain_lines([
        event(1, "note", "node.evidence", "evidence from chi2863", NODE_EVIDENCE),
        event(2, "transition", "fault.exclude_node", "gpu_hardware on chi2863", both,
              to="retried"),
        event(3, "decision", "fault.exclude_node", "exclude chi2863: gpu_hardware", both)],
        {})
    text = "\n".join(lines)
    assert text.count("GPU reset begin") == 1, text
    assert text.count("scontrol show node") == 1, text
    assert text.count(FAULT_LINE) == 1, text
    # Each repeat is said as "as above" with the event it repeats (the fixed times above).
    check_golden(GOLDEN / "explain" / "evidence_said_once.txt", text + "\n")
    assert sum("[fault.exclude_node]" in line for line in lines) == 2   # both events named
