"""Real MaxText on one TPU v5e chip (reference/tpu/, copied into tests/fixtures/): what the
monitor reads from its two raw logs, and that a damaged copy never makes it raise."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.config import PolicyConfig
from sweepd.core.policy import Act, Case, SweepFacts, decide
from sweepd.kinds.model_perf.probes import _gb as search_reads_gb
from sweepd.monitor.facts import (
    CompiledMemoryFact,
    FailureClass,
    MemstatsFact,
    SignalFact,
    StepFact,
)
from sweepd.monitor.parse import _STEP, _STEP_USUAL, parse_line
from sweepd.monitor.reading import read_log
from sweepd.monitor.steady import steady_state, steady_steps
from tests.golden_files import GOLDEN, check_golden

FIXTURES = Path(__file__).parent / "fixtures"
SUCCESS = (FIXTURES / "maxtext-tpu-success.log").read_text().splitlines()
OOM = (FIXTURES / "maxtext-tpu-oom.log").read_text().splitlines()
# Tokens/s/device of steps 5-14 as the success log prints them.
WINDOW_TGS = [43432.158, 42704.033, 43129.409, 43037.868, 43602.299, 42847.877, 43529.087,
              42739.680, 42656.003, 43353.091]
OOM_LINE = ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the "
            "total memory required for HLO temporaries (26.06G) exceeds available HBM "
            "(15.75G).")


def test_every_step_line_is_read_by_the_usual_pattern_not_the_fallback() -> None:
    step_lines = [line for line in SUCCESS if "completed step:" in line]
    assert len(step_lines) == 15
    for line in step_lines:
        m = _STEP.search(line)
        assert m is not None and _STEP_USUAL.fullmatch(m.group(2)), line


def test_the_success_log_step_3_line_as_printed() -> None:
    line = ("I1206 00:23:33.655599 139325610507136 metric_logger.py:230] completed step: 3, "
            "seconds: 0.047, TFLOP/s/device: 68.488, Tokens/s/device: 44027.861, "
            "total_weights: 2048, loss: 9.011, lm_loss: 9.011, perplexity: 8193.144")
    assert line in SUCCESS
    assert parse_line(line) == StepFact(rank=None, step=3, tgs=44027.861, seconds=0.047,
                                        tflops=68.488, mfu=None, loss=9.011)
    # With the toolkit's rank prefix and MFU, the same pattern.
    fact = parse_line("0: " + line.replace("68.488, ", "68.488, MFU: 34.70%, "))
    assert isinstance(fact, StepFact) and (fact.rank, fact.mfu, fact.tgs) == (0, 34.7, 44027.861)


def test_the_success_log_memory_lines() -> None:
    facts = [parse_line(line) for line in SUCCESS]
    assert [f for f in facts if isinstance(f, CompiledMemoryFact)] == [
        CompiledMemoryFact(rank=None, total_gb=4.4, output_gb=3.0, temp_gb=1.4, argument_gb=3.0,
                           host_temp_gb=0.0)]
    assert [f for f in facts if isinstance(f, MemstatsFact)] == [
        MemstatsFact(rank=None, used_gb=3.01, limit_gb=15.75)]
    assert not [f for f in facts if isinstance(f, SignalFact)]   # nothing in it is a failure


def test_the_newer_compiled_memory_line_as_the_brief_quotes_it() -> None:
    line = ("I1206 00:23:30.731024 139325610507136 max_utils.py:820] Total estimated memory "
            "size: 6.1 GB, estimated output size: 3.0 GB, estimated temp size: 3.1 GB, "
            "estimated argument size: 3.0 GB, Estimated host temp size: 0.0 GB.")
    assert parse_line(line) == CompiledMemoryFact(rank=None, total_gb=6.1, output_gb=3.0,
                                                  temp_gb=3.1, argument_gb=3.0,
                                                  host_temp_gb=0.0)
    # Parts above the total: garbled, not a measurement (as the older line).
    assert parse_line(line.replace("temp size: 3.1", "temp size: 9.1")) is None


def test_the_success_log_read_whole() -> None:
    r = read_log(SUCCESS)
    assert r.failure.verdict.klass is None
    assert (r.last_step, r.expected_steps, r.window, r.fallback) == \
        (14, 15, tuple(range(5, 15)), False)
    assert r.tgs_mean == pytest.approx(statistics.fmean(WINDOW_TGS))
    assert r.tgs_median == pytest.approx(statistics.median(WINDOW_TGS))
    assert r.tgs_mean == pytest.approx(43103.1505)
    # What the engine records: the same mean.
    assert steady_state(list(r.steps.values()), profiler=False) == \
        (pytest.approx(43103.1505), None)
    assert r.compiled is not None and r.compiled.total_gb == 4.4
    assert r.memstats == MemstatsFact(rank=None, used_gb=3.01, limit_gb=15.75)


def test_the_oom_log_is_an_oom_with_its_sizes_not_a_python_error() -> None:
    assert OOM[-1] == OOM_LINE
    r = read_log(OOM)
    f = r.failure
    assert f.verdict.klass is FailureClass.OOM
    assert (f.required_gb, f.available_gb) == (26.06, 15.75)
    assert f.verdict.evidence == OOM_LINE and f.line_number == len(OOM)
    # The GPU OOM's shape: the search reads the detail as the size the run was short at most.
    assert f.verdict.detail == "26.06GiB" and search_reads_gb(f.verdict.detail) == 26.06
    assert (r.last_step, r.compiled, r.memstats) == (None, None, None)
    # A traceback came first: the OOM is the root cause, not the Python error.
    tracebacks = [line for line in OOM if line.startswith("Traceback")]
    assert len(tracebacks) == 1
    decision = decide(Case(f.verdict, (), SweepFacts(["n1"], (), 1), PolicyConfig()))
    assert (decision.act, decision.rule) == (Act.RECORD, "oom.never_retry")


def test_the_oom_the_brief_quotes() -> None:
    line = ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total "
            "memory required for HLO temporaries (17.57G) exceeds available HBM (15.75G).")
    f = read_log([*OOM[:-1], line]).failure
    assert (f.verdict.klass, f.required_gb, f.available_gb, f.verdict.detail) == \
        (FailureClass.OOM, 17.57, 15.75, "17.57GiB")


def test_libtpu_unknown_flag_is_a_config_error_not_retried() -> None:
    log = [*SUCCESS[:20], "ERROR: Unknown command line flag 'xla_tpu_foo'"]
    f = read_log(log, exit_code=1).failure
    assert (f.verdict.klass, f.verdict.detail, f.verdict.node) == \
        (FailureClass.UNKNOWN_FLAG, "--xla_tpu_foo", None)
    decision = decide(Case(f.verdict, (), SweepFacts(["n1"], (), 1), PolicyConfig()))
    assert decision.rule == "config.stop" and decision.act is not Act.RETRY
    # absl's hint after the name does not change it.
    hinted = parse_line("0: ERROR: Unknown command line flag 'xla_tpu_fo'. Did you mean: "
                        "xla_tpu_foo ?")
    assert isinstance(hinted, SignalFact) and hinted.detail == "--xla_tpu_fo"


def test_an_override_maxtext_does_not_know_is_a_config_error_named_in_one_short_line() -> None:
    # Upstream MaxText (e591f30) refused the GPU template's heartbeat key at start, naming
    # every field it knows in one line of thousands of characters.
    fields = ", ".join(f"'field_{i}'" for i in range(800))
    log = ["I1206 00:23:09.100 1 pyconfig.py:270] Ignoring invalid/unsupported field from "
           "YAML/CLI: 'jax_distributed_heartbeat_timeout_seconds'",
           "Traceback (most recent call last):",
           '  File "pyconfig.py", line 271, in _prepare_for_pydantic',
           f"ValueError: 'jax_distributed_heartbeat_timeout_seconds' not in {fields}."]
    f = read_log(log, exit_code=1).failure
    assert f.verdict.klass == FailureClass.CONFIG
    check_golden(GOLDEN / "tpu_logs" / "unknown_override.txt", f"{f.verdict.detail}\n")
    decision = decide(Case(f.verdict, (), SweepFacts(["n1"], (), 1), PolicyConfig()))
    assert decision.rule == "config.stop" and decision.act is not Act.RETRY
    fact = parse_line(log[-1])
    assert isinstance(fact, SignalFact) and len(fact.text) < 700 < len(log[-1])


def _steps(*numbers: int) -> list[StepFact]:
    # Steps 0-2 as the chip printed them: slow compiles and an impossible 2.5 M tokens/s.
    warm = {0: 970.0, 1: 3072.0, 2: 2_500_000.0}
    return [StepFact(rank=None, step=n, tgs=warm.get(n, 40000.0 + n)) for n in numbers]


def test_a_run_shorter_than_the_window_never_counts_steps_0_to_2() -> None:
    assert list(steady_steps(_steps(0, 1, 2, 3, 4), False, fallback=True)) == [3, 4]
    assert steady_steps(_steps(0, 1, 2), False, fallback=True) == {}
    # The profiler's 5-8 are perturbed: its fallback is 3-4 too.
    assert list(steady_steps(_steps(*range(9)), True, fallback=True)) == [3, 4]
    # Where the window has steps, it alone counts (the SKILL.md default).
    assert list(steady_steps(_steps(*range(8)), False, fallback=True)) == [5, 6, 7]
    # The engine takes no fallback: a run short of the window has no steady TGS.
    assert steady_state(_steps(0, 1, 2, 3, 4), profiler=False) is None
    r = read_log([line for line in SUCCESS
                  if "completed step:" not in line or int(_step_of(line)) < 5])
    assert (r.window, r.fallback, r.last_step) == ((3, 4), True, 4)
    assert r.tgs_mean == pytest.approx((44027.861 + 43581.886) / 2)


def _step_of(line: str) -> str:
    return line.split("completed step: ", 1)[1].split(",", 1)[0]


# -- damaged logs ----------------------------------------------------------------------------

def _hostile() -> list[list[str]]:
    step = next(line for line in SUCCESS if "completed step: 7," in line)
    return [
        [*SUCCESS[:-1], SUCCESS[-1][:60]],                       # cut mid-line
        [*SUCCESS[:-1], SUCCESS[-1][:SUCCESS[-1].index("Tokens/s") + 19]],  # cut mid-number
        [line.replace("43129.409", "9" * 400) for line in SUCCESS],          # inf once parsed
        [re.sub(r"Tokens/s/device: [0-9.]+", "Tokens/s/device: 1.5e308", line)
         for line in SUCCESS],
        [f"\x1b[32m{line}\x1b[0m" for line in SUCCESS],          # coloured
        [line + "\r" for line in SUCCESS] + ["\x00\x00\x00"],
        [step.replace("Tokens/s/device", "Tokens/s/device: x,")] * 3,
        [*OOM[:-1], OOM_LINE.replace("26.06", "9" * 30).replace("15.75", "1" + "0" * 11)],
        [*OOM[:-1], OOM_LINE[:100]],
        ["completed step: 99999999999999999999, seconds: 1, Tokens/s/device: nan"],
        [],
    ]


@pytest.mark.parametrize("log", _hostile())
def test_a_damaged_log_never_raises(log: list[str]) -> None:
    r = read_log(log)
    assert r.failure.verdict is not None
    for value in (r.tgs_mean, r.tgs_median):
        assert value is None or isinstance(value, float)


def test_huge_numbers_read_as_printed_and_their_mean_does_not_raise() -> None:
    r = read_log(_hostile()[3])
    assert r.tgs_mean is not None and math.isfinite(r.tgs_mean) and r.tgs_mean > 1e307
    assert read_log(_hostile()[2]).tgs_mean == math.inf


def test_ansi_colour_changes_nothing_read() -> None:
    plain, coloured = read_log(SUCCESS), read_log(_hostile()[4])
    assert (coloured.steps, coloured.compiled, coloured.memstats) == \
        (plain.steps, plain.compiled, plain.memstats)


def test_a_cut_oom_line_is_still_no_success() -> None:
    r = read_log(_hostile()[8], exit_code=1)
    assert r.failure.verdict.klass is not None


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([i for i, line in enumerate(SUCCESS + OOM) if "Config param" not in line]),
       st.integers(min_value=0, max_value=400), st.text(max_size=8))
def test_any_cut_or_splice_of_a_real_line_never_raises(index: int, at: int, junk: str) -> None:
    line = (SUCCESS + OOM)[index]
    for damaged in (line[:at], line[at:], line[:at] + junk + line[at:]):
        parse_line(damaged)
        read_log([damaged, damaged])


def test_the_job_log_view_marks_a_long_failure_line_the_store_kept_cut() -> None:
    from sweepd.app.joblog import mark
    from sweepd.monitor.parse import as_evidence

    line = "ValueError: 'no_such_key' not in " + ", ".join(f"'f{i}'" for i in range(300))
    assert len(line) > 1000
    assert mark(line, as_evidence(line), set()) == "evidence"
    assert mark(line, None, {as_evidence(line)}) == "signal"
    assert mark("ValueError: other", as_evidence(line), set()) == ""


def test_a_run_that_turns_the_profiler_off_is_read_unprofiled() -> None:
    from sweepd.kinds.parse import parse_spec

    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "n[1-2]",
                       "min_nodes": 1, "overrides": {"profiler": "xplane"}})
    assert spec.profiles_run({}) is True
    assert spec.profiles_run({"profiler": ""}) is False
    plain = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "n[1-2]",
                        "min_nodes": 1})
    assert plain.profiles_run({"profiler": "xplane"}) is True
