"""Property tests: the parser and the classifier are total and quiet on noise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.monitor.classify import JobFacts, classify
from sweepd.monitor.facts import (
    FailureClass,
    NodeExitFact,
    Phase,
    SignalFact,
    StepFact,
    SummaryFact,
    Verdict,
)
from sweepd.monitor.parse import parse_line

REAL_LINES = [
    "0: completed step: 12, seconds: 20.585, TFLOP/s/device: 301.566, MFU: 23.07%, "
    "Tokens/s/device: 1989.820, total_weights: 31457280, loss: 9.409",
    "0: \tUsing (GB) 41.2 / 178.5 (23.08%) on rocm:0",
    "0: Total memory size: 253.0 GB, Output size: 0.4 GB, Temp size: 178.0 GB, "
    "Argument size: 75.4 GB, Host temp size: 0.0 GB.",
    'PASSTHROUGH_ARGS="per_device_batch_size=4 steps=15"',
    "JOB_NODELIST=chi[2832,2863]",
    "== Docker pull TIMEOUT (900s/900s) ==",
    "== ECC check FAILED (exit=1, 12s) ==",
    "NODE_EXIT host=chi2832 exit=137",
    "  Status: \x1b[32mSUCCESS\x1b[0m (exit 0)",
    "  Status: FAILED (exit 1) \u2014 Training failed",
    "1: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12.5 GiB.",
    "1: F0412 parse_flags_from_env.cc:226] Unknown flags in XLA_FLAGS: --xla_foo=1",
    "0: The following tasks are unhealthy (stopped sending heartbeats): task:2",
    "srun: error: chi2863: task 1: Exited with exit code 143",
]

# No uppercase letters and none of "k", "m", "o", "p", "t": no trigger word can be spelled.
NOISE = st.text(alphabet="abcdefghijlnqrsuvwxyz0123456789 .,:;=()[]/%-_\t\r\n\x1b\ufffd")

SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(st.text())
def test_parse_line_total_on_any_text(raw: str) -> None:
    parse_line(raw)


@SETTINGS
@given(NOISE)
def test_noise_never_yields_signal_or_step(raw: str) -> None:
    assert not isinstance(parse_line(raw), SignalFact | StepFact)


@SETTINGS
@given(
    st.sampled_from(REAL_LINES),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=200),
    st.text(max_size=8),
)
def test_garbled_real_lines_never_raise(line: str, cut: int, at: int, junk: str) -> None:
    parse_line(line[:cut])
    parse_line(line[:at] + junk + line[at:])
    parse_line(line[at:])


signal_facts = st.builds(
    SignalFact,
    rank=st.none() | st.integers(min_value=-2, max_value=6),
    klass=st.sampled_from(FailureClass),
    text=st.text(max_size=20),
    detail=st.none() | st.text(max_size=10),
)
job_facts = st.builds(
    JobFacts,
    signals=st.lists(st.tuples(st.integers(min_value=0, max_value=10**9), signal_facts),
                     max_size=6),
    node_map=st.dictionaries(st.integers(min_value=0, max_value=5),
                             st.sampled_from(["n1", "n2", "n3", "n4"]), max_size=4),
    phase=st.sampled_from(Phase),
    last_step=st.none() | st.integers(min_value=-1, max_value=30),
    expected_steps=st.integers(min_value=0, max_value=20),
    summary=st.none() | st.builds(
        SummaryFact,
        status=st.sampled_from(["SUCCESS", "FAILED", "CANCELLED", "???"]),
        exit_code=st.none() | st.sampled_from([0, 1, 130, 137, 143]),
        detail=st.text(max_size=10),
    ),
    node_exits=st.lists(st.builds(NodeExitFact, host=st.sampled_from(["n1", "n2", "n5"]),
                                  exit_code=st.sampled_from([0, 1, 134, 137, 139, 143])),
                        max_size=5),
    scheduler_state=st.none() | st.sampled_from(["COMPLETED", "FAILED", "CANCELLED", "GONE",
                                                  "RUNNING", "TIMEOUT"]),
    exit_code=st.none() | st.integers(min_value=-1, max_value=255),
    hung=st.booleans(),
    cancelled_by_us=st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(job_facts)
def test_classify_total(facts: JobFacts) -> None:
    v = classify(facts)
    assert isinstance(v, Verdict)
    if v.klass is not None and v.node is not None:
        # A named node is always one the job ran on (or that printed NODE_EXIT).
        known = set(facts.node_map.values()) | {e.host for e in facts.node_exits}
        assert v.node in known
