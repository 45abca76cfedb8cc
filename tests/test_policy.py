"""The policy's rules as pure functions: each rule, its threshold, and its name."""

from __future__ import annotations

from sweepd.config import PolicyConfig
from sweepd.core.policy import Act, Case, SweepFacts, decide
from sweepd.monitor.facts import FailureClass as F
from sweepd.monitor.facts import Verdict
from tests.golden_files import GOLDEN, check_golden
from tests.support.policy import LIMITS, NODES, case


def test_success_is_accepted() -> None:
    assert decide(case(None)).act == Act.ACCEPT


def test_oom_is_never_retried() -> None:
    a = decide(case(F.OOM))
    assert (a.act, a.rule, a.outcome) == (Act.RECORD, "oom.never_retry", "oom")


def test_retries_are_capped_at_max_retries() -> None:
    failed = Verdict(F.COLLECTIVE_TIMEOUT)
    assert decide(case(F.COLLECTIVE_TIMEOUT, prior=(failed,))).act == Act.RETRY
    a = decide(case(F.COLLECTIVE_TIMEOUT, prior=(failed, failed)))
    assert (a.act, a.rule) == (Act.RECORD, "retries.max")
    assert decide(case(F.UNKNOWN, prior=(failed, failed))).act == Act.RECORD


def test_max_retries_is_a_setting() -> None:
    one = PolicyConfig(max_retries=0)
    assert decide(case(F.COLLECTIVE_TIMEOUT, limits=one)).act == Act.RECORD


def test_hardware_fault_excludes_the_node() -> None:
    a = decide(case(F.GPU_HARDWARE, node="n2"))
    assert (a.act, a.rule, a.exclude) == (Act.RETRY, "fault.exclude_node", "n2")


def test_third_exclusion_stops() -> None:
    a = decide(case(F.ECC, node="n3", excluded=("n1", "n2")))
    assert (a.act, a.rule) == (Act.STOP, "exclusions.max")


def test_a_persons_exclusions_do_not_count_toward_the_limit_but_leave_fewer_nodes() -> None:
    a = decide(case(F.ECC, node="n3", excluded=("n1",), by_person=("n2",)))
    assert (a.act, a.rule) == (Act.RETRY, "fault.exclude_node")
    assert "remaining 1 nodes" in a.reason   # n4: n1 and n2 are out of use either way
    a = decide(case(F.ECC, node="n3", by_person=("n1", "n2"), min_nodes=2))
    assert (a.act, a.rule) == (Act.STOP, "nodes.below_minimum")


def test_same_error_on_another_node_stops_as_config() -> None:
    a = decide(case(F.GPU_HARDWARE, node="n2", history=(Verdict(F.GPU_HARDWARE, node="n1"),)))
    assert (a.act, a.rule) == (Act.STOP, "fault.same_error_other_nodes")


def test_below_the_model_minimum_stops() -> None:
    a = decide(case(F.NODE_CRASH, node="n2", min_nodes=4))
    assert (a.act, a.rule) == (Act.STOP, "nodes.below_minimum")


def test_per_node_sweeps_record_the_fault_as_the_nodes_result() -> None:
    a = decide(case(F.GPU_HARDWARE, node="n2", exclude_on_fault=False))
    assert (a.act, a.rule, a.exclude) == (Act.RECORD, "fault.node_unhealthy", None)


def test_hang_is_retried_once() -> None:
    assert decide(case(F.HANG)).rule == "hang.retry_once"
    assert decide(case(F.RCCL_FLAKE)).rule == "hang.retry_once"
    a = decide(case(F.HANG, prior=(Verdict(F.RCCL_FLAKE),)))
    assert (a.act, a.outcome) == (Act.RECORD, "hang")


def test_coordination_timeouts_stop_on_the_second_in_a_row() -> None:
    assert decide(case(F.COORD_TIMEOUT)).act == Act.RETRY
    a = decide(case(F.COORD_TIMEOUT, history=(Verdict(F.COORD_TIMEOUT),)))
    assert (a.act, a.rule) == (Act.STOP, "coord.consecutive")
    broken = (Verdict(F.COORD_TIMEOUT), Verdict(F.OOM))
    assert decide(case(F.COORD_TIMEOUT, history=broken)).act == Act.RETRY


def test_config_and_unknown_flag_stop() -> None:
    assert decide(case(F.CONFIG)).act == Act.STOP
    assert decide(case(F.UNKNOWN_FLAG)).rule == "config.stop"


def test_checkout_outage_retries_hourly_without_a_cap() -> None:
    many = tuple(Verdict(F.CHECKOUT_OUTAGE) for _ in range(10))
    a = decide(case(F.CHECKOUT_OUTAGE, prior=many))
    assert (a.act, a.delay_s) == (Act.RETRY, 3600)


def test_external_cancel_is_run_again_not_recorded() -> None:
    # A cancel says nothing about the run's value: never the run's result.
    a = decide(case(F.CANCELLED))
    assert (a.act, a.rule, a.exclude) == (Act.RETRY, "cancelled.rerun", None)


def test_a_cancel_does_not_use_up_the_retries_of_a_fault() -> None:
    cancelled = Verdict(F.CANCELLED)
    a = decide(case(F.COLLECTIVE_TIMEOUT, prior=(cancelled, Verdict(F.COLLECTIVE_TIMEOUT))))
    assert (a.act, a.rule) == (Act.RETRY, "collective_timeout.retry")


def test_a_run_cancelled_twice_asks_the_person() -> None:
    a = decide(case(F.CANCELLED, prior=(Verdict(F.CANCELLED),)))
    assert (a.act, a.rule) == (Act.STOP, "cancelled.again")


def test_every_running_job_cancelled_asks_the_person() -> None:
    a = decide(Case(Verdict(F.CANCELLED), (), SweepFacts(NODES, (), 1, others_cancelled=True),
                    LIMITS))
    assert (a.act, a.rule) == (Act.STOP, "cancelled.whole_sweep")


def test_a_lost_log_is_run_again_within_the_cap() -> None:
    a = decide(case(F.LOG_LOST))
    assert (a.act, a.rule) == (Act.RETRY, "log.lost_rerun")


def test_same_error_on_a_node_the_person_excluded_is_not_a_config_issue() -> None:
    # n1 was judged faulty and excluded by the person: its error was n1's.
    history = (Verdict(F.GPU_HARDWARE, node="n1"),)
    a = decide(case(F.GPU_HARDWARE, node="n2", history=history, by_person=("n1",)))
    assert (a.act, a.rule, a.exclude) == (Act.RETRY, "fault.exclude_node", "n2")


def test_a_preempted_job_is_run_again_and_said_so() -> None:
    a = decide(Case(Verdict(F.CANCELLED, detail="preempted by the scheduler"), (),
                    SweepFacts(NODES, (), 1), LIMITS))
    assert (a.act, a.rule) == (Act.RETRY, "cancelled.rerun")
    assert a.reason.startswith("preempted by the scheduler")


def test_a_cluster_service_failure_past_its_retries_asks_instead_of_being_a_result() -> None:
    """Recorded, a pull or controller failure would read as the node's, link's or model's
    result (node perf, network and model sweep read every failed run so)."""
    failed = Verdict(F.PULL)
    for klass in (F.PULL, F.CONTROLLER_DOWN):
        for judged_one_by_one in (True, False):
            a = decide(case(klass, node="n2", exclude_on_fault=not judged_one_by_one))
            assert (a.act, a.rule, a.exclude) == (Act.RETRY, f"{klass}.retry", None)
            a = decide(case(klass, node="n2", prior=(failed, failed),
                            exclude_on_fault=not judged_one_by_one))
            assert (a.act, a.rule, a.exclude) == (Act.STOP, "service.retries_exhausted", None)
            assert "resume" in a.reason


def test_a_broken_environment_stops_at_once_in_every_kind_quoting_the_line() -> None:
    """Issue 47: never retried, never recorded as the value's result; even where a config
    error is one run's result (model sweep, xla tuning), since every value fails alike."""
    line = "ModuleNotFoundError: No module named 'jax'"
    for config_stops in (True, False):
        a = decide(Case(Verdict(F.ENVIRONMENT, evidence=line), (),
                        SweepFacts(NODES, (), 1, config_stops=config_stops), LIMITS))
        assert (a.act, a.rule) == (Act.STOP, "environment.stop")
        assert f'"{line}"' in a.reason


def test_a_config_stop_quotes_its_line_cut_to_size() -> None:
    refusal = "ValueError: 'no_such_key' not in " + ", ".join(f"'k{i}'" for i in range(900))
    a = decide(Case(Verdict(F.CONFIG, evidence=refusal), (), SweepFacts(NODES, (), 1),
                    LIMITS))
    assert a.rule == "config.stop"
    check_golden(GOLDEN / "policy" / "config_stop_cut.txt", f"{a.reason}\n")
    assert len(a.reason) < 400
