"""The NIC reset after a NIC fault (issue 23, the seed's recovery primitives): only where
the config allows it, only between jobs, and the node is used again only once ibstat says
every port is Active; otherwise it stays excluded with that ibstat output as evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.config import Config, load_config
from sweepd.core.node_evidence import NIC_SKIPPED_RULE, reset_nic
from sweepd.core.states import JobState
from sweepd.store.rows import Event, Job
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario

NIC_FAULT = [{"kind": "nic", "node": "chi2863", "times": 1}]


async def _sweep(tmp_path: Path, nic_reset: bool, probes: dict[str, Any] | None = None
                 ) -> tuple[Store, int, list[Job], list[Event]]:
    scenario = write_scenario(tmp_path, faults=NIC_FAULT, probes=probes or {})
    config = sim_config(tmp_path, scenario)
    config = config.model_copy(update={"recovery": config.recovery.model_copy(
        update={"nic_reset": nic_reset})})
    code, lines = await run(config, perf_spec(values=[8]))
    store = await open_store(config)
    sweep = (await store.sweeps.all())[0]
    assert code == EXIT_VERDICT, (sweep.state, sweep.reason, lines)
    jobs, events = await store.jobs.of_sweep(sweep.id), await store.events.of_sweep(sweep.id)
    return store, sweep.id, jobs, events


def _reset_mark(tmp_path: Path) -> Path:
    """Where the fake ssh notes that a node's NIC stack was reset (the sim's state dir)."""
    return tmp_path / "state" / "sim" / "nic-reset-chi2863"


async def test_no_nic_reset_unless_the_config_allows_it(tmp_path: Path) -> None:
    store, _, jobs, events = await _sweep(tmp_path, nic_reset=False)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert not [e for e in events if e.rule and e.rule.startswith("nic.reset")]
        assert "nic.retry" in [e.rule for e in events]
        assert not _reset_mark(tmp_path).exists()   # the node's NIC was never touched
    finally:
        await store.close()


async def test_a_nic_reset_that_comes_back_active_reuses_the_node(tmp_path: Path) -> None:
    store, sid, jobs, events = await _sweep(tmp_path, nic_reset=True)
    try:
        reset = next(e for e in events if e.rule == "nic.reset_active")
        check_golden(GOLDEN / "nic_reset" / "active_again_reason.txt", reset.reason + "\n")
        assert reset.evidence and "ibstat: 8/8 ports Active" in reset.evidence
        assert "rmmod ionic_rdma; rmmod ionic" in reset.evidence   # the seed's command ran
        assert _reset_mark(tmp_path).exists()
        # Between jobs: after the failed job ended, before the next one was submitted.
        assert reset.job_id == jobs[0].id
        submitted = next(e for e in events if e.job_id == jobs[1].id)
        assert reset.id < submitted.id
        assert "chi2863" in expand_nodes(jobs[1].nodes)   # used again: it is Active
        assert await store.exclusions.of_sweep(sid) == []
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
    finally:
        await store.close()


async def test_a_nic_that_stays_down_keeps_the_node_excluded(tmp_path: Path) -> None:
    store, sid, jobs, events = await _sweep(
        tmp_path, nic_reset=True, probes={"chi2863": {"nic_recovers": False}})
    try:
        reset = next(e for e in events if e.rule == "nic.reset_not_active")
        [excluded] = await store.exclusions.of_sweep(sid)
        assert excluded.node == "chi2863"
        exclusion = next(e for e in events if e.reason.startswith("exclude chi2863"))
        # The exclusion carries the ibstat output that kept the node out.
        assert exclusion.evidence and "7/8 ports Active" in exclusion.evidence
        # The reset's reason, the exclusion's, and the ibstat output it carries (its
        # ionic_3 port Down).
        check_golden_cases(GOLDEN / "nic_reset" / "stays_down.txt", {
            "reset reason": reset.reason, "exclusion reason": exclusion.reason,
            "exclusion evidence": scrubbed(exclusion.evidence, tmp=tmp_path)})
        assert "chi2863" not in expand_nodes(jobs[1].nodes)
    finally:
        await store.close()


@dataclass
class _BusyBackend:
    """A node with a job on it (sinfo `alloc`); a NIC reset must not touch it."""

    state: str
    shell: list[str]

    async def node_states(self, nodes: list[str]) -> dict[str, str]:
        return {n: self.state for n in nodes}

    def node_shell(self) -> list[str]:
        return self.shell


@dataclass
class _Engine:
    store: Store
    backend: _BusyBackend
    config: Config = field(default_factory=lambda: load_config(None, {"recovery.nic_reset": True}))


async def test_no_nic_reset_while_a_job_runs_on_the_node(tmp_path: Path) -> None:
    touched = tmp_path / "touched"
    # An ssh that leaves a mark if it is ever run.
    shell = ["sh", "-c", f"echo \"$1\" >> {touched}", "fake-ssh", "{node}"]
    store = await Store.open(tmp_path / "s.db")
    try:
        sid = await store.sweeps.create("model-perf", "t", {"nodes": "chi2863"})
        for state, expect in (("alloc", None), ("mix", None), ("comp", None)):
            got = await reset_nic(_Engine(store, _BusyBackend(state, shell)),  # type: ignore[arg-type]
                                  sid, "chi2863", None)
            assert got is expect
        assert not touched.exists()
        skipped = [e for e in await store.events.of_sweep(sid) if e.rule == NIC_SKIPPED_RULE]
        assert [e.evidence for e in skipped] == ["sinfo: chi2863 alloc", "sinfo: chi2863 mix",
                                                 "sinfo: chi2863 comp"]
        # Idle: the reset runs (and the fake ssh's empty ibstat is no Active port).
        assert await reset_nic(_Engine(store, _BusyBackend("idle", shell)),  # type: ignore[arg-type]
                               sid, "chi2863", None) is False
        assert touched.read_text().splitlines() == ["chi2863", "chi2863"]
        # Concluding the same job again (a restart): the stored outcome, no second reset.
        assert await reset_nic(_Engine(store, _BusyBackend("idle", shell)),  # type: ignore[arg-type]
                               sid, "chi2863", None) is False
        assert touched.read_text().splitlines() == ["chi2863", "chi2863"]
    finally:
        await store.close()


def test_the_policy_after_a_nic_reset() -> None:
    from sweepd.core.policy import Act, Case, SweepFacts, decide
    from sweepd.monitor.facts import FailureClass, Verdict

    nodes = ["n1", "n2", "n3", "n4"]
    nic = Verdict(FailureClass.NIC, node="n2", evidence="ionic_comp_msn cqe with error")
    limits = load_config(None).policy

    def act(reset: bool | None, frozen: bool = False) -> tuple[Act, str, str | None]:
        a = decide(Case(nic, [], SweepFacts(nodes, [], 2, frozen_nodes=frozen), limits,
                        nic_reset=reset))
        return a.act, a.rule, a.exclude

    assert act(None) == (Act.RETRY, "nic.retry", None)              # no reset: as before
    assert act(True) == (Act.RETRY, "nic.reset_active", None)       # Active: same nodes
    assert act(False) == (Act.RETRY, "fault.exclude_node", "n2")    # not Active: out
    # A frozen nodelist (xla-tuning) never drops a node: a NIC that stays down stops it.
    assert act(False, frozen=True)[:2] == (Act.STOP, "fault.frozen_nodelist")
    assert act(True, frozen=True) == (Act.RETRY, "nic.reset_active", None)
