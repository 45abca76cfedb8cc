"""classify: success rules, cascades, node attribution, hang phases (facts §3, batch-sweep)."""

from __future__ import annotations

from sweepd.monitor.classify import JobFacts, classify, node_map_from_nodelist
from sweepd.monitor.facts import (
    FailureClass,
    NodeExitFact,
    Phase,
    SignalFact,
    SummaryFact,
)
from sweepd.monitor.parse import parse_line
from tests.golden_files import GOLDEN, check_golden

NODES = node_map_from_nodelist("chi[2832,2863,2867-2868]")


def signals(*lines: str) -> list[tuple[int, SignalFact]]:
    """Parse lines as a log would hold them; offsets grow with position."""
    out = []
    offset = 0
    for line in lines:
        fact = parse_line(line)
        assert isinstance(fact, SignalFact), line
        out.append((offset, fact))
        offset += len(line.encode()) + 1
    return out


def test_node_map_from_nodelist() -> None:
    assert NODES == {0: "chi2832", 1: "chi2863", 2: "chi2867", 3: "chi2868"}
    assert node_map_from_nodelist('"chi[1-2]"') == {0: "chi1", 1: "chi2"}
    assert node_map_from_nodelist("chi[2-") == {}


def test_success_summary() -> None:
    v = classify(JobFacts(summary=SummaryFact("SUCCESS", 0, ""), phase=Phase.SUMMARY,
                          last_step=14, scheduler_state="COMPLETED", exit_code=0))
    assert v.klass is None
    assert v.evidence == "Status: SUCCESS (exit 0)"


def test_cleanup_143_after_last_step_is_success() -> None:
    facts = JobFacts(
        summary=SummaryFact("FAILED", 143, ""), phase=Phase.SUMMARY, last_step=14,
        expected_steps=15, node_exits=[NodeExitFact("chi2832", 143)], node_map=NODES,
        scheduler_state="FAILED", exit_code=143,
    )
    assert classify(facts).klass is None


def test_143_before_last_step_is_not_success() -> None:
    facts = JobFacts(summary=SummaryFact("FAILED", 143, ""), phase=Phase.TRAINING,
                     last_step=13, expected_steps=15, exit_code=143)
    assert classify(facts).klass is FailureClass.CANCELLED


def test_our_cancel_after_last_step_is_success() -> None:
    facts = JobFacts(phase=Phase.TRAINING, last_step=14, cancelled_by_us=True,
                     scheduler_state="CANCELLED")
    assert classify(facts).klass is None


def test_oom_cascade_earliest_root_cause_wins() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.TRAINING, last_step=3, scheduler_state="FAILED", exit_code=1,
        signals=signals(
            "0: Traceback (most recent call last):",
            "2: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12.5 GiB.",
            "0: chi2832:1:1 [0] NCCL WARN Timeout waiting for proxy",
            "1: NCCL error: ncclSystemError: System call failed",
            "0: The following tasks are unhealthy (stopped sending heartbeats): task:2",
        ),
    )
    v = classify(facts)
    assert v.klass is FailureClass.OOM
    assert v.node == "chi2867"
    assert v.detail == "12.5 GiB"
    # The evidence is the OOM line itself (rank 2's), not a later cascade line.
    (_, oom), = [(o, sig) for o, sig in facts.signals if sig.klass is FailureClass.OOM]
    assert v.evidence == oom.text and oom.rank == 2


def test_coord_timeout_after_hsa_error_is_gpu_hardware() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.TRAINING, scheduler_state="FAILED",
        signals=signals(
            "0: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: x",
            "3: HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: code 0x29",
            "1: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: y",
        ),
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.GPU_HARDWARE, "chi2868")


def test_timeouts_alone_earliest_wins_and_heartbeat_is_ranked_last() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.TRAINING, scheduler_state="FAILED",
        signals=signals(
            "1: The following tasks are unhealthy (stopped sending heartbeats): task:2",
            "2: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: y",
        ),
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.COORD_TIMEOUT, "chi2867")


def test_heartbeat_only_is_the_hang_of_its_phase() -> None:
    line = "0: The following tasks are unhealthy (stopped sending heartbeats): task:2"
    for phase, klass in [(Phase.PREFLIGHT, FailureClass.RCCL_FLAKE),
                         (Phase.COMPILE, FailureClass.OOM),
                         (Phase.TRAINING, FailureClass.HANG)]:
        v = classify(JobFacts(node_map=NODES, phase=phase, signals=signals(line)))
        assert v.klass is klass
        assert v.evidence == line


def test_hang_phases() -> None:
    expected = {
        Phase.PREFLIGHT: FailureClass.RCCL_FLAKE,
        Phase.COMPILE: FailureClass.OOM,
        Phase.TRAINING: FailureClass.HANG,
    }
    for phase, klass in expected.items():
        v = classify(JobFacts(node_map=NODES, phase=phase, hung=True, cancelled_by_us=True,
                              scheduler_state="CANCELLED"))
        assert v.klass is klass, phase
    v = classify(JobFacts(phase=Phase.COMPILE, hung=True))
    assert v.detail is not None and "silent OOM during XLA compile" in v.detail


def test_root_cause_beats_hang() -> None:
    facts = JobFacts(node_map=NODES, phase=Phase.TRAINING, hung=True,
                     signals=signals("1: ionic_comp_msn: cqe with error 0x5"))
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.NIC, "chi2863")


def test_node_exit_137_is_host_oom() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.TRAINING, scheduler_state="FAILED", exit_code=137,
        node_exits=[NodeExitFact("chi2863", 137), NodeExitFact("chi2832", 143)],
        signals=signals("0: chi2832:1:1 [0] NCCL WARN Timeout waiting for proxy"),
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.HOST_OOM, "chi2863")
    # The evidence is the deciding NODE_EXIT line, in the toolkit's shape.
    assert v.evidence is not None and parse_line(v.evidence) == NodeExitFact("chi2863", 137)


def test_killed_line_is_host_oom_on_its_node() -> None:
    facts = JobFacts(node_map=NODES, phase=Phase.TRAINING,
                     signals=signals("3: /run.sh: line 4:  881 Killed   python3 train.py"))
    assert (classify(facts).klass, classify(facts).node) == (FailureClass.HOST_OOM, "chi2868")


def test_single_node_exit_1_is_node_crash() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.TRAINING, scheduler_state="FAILED", exit_code=1,
        node_exits=[NodeExitFact("chi2867", 1)],
        signals=signals("0: NCCL error: ncclSystemError: System call failed"),
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.NODE_CRASH, "chi2867")


def test_all_nodes_same_exit_is_config() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.PREFLIGHT, scheduler_state="FAILED", exit_code=1,
        node_exits=[NodeExitFact(h, 1) for h in NODES.values()],
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.CONFIG, None)


def test_timeouts_on_every_node_with_all_exits_1_stay_timeouts() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.PREFLIGHT, scheduler_state="FAILED", exit_code=1,
        node_exits=[NodeExitFact(h, 1) for h in NODES.values()],
        signals=signals(*[f"{r}: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: k"
                          for r in (1, 2, 3)]),
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.COORD_TIMEOUT, "chi2863")


def test_unknown_model_on_every_rank_is_config_without_node() -> None:
    lines = [f"{r}: !!! Unknown model: llama9" for r in NODES]
    v = classify(JobFacts(node_map=NODES, phase=Phase.PREFLIGHT, signals=signals(*lines)))
    assert (v.klass, v.node, v.detail) == (FailureClass.CONFIG, None, "llama9")


def test_traceback_on_every_rank_is_config_but_on_one_rank_is_python() -> None:
    every = [f"{r}: Traceback (most recent call last):" for r in NODES]
    v = classify(JobFacts(node_map=NODES, phase=Phase.COMPILE, signals=signals(*every)))
    assert (v.klass, v.node) == (FailureClass.CONFIG, None)
    v = classify(JobFacts(node_map=NODES, phase=Phase.COMPILE, signals=signals(every[1])))
    assert (v.klass, v.node) == (FailureClass.PYTHON, "chi2863")


def test_unknown_flag_names_the_flag_and_no_node() -> None:
    line = "1: F0412 parse_flags_from_env.cc:226] Unknown flags in XLA_FLAGS: --xla_foo=1"
    v = classify(JobFacts(node_map=NODES, phase=Phase.COMPILE, signals=signals(line)))
    assert (v.klass, v.node, v.detail, v.evidence) == (
        FailureClass.UNKNOWN_FLAG, None, "--xla_foo", line)


def test_unprefixed_evidence_falls_back_to_the_failing_node_exit() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.PREFLIGHT,
        signals=signals("== ECC check FAILED (exit=1, 12s) =="),
        node_exits=[NodeExitFact("chi2863", 1), NodeExitFact("chi2832", 143)],
    )
    v = classify(facts)
    assert (v.klass, v.node) == (FailureClass.ECC, "chi2863")


def test_cancelled_without_failure() -> None:
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, last_step=6,
                          summary=SummaryFact("CANCELLED", None, "scancel / SIGTERM")))
    assert v.klass is FailureClass.CANCELLED
    # The evidence is the summary's Status line, in the toolkit's shape.
    assert v.evidence is not None
    assert parse_line(v.evidence) == SummaryFact("CANCELLED", None, "scancel / SIGTERM")
    v = classify(JobFacts(phase=Phase.TRAINING, last_step=6, cancelled_by_us=True))
    assert v.klass is FailureClass.CANCELLED


def test_failure_before_cancel_wins() -> None:
    facts = JobFacts(node_map=NODES, phase=Phase.COMPILE, cancelled_by_us=True,
                     signals=signals("0: INTERNAL: Failed to compile module x"))
    assert classify(facts).klass is FailureClass.COMPILE


def test_nothing_recognised_is_unknown_and_says_so() -> None:
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, last_step=7,
                          scheduler_state="GONE"))
    assert v.klass is FailureClass.UNKNOWN
    assert v.detail is not None
    check_golden(GOLDEN / "classify" / "unknown_detail.txt", f"{v.detail}\n")


def test_a_traceback_is_shown_by_the_exception_it_ends_with() -> None:
    facts = JobFacts(
        node_map=NODES, phase=Phase.COMPILE, scheduler_state="FAILED", exit_code=1,
        signals=signals(
            "1: Traceback (most recent call last):",
            "0: KeyError: 'handled and logged on another rank'",
            "1: ValueError: bad override value per_device_batch_size=abc",
        ),
    )
    v = classify(facts)
    assert v.klass is FailureClass.PYTHON and v.node == "chi2863"
    # The evidence is the line rank 1's traceback ends with, not rank 0's handled one.
    assert v.evidence == facts.signals[2][1].text and facts.signals[2][1].rank == 1


def test_an_exception_line_alone_is_not_a_failure() -> None:
    """Programs log handled exceptions: without a traceback the line decides nothing."""
    hung = JobFacts(node_map=NODES, phase=Phase.TRAINING, last_step=7, hung=True,
                    signals=signals("0: requests.exceptions.ConnectionError: retrying"))
    assert classify(hung).klass is FailureClass.HANG
    done = JobFacts(node_map=NODES, phase=Phase.SUMMARY, last_step=14,
                    scheduler_state="COMPLETED", exit_code=0,
                    signals=signals("0: RuntimeError: retried and recovered"))
    assert classify(done).klass is None


def test_a_scancels_exit_codes_are_no_crash_and_no_host_oom() -> None:
    # scancel: SIGTERM (143) on every node, SIGKILL (137) where a rank outlived KillWait.
    for codes in ((143, 143, 137, 143), (137, 137, 137, 137), (1, 143, 143, 143)):
        v = classify(JobFacts(
            node_map=NODES, phase=Phase.TRAINING, last_step=6, scheduler_state="CANCELLED",
            exit_code=0, node_exits=[NodeExitFact(h, c) for h, c in
                                     zip(NODES.values(), codes, strict=True)]))
        assert (v.klass, v.node) == (FailureClass.CANCELLED, None), codes


def test_an_oom_before_a_scancel_is_still_the_oom() -> None:
    v = classify(JobFacts(node_map=NODES, phase=Phase.COMPILE, scheduler_state="CANCELLED",
                          signals=signals("1: RESOURCE_EXHAUSTED: Out of memory while trying "
                                          "to allocate 12.5GiB")))
    assert v.klass is FailureClass.OOM


def test_scheduler_states_that_name_a_cause() -> None:
    def klass(state: str) -> FailureClass | None:
        return classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, last_step=6,
                                 scheduler_state=state)).klass

    assert klass("PREEMPTED") is FailureClass.CANCELLED
    assert klass("NODE_FAIL") is FailureClass.NODE_CRASH
    assert klass("OUT_OF_MEMORY") is FailureClass.HOST_OOM


def test_a_completed_job_whose_log_was_lost_is_no_failure_of_its_own() -> None:
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, last_step=3,
                          scheduler_state="COMPLETED", exit_code=0, log_lost=True))
    assert v.klass is FailureClass.LOG_LOST
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, last_step=3,
                          scheduler_state="FAILED", exit_code=1, log_lost=True))
    assert v.klass is FailureClass.UNKNOWN
    assert v.detail is not None and "the log could not be read" in v.detail


def test_a_bare_killed_under_a_cancel_is_the_cancels_sigkill() -> None:
    killed = signals("3: /run.sh: line 4:  881 Killed   python3 train.py")
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, signals=killed,
                          scheduler_state="CANCELLED"))
    assert v.klass is FailureClass.CANCELLED
    # The kernel's own words are the OOM killer's, cancel or not.
    oom = signals("kernel: Out of memory: Killed process 4242 (python3)")
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, signals=oom,
                          scheduler_state="CANCELLED"))
    assert v.klass is FailureClass.HOST_OOM


# The trainer cannot start (issue 47): its environment, the same at every value.
BOX = {0: "box1"}


def test_a_traceback_ending_in_an_import_error_is_the_environment() -> None:
    lines = signals("Traceback (most recent call last):",
                    "ModuleNotFoundError: No module named 'jax'")
    module_not_found = lines[1]
    v = classify(JobFacts(node_map=BOX, phase=Phase.PREFLIGHT, scheduler_state="FAILED",
                          exit_code=1, summary=SummaryFact("FAILED", 1, ""), signals=lines))
    assert (v.klass, v.node) == (FailureClass.ENVIRONMENT, None)
    assert v.evidence == module_not_found[1].text   # the line the traceback ends with
    assert v.detail is not None and v.detail.startswith("ModuleNotFoundError")
    # On every node of a multi-node job it stays the environment (not `config`), no node.
    every = signals(*(f"{r}: {line}" for r in range(4) for line in (
        "Traceback (most recent call last):", "ImportError: cannot import name 'x' from 'y'")))
    v = classify(JobFacts(node_map=NODES, phase=Phase.PREFLIGHT, scheduler_state="FAILED",
                          exit_code=1, signals=every))
    assert (v.klass, v.node) == (FailureClass.ENVIRONMENT, None)


def test_pythons_own_lines_name_a_broken_environment_without_a_traceback() -> None:
    for line in ("python3: can't open file '/nope/train.py': [Errno 2] No such file or "
                 "directory",
                 "SyntaxError: invalid syntax",   # the script Python runs: no traceback
                 "sweepd local backend: cannot start trainx: No such file or directory"):
        v = classify(JobFacts(node_map=BOX, scheduler_state="FAILED", exit_code=2,
                              signals=signals(line)))
        assert (v.klass, v.evidence) == (FailureClass.ENVIRONMENT, line)


def test_a_named_cause_beats_an_import_error_line() -> None:
    """A program may log a handled ImportError: an OOM after it is still the OOM, and a job
    that went on to pass is a pass."""
    v = classify(JobFacts(node_map=BOX, phase=Phase.COMPILE, scheduler_state="FAILED",
                          exit_code=1, signals=signals(
                              "ImportError: optional module missing, falling back",
                              "RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                              "12.5 GiB.")))
    assert v.klass is FailureClass.OOM
    done = JobFacts(node_map=BOX, phase=Phase.SUMMARY, last_step=14,
                    scheduler_state="COMPLETED", exit_code=0,
                    signals=signals("ImportError: optional module missing, falling back"))
    assert classify(done).klass is None


KILL9 = "killed by signal 9 (SIGKILL): the host's out-of-memory killer or a person"


def test_a_sigkill_is_named_from_the_summary_or_the_scheduler() -> None:
    """`kill -9` of the trainer: the summary's `exit 137` or `killed by signal 9`, or the
    scheduler's 137 (Slurm's `0:9`), read alike; never an unrecognised failure."""
    for summary, code in ((SummaryFact("FAILED", 137, "Training FAILED (exit=137)"), 1),
                          (SummaryFact("FAILED", None, "killed by signal 9"), None),
                          (None, 137)):
        v = classify(JobFacts(node_map=BOX, phase=Phase.TRAINING, last_step=4,
                              summary=summary, scheduler_state="FAILED", exit_code=code))
        assert (v.klass, v.node, v.detail) == (FailureClass.HOST_OOM, "box1", KILL9), summary
    # A node's exit 137 is named the same way.
    v = classify(JobFacts(node_map=NODES, phase=Phase.TRAINING, scheduler_state="FAILED",
                          exit_code=137, node_exits=[NodeExitFact("chi2863", 137)]))
    assert (v.klass, v.detail) == (FailureClass.HOST_OOM, KILL9)


def test_another_signal_is_named_in_the_unknown_failure() -> None:
    v = classify(JobFacts(node_map=BOX, phase=Phase.TRAINING, scheduler_state="FAILED",
                          exit_code=139, summary=SummaryFact("FAILED", 139, "")))
    assert v.klass is FailureClass.UNKNOWN
    assert v.detail is not None and v.detail.startswith("killed by signal 11 (SIGSEGV)")


def test_a_sigkill_under_a_cancel_or_a_scheduler_cause_is_theirs() -> None:
    cancelled = JobFacts(node_map=BOX, phase=Phase.TRAINING, scheduler_state="CANCELLED",
                         exit_code=137, summary=SummaryFact("FAILED", 137, ""))
    assert classify(cancelled).klass is FailureClass.CANCELLED
    oom = JobFacts(node_map=BOX, phase=Phase.TRAINING, scheduler_state="OUT_OF_MEMORY",
                   exit_code=137)
    v = classify(oom)
    assert v.klass is FailureClass.HOST_OOM and v.detail != KILL9


def test_a_summary_that_names_sigterm_is_a_cancel() -> None:
    v = classify(JobFacts(node_map=BOX, phase=Phase.TRAINING, last_step=4,
                          summary=SummaryFact("FAILED", None, "killed by signal 15"),
                          scheduler_state="FAILED"))
    assert v.klass is FailureClass.CANCELLED
