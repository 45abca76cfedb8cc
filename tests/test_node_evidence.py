"""The recovery primitives on a node fault (issue 23): the node's scontrol record, recent
dmesg and rocm-smi gathered over the (fake) ssh, stored before the decision and shown in
the exclusion's evidence and the stop message; each call bounded, a failure recorded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.clusters.node_probe import ib_active, recent_dmesg, rocm_summary, run_on
from sweepd.config import ConfigError, load_config
from sweepd.core.node_evidence import EVIDENCE_RULE
from sweepd.core.states import SweepState
from sweepd.store.rows import Event
from sweepd.store.store import Store
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario

DMESG = """\
[Tue Dec  1 03:12:40 2026] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode
[Tue Dec  1 03:12:41 2026] amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!
[Tue Dec  1 03:12:42 2026] systemd[1]: Started Session 12 of user slurm.
[Tue Dec  1 03:12:43 2026] Out of memory: Killed process 4821 (python3)
[Tue Dec  1 03:12:44 2026] ionic 0000:2a:00.0 ionic_3: ionic_comp_msn cqe with error
"""

ROCM = """\
GPU[0]\t\t: Temperature (Sensor edge) (C): 38.0
GPU[0]\t\t: Temperature (Sensor junction) (C): 45.0
GPU[1]\t\t: Temperature (Sensor edge) (C): 40.0
GPU[1]\t\t: Temperature (Sensor junction) (C): 96.0
================= XGMI Error count =================
GPU[0]\t\t: XGMI Error count: 0
GPU[1]\t\t: XGMI Error count: 14
GPU[2]\t\t: XGMI Error count: 0
"""


def test_dmesg_keeps_only_the_seeds_pattern() -> None:
    found = recent_dmesg(DMESG)
    # oom/kill/fault/reset/amdgpu/hsa/ionic: the mount and the session lines are noise.
    assert [line.split("] ", 1)[1][:20] for line in found] == [
        "amdgpu 0000:c1:00.0:", "Out of memory: Kille", "ionic 0000:2a:00.0 i"]


def test_rocm_smi_summary_names_the_hottest_gpu_and_xgmi_errors() -> None:
    # GPU[0]'s zero XGMI count is not an error; nothing read is said as such.
    check_golden_cases(GOLDEN / "node_evidence" / "rocm_summary.txt", {
        "two GPUs": "\n".join(rocm_summary(ROCM)),
        "nothing here": "\n".join(rocm_summary("nothing here"))})


def test_ibstat_active_only_when_every_port_is() -> None:
    up = "CA 'ionic_0'\n\tPort 1:\n\t\tState: Active\nCA 'ionic_1'\n\tPort 1:\n\t\tState: Active\n"
    assert ib_active(up) == (True, "2/2 ports Active")
    assert ib_active(up.replace("Active\nCA", "Down\nCA", 1)) == (False, "1/2 ports Active")
    assert ib_active("") == (False, "0/0 ports Active")   # no port seen is not "all Active"


async def test_a_hung_ssh_is_killed_at_its_time_limit() -> None:
    # A node that never answers: the call comes back (not ok, saying why), no exception.
    probe = await run_on(["sh", "-c", "sleep 30", "fake-ssh", "{node}"], "chi2870", "dmesg", 0.3)
    missing = await run_on(["/nonexistent/ssh", "{node}"], "chi2870", "dmesg", 5)
    assert not probe.ok and not missing.ok
    check_golden_cases(GOLDEN / "node_evidence" / "ssh_failures.txt",
                       {"hung": probe.out, "missing": missing.out})


def test_an_ssh_command_that_does_not_name_the_node_is_refused() -> None:
    try:
        load_config(None, {"recovery.ssh": ["ssh", "-o", "BatchMode=yes"]})
    except ConfigError as e:
        check_golden(GOLDEN / "node_evidence" / "ssh_without_node.txt", f"{e}\n")
    else:
        raise AssertionError("an ssh without {node} was accepted")
    assert load_config(None).recovery.nic_reset is False   # the NIC reset is opt-in


def _steady(text: str) -> str:
    """`text` with the node's scheduler state put as <state>: idle or allocated depends on
    whether the failed job's end was seen first, which the evidence does not decide."""
    return re.sub(r"State=\w+", "State=<state>", text)


async def _sweep(tmp_path: Path, faults: list[dict[str, Any]], expect: int,
                 probes: dict[str, Any] | None = None, recovery: dict[str, Any] | None = None,
                 **policy: Any) -> tuple[Store, int, list[Event]]:
    scenario = write_scenario(tmp_path, faults=faults, probes=probes or {})
    config = sim_config(tmp_path, scenario, **policy)
    if recovery:
        config = config.model_copy(update={"recovery": config.recovery.model_copy(
            update=recovery)})
    code, lines = await run(config, perf_spec(values=[8]))
    store = await open_store(config)
    sweep = (await store.sweeps.all())[0]
    assert code == expect, (sweep.state, sweep.reason, lines)
    return store, sweep.id, await store.events.of_sweep(sweep.id)


async def test_a_gpu_fault_stores_the_nodes_evidence_before_excluding_it(tmp_path: Path) -> None:
    store, _, events = await _sweep(
        tmp_path, [{"kind": "hsa_error", "node": "chi2870", "times": 1}], EXIT_VERDICT)
    try:
        gathered = [e for e in events if e.rule == EVIDENCE_RULE]
        assert [e.reason for e in gathered] == ["evidence from chi2870"]
        text = gathered[0].evidence or ""
        # scontrol's record, the fake node's dmesg picked by the seed's pattern (no EXT4-fs
        # noise), rocm-smi's hottest GPU: the whole evidence.
        check_golden(GOLDEN / "node_evidence" / "gpu_fault.txt", _steady(text + "\n"))
        exclusion = next(e for e in events if e.rule == "fault.exclude_node"
                         and e.reason.startswith("exclude chi2870"))
        assert gathered[0].id < exclusion.id          # stored before it was acted on
        assert exclusion.evidence and "HSA_STATUS_ERROR" in exclusion.evidence
        assert "amdgpu: GPU reset begin!" in exclusion.evidence
    finally:
        await store.close()


async def test_the_stop_message_carries_the_nodes_evidence(tmp_path: Path) -> None:
    store, _, events = await _sweep(
        tmp_path, [{"kind": "ecc", "node": "chi2870"}], EXIT_AWAITING_DECISION,
        max_exclusions=0)
    try:
        stop = next(e for e in events if e.to_state == SweepState.AWAITING_DECISION)
        message = next(e.reason for e in events if e.kind == "progress"
                       and e.reason.startswith("[model-perf STOP]"))
        assert stop.rule == "exclusions.max"
        # The node's evidence (scontrol, the UMC error in dmesg, the XGMI count) in the
        # message, whole.
        check_golden(GOLDEN / "node_evidence" / "ecc_stop_message.txt",
                     _steady(scrubbed(message + "\n", tmp=tmp_path)))
    finally:
        await store.close()


async def test_an_unreachable_node_is_said_and_the_sweep_goes_on(tmp_path: Path) -> None:
    store, _, events = await _sweep(
        tmp_path, [{"kind": "hsa_error", "node": "chi2870", "times": 1}], EXIT_VERDICT,
        probes={"chi2870": {"unreachable": True}})
    try:
        text = next(e.evidence for e in events if e.rule == EVIDENCE_RULE) or ""
        # ssh's failure said for dmesg and rocm-smi; the scheduler still answers (scontrol).
        check_golden(GOLDEN / "node_evidence" / "unreachable.txt", _steady(text + "\n"))
    finally:
        await store.close()


async def test_a_hung_node_costs_the_sweep_only_the_time_limit(tmp_path: Path) -> None:
    store, _, events = await _sweep(
        tmp_path, [{"kind": "hsa_error", "node": "chi2870", "times": 1}], EXIT_VERDICT,
        recovery={"ssh": ["sh", "-c", "sleep 30", "fake-ssh", "{node}"], "timeout_s": 0.5})
    try:
        text = next(e.evidence for e in events if e.rule == EVIDENCE_RULE) or ""
        check_golden(GOLDEN / "node_evidence" / "hung.txt", _steady(text + "\n"))
    finally:
        await store.close()


async def test_evidence_can_be_turned_off(tmp_path: Path) -> None:
    store, _, events = await _sweep(
        tmp_path, [{"kind": "hsa_error", "node": "chi2870", "times": 1}], EXIT_VERDICT,
        recovery={"evidence": False})
    try:
        assert not [e for e in events if e.rule == EVIDENCE_RULE]
    finally:
        await store.close()


async def test_explain_shows_the_nodes_evidence(tmp_path: Path) -> None:
    from sweepd.reports.report import explain_lines

    store, _, events = await _sweep(
        tmp_path, [{"kind": "hsa_error", "node": "chi2870", "times": 1}], EXIT_VERDICT)
    try:
        lines = explain_lines(events, {})
        at = next(i for i, line in enumerate(lines) if "[node.evidence] evidence from chi2870"
                  in line)
        # The lines after the headline, not only its first ("chi2870:").
        shown = "\n".join(lines[at + 1:at + 8])
        assert "evidence: chi2870:" in shown and "amdgpu: GPU reset begin!" in shown
        assert "hottest GPU[3] 97 (junction)" in shown
    finally:
        await store.close()
