"""parse_line and steady_state on real lines from maxtext-slurm-facts.md §2-§3."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.monitor.facts import (
    BannerFact,
    FailureClass,
    HeaderFact,
    MemstatsFact,
    NodeExitFact,
    SignalFact,
    StepFact,
    SummaryFact,
)
from sweepd.monitor.parse import parse_line
from sweepd.monitor.signatures import (
    ENV_EXCEPTION_DETAIL,
    EXCEPTION_DETAIL,
    HEARTBEAT_DETAIL,
    SIGNATURES,
    match_signature,
)
from sweepd.monitor.steady import steady_state

STEP = (
    "completed step: 12, seconds: 20.585, TFLOP/s/device: 301.566, MFU: 23.07%, "
    "Tokens/s/device: 1989.820, total_weights: 31457280, loss: 9.409"
)
STEP_UPSTREAM = (
    "completed step: 12, seconds: 20.585, TFLOP/s/device: 301.566, "
    "Tokens/s/device: 1989.820, total_weights: 31457280, loss: 9.409"
)


def test_step_line_with_mfu_and_rank_prefix() -> None:
    assert parse_line("0: " + STEP) == StepFact(
        rank=0, step=12, tgs=1989.82, seconds=20.585, tflops=301.566, mfu=23.07, loss=9.409
    )


def test_step_line_without_mfu_and_without_prefix() -> None:
    fact = parse_line(STEP_UPSTREAM)
    assert isinstance(fact, StepFact)
    assert (fact.rank, fact.step, fact.tgs, fact.mfu, fact.loss) == (None, 12, 1989.82, None, 9.409)


@pytest.mark.parametrize(
    "tail",
    [", lr: 1.5e-05, grad_norm: 0.734", ", main_model_loss: 9.1, mtp_loss: 0.3"],
)
def test_step_line_extra_trailing_fields_are_ignored(tail: str) -> None:
    fact = parse_line("3: " + STEP + tail)
    assert isinstance(fact, StepFact)
    assert (fact.rank, fact.tgs, fact.loss, fact.mfu) == (3, 1989.82, 9.409, 23.07)


def test_step_fields_are_read_by_name_not_position() -> None:
    line = "completed step: 7, Tokens/s/device: 1500.5, loss: 8.0, seconds: 10.0, MFU: 30.5%"
    fact = parse_line(line)
    assert isinstance(fact, StepFact)
    got = (fact.step, fact.tgs, fact.seconds, fact.mfu, fact.tflops)
    assert got == (7, 1500.5, 10.0, 30.5, None)


def test_step_line_without_tokens_is_not_a_step() -> None:
    line = "completed step: 12, seconds: 20.585, TFLOP/s/device: 301.566, loss: 9.4"
    assert parse_line(line) is None


def test_step_line_with_crlf_and_ansi() -> None:
    fact = parse_line("\x1b[0m0: " + STEP + "\r\n")
    assert isinstance(fact, StepFact)
    assert fact.loss == 9.409


def test_memstats_using_line() -> None:
    assert parse_line("0: \tUsing (GB) 41.2 / 178.5 (23.08%) on rocm:0") == MemstatsFact(
        rank=0, used_gb=41.2, limit_gb=178.5
    )
    assert parse_line("Memstats: After params initialized:") is None


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        ("JOB_ID=12345", "JOB_ID", "12345"),
        ("JOB_NAME=JAX-llama2-70b", "JOB_NAME", "JAX-llama2-70b"),
        ("NNODES=4", "NNODES", "4"),
        ("JOB_NODELIST=chi[2832,2863,2867-2868]", "JOB_NODELIST", "chi[2832,2863,2867-2868]"),
        ('PASSTHROUGH_ARGS="per_device_batch_size=4 steps=15"', "PASSTHROUGH_ARGS",
         "per_device_batch_size=4 steps=15"),
        ("MODEL_NAME=llama2-70b", "MODEL_NAME", "llama2-70b"),
    ],
)
def test_header_lines(line: str, key: str, value: str) -> None:
    assert parse_line(line + "\n") == HeaderFact(key=key, value=value)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("== Preflight BEGIN (timeout=900s) ==", BannerFact("Preflight", "BEGIN", "timeout=900s")),
        ("== Training END (812s) ==", BannerFact("Training", "END", "812s")),
        ("== Training FAILED (exit=1, 800s) ==", BannerFact("Training", "FAILED", "exit=1, 800s")),
        ("=== Pre-flight GPU cleanup ===", None),
        ("=" * 26 + " JOB SUMMARY " + "=" * 26, BannerFact("JOB SUMMARY", "BEGIN", "")),
    ],
)
def test_banners(line: str, expected: BannerFact | None) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    ("line", "klass"),
    [
        ("== Docker pull TIMEOUT (900s/900s) ==", FailureClass.PULL),
        ("== ECC check FAILED (exit=1, 12s) ==", FailureClass.ECC),
    ],
)
def test_failing_banners_are_signals(line: str, klass: FailureClass) -> None:
    fact = parse_line(line)
    assert isinstance(fact, SignalFact)
    assert (fact.klass, fact.text) == (klass, line)


def test_node_exit() -> None:
    assert parse_line("NODE_EXIT host=chi2868 exit=137") == NodeExitFact("chi2868", 137)
    assert parse_line("2: NODE_EXIT host=chi2868 exit=1") == NodeExitFact("chi2868", 1)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  Status: SUCCESS (exit 0)", SummaryFact("SUCCESS", 0, "")),
        ("  Status: \x1b[1;32mSUCCESS\x1b[0m (exit 0)\r\n", SummaryFact("SUCCESS", 0, "")),
        ("  Status: FAILED (exit 1) \u2014 Training failed on chi2868",
         SummaryFact("FAILED", 1, "Training failed on chi2868")),
        ("  Status: \x1b[31mFAILED\x1b[0m (exit 143)", SummaryFact("FAILED", 143, "")),
        ("  Status: CANCELLED (scancel / SIGTERM)",
         SummaryFact("CANCELLED", None, "scancel / SIGTERM")),
        ("  Status: running fine", None),
    ],
)
def test_summary_status(line: str, expected: SummaryFact | None) -> None:
    assert parse_line(line) == expected


SIGNALS: list[tuple[str, FailureClass, str | None]] = [
    ("1: jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
     "to allocate 12.5 GiB.", FailureClass.OOM, "12.5 GiB"),
    ("0: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 29.95GiB.",
     FailureClass.OOM, "29.95GiB"),
    ("0: E0101 Allocator ran OUT_OF_MEMORY", FailureClass.OOM, None),
    ("0: XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory", FailureClass.OOM, None),
    # TPU (reference/tpu/): the HBM out-of-memory at compile names what was needed.
    ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total "
     "memory required for HLO temporaries (17.57G) exceeds available HBM (15.75G).",
     FailureClass.OOM, "17.57GiB"),
    ("0: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
     "space hbm. Used 20.15G of 15.48G hbm. Exceeded hbm capacity by 4.67G.",
     FailureClass.OOM, "20.15GiB"),
    ("0: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 512.00M. "
     "That was not possible. There are 256.00M free.; (0x0x0_HBM0)", FailureClass.OOM,
     "0.50GiB"),
    ("0: XlaRuntimeError: RESOURCE_EXHAUSTED: ran out of memory somewhere", FailureClass.OOM,
     None),
    ("kernel: Out of memory: Killed process 4242 (python3)", FailureClass.HOST_OOM, None),
    ("1: [ERROR] ECC errors detected on GPU 5", FailureClass.ECC, None),
    ("0: jax.errors.ResourceExhaustedError: something", FailureClass.OOM, None),
    ("2: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate. Available Free mem "
     ": 0 MB", FailureClass.OOM, "HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
    ("0: Failed to CUDA calloc 1048576 bytes", FailureClass.OOM, None),
    ("3: :0:rocdevice.cpp :2614: HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: code 0x29",
     FailureClass.GPU_HARDWARE, "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"),
    ("3: :0:rocdevice.cpp            :3020: 1234 us: Callback: Queue aborting with error : "
     "Aborting", FailureClass.GPU_HARDWARE, None),
    ("1: [ERROR] GPU 3: 12 uncorrectable ECC errors", FailureClass.ECC, None),
    ("Killed", FailureClass.HOST_OOM, "killed by SIGKILL"),
    ("2: /workspace/run.sh: line 42:  8812 Killed                  python3 -m MaxText.train",
     FailureClass.HOST_OOM, "killed by SIGKILL"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=12345.3.",
     FailureClass.HOST_OOM, None),
    ("0: chi2832:123:456 [0] NCCL WARN Timeout waiting for proxy", FailureClass.COLLECTIVE_TIMEOUT,
     None),
    ("0: NCCL error: ncclSystemError: System call failed", FailureClass.COLLECTIVE_TIMEOUT, None),
    ("0: Timeout waiting for peers", FailureClass.COLLECTIVE_TIMEOUT, None),
    ("0: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: jax_distributed",
     FailureClass.COORD_TIMEOUT, None),
    ("0: The following tasks are unhealthy (stopped sending heartbeats): /job:jax_worker/task:2",
     FailureClass.COORD_TIMEOUT, HEARTBEAT_DETAIL),
    ("1: F0412 parse_flags_from_env.cc:226] Unknown flags in XLA_FLAGS: "
     "--xla_gpu_enable_foo=true", FailureClass.UNKNOWN_FLAG, "--xla_gpu_enable_foo"),
    ("1: parse_flags_from_env.cc: Unknown flag: --xla_gpu_bar", FailureClass.UNKNOWN_FLAG,
     "--xla_gpu_bar"),
    ("2: E0412 Unknown flag: --xla_gpu_baz=3", FailureClass.UNKNOWN_FLAG, "--xla_gpu_baz"),
    ("ERROR: Unknown command line flag 'xla_tpu_foo'", FailureClass.UNKNOWN_FLAG,
     "--xla_tpu_foo"),
    ("0: ValueError: 'no_such_key' not in 'steps', 'dataset_type'.", FailureClass.CONFIG,
     "MaxText does not know the override no_such_key"),
    ("0: INTERNAL: Failed to compile module jit_train_step", FailureClass.COMPILE, None),
    ("0: XLA compilation failed: bad thing", FailureClass.COMPILE, None),
    # The trainer cannot start: its environment (issue 47).
    ("python3: can't open file '/nope/train.py': [Errno 2] No such file or directory",
     FailureClass.ENVIRONMENT, "python cannot open the trainer's script /nope/train.py"),
    ("/usr/bin/python3: No module named maxtext", FailureClass.ENVIRONMENT,
     "python has no module maxtext"),
    ("/opt/venv/bin/python3.11: Error while finding module specification for "
     "'maxtext.trainers.pre_train.train' (ModuleNotFoundError: No module named 'maxtext')",
     FailureClass.ENVIRONMENT, "python cannot find the trainer's module "
     "maxtext.trainers.pre_train.train"),
    ("/var/spool/slurmd/job42/slurm_script: line 12: trainx: command not found",
     FailureClass.ENVIRONMENT, "the shell cannot find the command trainx"),
    ("bash: trainx: command not found", FailureClass.ENVIRONMENT,
     "the shell cannot find the command trainx"),
    ("sweepd local backend: cannot start trainx: No such file or directory",
     FailureClass.ENVIRONMENT, "the train command trainx cannot be started"),
    ("0: ModuleNotFoundError: No module named 'jax'", FailureClass.ENVIRONMENT,
     ENV_EXCEPTION_DETAIL),
    ("0: Traceback (most recent call last):", FailureClass.PYTHON, None),
    ("0: ValueError: bad override value", FailureClass.PYTHON, EXCEPTION_DETAIL),
    ("1: jax.errors.SomeException: x", FailureClass.PYTHON, EXCEPTION_DETAIL),
    ("2: ionic_comp_msn: cqe with error 0x5", FailureClass.NIC, None),
    ("0: chi2832:1:1 [0] NCCL FATAL bootstrap.cc:44 Failed to auto-detect NCCL_SOCKET_IFNAME",
     FailureClass.NIC, None),
    ("remote: Internal Server Error", FailureClass.CHECKOUT_OUTAGE, None),
    ("error: RPC failed; HTTP 502 curl 22 The requested URL returned error: 502",
     FailureClass.CHECKOUT_OUTAGE, "HTTP 502"),
    ("squeue: error: slurm_load_jobs error: Connection refused", FailureClass.CONTROLLER_DOWN,
     None),
    ("0: [ERROR] Pull failed for rocm/jax-training:latest", FailureClass.PULL,
     "rocm/jax-training:latest"),
    ("1: WARNING: No GPU devices detected", FailureClass.NO_GPU, None),
    ("!!! Unknown model: llama9-1t", FailureClass.CONFIG, "llama9-1t"),
    ("!!! Model name resolution failed", FailureClass.CONFIG, "model name resolution failed"),
    ("0: FATAL: Could not find a free port", FailureClass.CONFIG, "no free port"),
]


@pytest.mark.parametrize(("line", "klass", "detail"), SIGNALS)
def test_every_signature_class(line: str, klass: FailureClass, detail: str | None) -> None:
    fact = parse_line(line + "\r\n")
    assert isinstance(fact, SignalFact)
    assert (fact.klass, fact.detail, fact.text) == (klass, detail, line)


def test_every_signature_row_is_exercised_and_its_needle_is_right() -> None:
    """Each row's cheap substring test must let its own example through to the regex."""
    hit = set()
    for line, _, _ in SIGNALS:
        body = line.split(": ", 1)[1] if line[:1].isdigit() else line
        for i, sig in enumerate(SIGNATURES):
            if sig.pattern.search(body):
                assert sig.needle in body.lower(), sig.pattern.pattern
                hit.add(i)
                break
        assert match_signature(body) is not None, line
    assert hit == set(range(len(SIGNATURES)))


def test_signal_rank_comes_from_prefix() -> None:
    fact = parse_line(" 12: Traceback (most recent call last):")
    assert isinstance(fact, SignalFact)
    assert fact.rank == 12
    fact = parse_line("Traceback (most recent call last):")
    assert isinstance(fact, SignalFact)
    assert fact.rank is None


FALSE_POSITIVES = [
    "0: Failed call to cuInit: UNKNOWN ERROR (303)",
    "0: Unable to initialize backend 'cuda': INTERNAL: CUDA error",
    "0: chi2832:1:1 [0] NCCL WARN MSCCL++: Feature not enabled",
    "0: chi2832:1:1 [0] NCCL WARN LL cutoff points not detected for a supported arch",
    "1: WARNING: AMD GPU device(s) is/are in a low-power state",
    "0: Token indices sequence length is longer than the specified maximum sequence length",
    "1: OCI runtime exec failed: exec failed: unable to start container process",
    "srun: error: chi2863: task 1: Exited with exit code 143",
    "srun: Terminating StepId=12345.3",
    "0: [INFO] ECC check: 0 uncorrectable ECC errors on 8 GPUs",
    "0: [INFO] ECC errors: 0",
    # Trigger words in innocent sentences.
    "0: The process was not Killed by anyone; continuing",
    "0: Config param collective_timeout_seconds: 600",
    "0: Config param Timeout: 900",
    "0: see docs: Killed jobs are retried",
    "srun: error: chi2863: task 1: Killed",
]


@pytest.mark.parametrize("line", FALSE_POSITIVES)
def test_false_positives_never_signal(line: str) -> None:
    assert not isinstance(parse_line(line), SignalFact)


def test_node_exit_143_is_not_a_signal() -> None:
    assert parse_line("NODE_EXIT host=chi2863 exit=143") == NodeExitFact("chi2863", 143)


@pytest.mark.parametrize("line", ["", "\r\n", "0: ", "[INFO] pulling image", "0: hello world"])
def test_uninteresting_lines(line: str) -> None:
    assert parse_line(line) is None


def _step(step: int, tgs: float, mfu: float | None = None, rank: int | None = 0) -> StepFact:
    return StepFact(rank=rank, step=step, tgs=tgs, mfu=mfu)


def test_steady_state_uses_steps_5_to_14() -> None:
    steps = [_step(i, 1000.0 if i < 5 else 2000.0 + i, mfu=30.0) for i in range(15)]
    steps.append(_step(15, 99999.0, mfu=99.0))
    tgs, mfu = steady_state(steps, profiler=False) or (0.0, None)
    assert tgs == pytest.approx(sum(2000.0 + i for i in range(5, 15)) / 10)
    assert mfu == pytest.approx(30.0)


def test_steady_state_profiler_uses_steps_9_to_14() -> None:
    steps = {i: _step(i, 10.0 if i < 9 else 20.0) for i in range(15)}
    assert steady_state(steps, profiler=True) == (20.0, None)
    assert steady_state(steps, profiler=False) == pytest.approx((16.0, None))


def test_steady_state_none_without_steps_in_range() -> None:
    assert steady_state([_step(0, 5.0), _step(3, 5.0)], profiler=False) is None
    assert steady_state([_step(6, 5.0)], profiler=True) is None


def test_steady_state_only_rank_0_or_unprefixed_and_once_per_step() -> None:
    steps = [_step(5, 100.0), _step(5, 300.0), _step(6, 500.0, rank=1), _step(7, 200.0, rank=None)]
    assert steady_state(steps, profiler=False) == (150.0, None)


def test_steady_state_mfu_mean_over_steps_that_print_it() -> None:
    steps = [_step(5, 100.0, mfu=20.0), _step(6, 100.0), _step(7, 100.0, mfu=30.0)]
    assert steady_state(steps, profiler=False) == (100.0, 25.0)


def test_zero_count_ecc_health_line_is_not_a_signal() -> None:
    from sweepd.monitor.facts import FailureClass, SignalFact
    from sweepd.monitor.parse import parse_line

    assert parse_line("0: [INFO] ECC check: 0 uncorrectable errors on chi2832") is None
    bad = parse_line("3: [ERROR] ECC check: 2 uncorrectable ECC errors on GPU 5 (chi2868)")
    assert isinstance(bad, SignalFact) and bad.klass == FailureClass.ECC


@settings(max_examples=300, deadline=None)
@given(
    step=st.integers(0, 10**6),
    numbers=st.lists(st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: f"{x:.3f}"),
        st.floats(1e-9, 1e9).map(lambda x: f"{x:e}"),
        st.integers(-10**9, 10**9).map(str),
        st.sampled_from(["1.", ".5", "+3", "inf", "1_000", "\u0663.\u0665", "-0", "7e", "nan"])),
        min_size=5, max_size=5),
    mfu=st.booleans(),
)
def test_maxtexts_step_line_reads_as_the_same_fields_in_any_order(
        step: int, numbers: list[str], mfu: bool) -> None:
    # The usual line has a one-match path; the same fields in another order are read by
    # name. Both must give the same fact, or both none (a field that is not a number).
    seconds, tflops, mfu_v, tgs, loss = numbers
    fields = [f"seconds: {seconds}", f"TFLOP/s/device: {tflops}",
              *([f"MFU: {mfu_v}%"] if mfu else []), f"Tokens/s/device: {tgs}",
              "total_weights: 31457280", f"loss: {loss}"]
    usual = f"0: completed step: {step}, " + ", ".join(fields)
    reordered = f"0: completed step: {step}, " + ", ".join(reversed(fields))
    assert parse_line(usual) == parse_line(reordered)

