"""Failure signatures and known false positives, as data.

Tables come from maxtext-slurm-facts.md §3 (the toolkit's own triage tables) and from real
MaxText on a TPU v5e chip (reference/tpu/: the HBM out-of-memory at compile, libtpu's
unknown flag). Order matters in `SIGNATURES`: the first matching row wins for a line, so the
specific rows (`HSA_STATUS_ERROR_OUT_OF_RESOURCES` is an OOM; a TPU OOM's
`jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: …` is not a mere Python exception) come
before the general ones (any other `HSA_STATUS_ERROR` is GPU hardware).

`FALSE_POSITIVES` overrides `SIGNATURES`: a line that matches it never becomes a
SignalFact, whatever else it contains. These lines appear in every successful run. (parse
tests a line against it only once a signature matched: the same result, fewer searches.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from sweepd.monitor.facts import FailureClass

Detail = Callable[[re.Match[str]], str | None]

# The heartbeat line is how a hang gets killed, not why: classify ranks it below every
# root cause. Parse marks it with this detail so the rank survives a trip through the store.
HEARTBEAT_DETAIL = "stopped sending heartbeats"
# A bare `Killed` (bash, the kernel) names SIGKILL, not who sent it: the OOM killer, or
# the scheduler ending a cancelled job after its grace period. Classify tells them apart.
KILLED_DETAIL = "killed by SIGKILL"
# A Python exception line (`ValueError: ...`): never a failure on its own (programs log
# handled exceptions), only the evidence that names what a traceback was about.
EXCEPTION_DETAIL = "the exception a traceback ends with"
# An exception that says the trainer's environment is broken (an import, a file, its own
# syntax): like EXCEPTION_DETAIL it names what a traceback was about, and without a
# traceback (Python prints none for a syntax error in the script it runs) it is the cause
# itself, but never above a cause a signature names (a program may log a handled one).
ENV_EXCEPTION_DETAIL = "an exception that says the trainer's environment is broken"


class Signature(NamedTuple):
    needle: str                  # lower-case text any match contains: a cheap first test
    pattern: re.Pattern[str]
    klass: FailureClass
    detail: Detail


def _none(_: re.Match[str]) -> str | None:
    return None


def _group(m: re.Match[str]) -> str | None:
    value = m.group(1)
    return value.strip() if value else None


def _heartbeat(_: re.Match[str]) -> str | None:
    return HEARTBEAT_DETAIL


def _flag_name(m: re.Match[str]) -> str | None:
    # `--xla_foo=1` -> `--xla_foo`: the policy drops the flag by name.
    return m.group(1).split("=", 1)[0].rstrip(".,;") or None


def _absl_flag_name(m: re.Match[str]) -> str | None:
    # absl prints the bare name (`'xla_tpu_foo'`): named as XLA_FLAGS' rows name theirs.
    return f"--{m.group(1)}"


# A size as XLA prints it on TPU (`17.57G`, `512.00M`, `1.5GiB`, `4096B`): bounded digits,
# so `float` never sees a number it cannot hold; no unit is bytes.
_SIZE = r"([0-9]{1,12}(?:\.[0-9]{1,9})?)\s?([KMGTP]i?B?|B|bytes)?"
_GIB = {"K": 2.0 ** -20, "M": 2.0 ** -10, "G": 1.0, "T": 2.0 ** 10, "P": 2.0 ** 20}
# The TPU's out-of-memory lines that name what was needed and what the device had, as
# (needed, available) in one match: groups 1-2 and 3-4 are the two sizes.
TPU_OOM_SIZES: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    # At compile (libtpu 0.0.42): `RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total
    # memory required for HLO temporaries (17.57G) exceeds available HBM (15.75G).`
    rf"Ran out of memory\b[^()]*?\brequired\b[^()]*\(\s*{_SIZE}\s*\)\s*exceeds available\b"
    rf"[^()]*\(\s*{_SIZE}\s*\)",
    # At compile, older libtpu: `Ran out of memory in memory space hbm. Used 20.15G of
    # 15.48G hbm. Exceeded hbm capacity by 4.67G.`
    rf"Ran out of memory in memory space \w+\.\s*Used {_SIZE} of {_SIZE} \w+",
    # At run time: `Error allocating device buffer: Attempting to allocate 8.00G. That was
    # not possible. There are 6.97G free.`
    rf"Attempting to allocate {_SIZE}\. That was not possible\. There are {_SIZE} free",
))


def size_gib(number: str, unit: str | None) -> float:
    """A printed size in GiB (XLA's `G` is GiB; sweepd's GB are the same unit)."""
    if not unit or unit in ("B", "bytes"):
        return float(number) / 2.0 ** 30
    return float(number) * _GIB[unit[0]]


def oom_sizes(line: str) -> tuple[float, float] | None:
    """(needed, available) GiB that a TPU out-of-memory line names, or None."""
    for pattern in TPU_OOM_SIZES:
        m = pattern.search(line)
        if m is not None:
            return size_gib(m.group(1), m.group(2)), size_gib(m.group(3), m.group(4))
    return None


def _needed(m: re.Match[str]) -> str | None:
    # The GPU row's shape (`12.50GiB`), which the model-perf search reads as the size the
    # run was at most short: true of what the program needed, as of a failed allocation.
    return f"{size_gib(m.group(1), m.group(2)):.2f}GiB"


def _sig(
    needle: str, pattern: str, klass: FailureClass, detail: Detail = _none, flags: int = 0
) -> Signature:
    return Signature(needle, re.compile(pattern, flags), klass, detail)


_F = FailureClass
_I = re.IGNORECASE

SIGNATURES: list[Signature] = [
    # GPU out of memory: the allocation size is what the report needs.
    _sig("resource_exhausted", r"RESOURCE_EXHAUSTED:\s*Out of memory while trying to allocate"
         r"\s+(\d+(?:\.\d+)?\s*(?:[KMGTP]i?B|bytes|B)?)", _F.OOM, _group),
    _sig("resource_exhausted", r"RESOURCE_EXHAUSTED:\s*Out of memory", _F.OOM),
    # TPU out of memory (HBM): what was needed and what there was (`oom_sizes`).
    _sig("ran out of memory", TPU_OOM_SIZES[0].pattern, _F.OOM, _needed),
    _sig("ran out of memory", TPU_OOM_SIZES[1].pattern, _F.OOM, _needed),
    _sig("attempting to allocate", TPU_OOM_SIZES[2].pattern, _F.OOM, _needed),
    _sig("resource_exhausted", r"RESOURCE_EXHAUSTED:.*\bRan out of memory\b", _F.OOM,
         flags=_I),
    _sig("out_of_memory", r"OUT_OF_MEMORY", _F.OOM),
    _sig("resourceexhausted", r"ResourceExhausted", _F.OOM),
    _sig("out_of_resources", r"(HSA_STATUS_ERROR_OUT_OF_RESOURCES)", _F.OOM, _group),
    _sig("calloc", r"Failed to CUDA calloc", _F.OOM),
    # GPU hardware (after the OOM rows: OUT_OF_RESOURCES is also an HSA_STATUS_ERROR).
    _sig("hsa_status_error", r"\b(HSA_STATUS_ERROR\w*)", _F.GPU_HARDWARE, _group),
    _sig("rocdevice.cpp", r"rocdevice\.cpp.*\bAborting\b", _F.GPU_HARDWARE),
    # Host OOM: `Killed` only as bash/kernel print it, never inside a sentence.
    _sig("killed", r"^Killed\s*$", _F.HOST_OOM, lambda m: KILLED_DETAIL),
    _sig("killed", r"\bline \d+:\s+\d+ Killed\b", _F.HOST_OOM, lambda m: KILLED_DETAIL),
    _sig("killed process", r"\bKilled process \d+", _F.HOST_OOM),
    _sig("oom", r"\boom[-_]kill", _F.HOST_OOM),
    # ECC: real error reports; zero-count summaries are in FALSE_POSITIVES.
    _sig("ecc", r"\buncorrect(?:able|ed)\b.*\bECC\b|\bECC\b.*\buncorrect(?:able|ed)\b", _F.ECC,
         flags=_I),
    _sig("ecc", r"\bECC (?:error|failure)s?\b", _F.ECC, flags=_I),
    # Bad XLA flag: the flag name is the detail.
    _sig("unknown flag", r"parse_flags_from_env\.cc.*?Unknown flags?(?: in \w+)?:\s*(\S+)",
         _F.UNKNOWN_FLAG, _flag_name),
    _sig("unknown flag", r"\bUnknown flags?(?: in XLA_FLAGS)?:\s*(--xla_\S+)", _F.UNKNOWN_FLAG,
         _flag_name),
    # libtpu's flags (LIBTPU_INIT_ARGS), parsed by absl at start: `ERROR: Unknown command
    # line flag 'xla_tpu_foo'` (absl may add `. Did you mean: …?`), then the process ends.
    _sig("unknown command line flag", r"\bUnknown command line flag '([A-Za-z0-9_]{1,200})'",
         _F.UNKNOWN_FLAG, _absl_flag_name),
    # MaxText refuses an override its config does not define before anything runs (upstream
    # e591f30 on the TPU chip, the GPU toolkit's heartbeat key): `ValueError: 'KEY' not in
    # 'a', 'b', ...`, every field named (thousands of characters). The same on every node.
    _sig("' not in '", r"^ValueError: '([A-Za-z0-9_]{1,200})' not in '", _F.CONFIG,
         lambda m: f"MaxText does not know the override {m.group(1)}"),
    # Before training.
    _sig("pull failed", r"\[ERROR\] Pull failed for\s*(\S*)", _F.PULL, _group),
    _sig("no gpu devices", r"WARNING: No GPU devices detected", _F.NO_GPU),
    _sig("nccl_socket_ifname", r"NCCL FATAL\b.*Failed to auto-detect NCCL_SOCKET_IFNAME", _F.NIC),
    _sig("ionic_comp_msn", r"ionic_comp_msn\b.*cqe with error", _F.NIC),
    _sig("free port", r"FATAL: Could not find a free port", _F.CONFIG, lambda m: "no free port"),
    _sig("!!! unknown model", r"!!! Unknown model:\s*(\S*)", _F.CONFIG, _group),
    _sig("!!! model name", r"!!! Model name resolution failed", _F.CONFIG,
         lambda m: "model name resolution failed"),
    # Outside the job: git server and Slurm controller outages.
    _sig("internal server error", r"remote: Internal Server Error", _F.CHECKOUT_OUTAGE),
    _sig("rpc failed", r"RPC failed; HTTP (5\d\d)", _F.CHECKOUT_OUTAGE,
         lambda m: f"HTTP {m.group(1)}"),
    _sig("slurm_load_jobs", r"slurm_load_jobs error: Connection refused", _F.CONTROLLER_DOWN),
    # Compile.
    _sig("failed to compile", r"INTERNAL: Failed to compile", _F.COMPILE),
    _sig("xla compilation failed", r"XLA compilation failed", _F.COMPILE),
    # Collectives and coordination (usually consequences; classify ranks them low).
    _sig("nccl warn", r"NCCL WARN\b.*\bTimeout\b", _F.COLLECTIVE_TIMEOUT),
    _sig("ncclsystemerror", r"\bncclSystemError\b", _F.COLLECTIVE_TIMEOUT),
    _sig("timeout waiting for", r"\bTimeout waiting for\b", _F.COLLECTIVE_TIMEOUT),
    _sig("deadline_exceeded", r"DEADLINE_EXCEEDED: GetKeyValue\(\) timed out", _F.COORD_TIMEOUT),
    _sig("heartbeats", r"The following tasks are unhealthy \(stopped sending heartbeats\)",
         _F.COORD_TIMEOUT, _heartbeat),
    # The trainer cannot start (its environment, not the swept value: the same at every
    # value). The interpreter's and the shell's own lines, and the local backend's wrapper.
    _sig("can't open file", r"^(?:\S*/)?python[\d.]*: can't open file '([^']{1,500})'",
         _F.ENVIRONMENT, lambda m: f"python cannot open the trainer's script {m.group(1)}"),
    _sig("no module named", r"^(?:\S*/)?python[\d.]*: No module named (\S{1,500})",
         _F.ENVIRONMENT, lambda m: f"python has no module {m.group(1)}"),
    _sig("error while finding module specification",
         r"^(?:\S*/)?python[\d.]*: Error while finding module specification for "
         r"'([^']{1,500})'", _F.ENVIRONMENT,
         lambda m: f"python cannot find the trainer's module {m.group(1)}"),
    _sig("not found", r"^\S+: (?:line )?\d+: (\S{1,500}): (?:command )?not found$",
         _F.ENVIRONMENT, lambda m: f"the shell cannot find the command {m.group(1)}"),
    _sig("command not found", r"^\S+: (\S{1,500}): command not found$", _F.ENVIRONMENT,
         lambda m: f"the shell cannot find the command {m.group(1)}"),
    _sig("sweepd local backend: cannot start",
         r"^sweepd local backend: cannot start (\S{1,500}): ", _F.ENVIRONMENT,
         lambda m: f"the train command {m.group(1)} cannot be started"),
    # An import, a missing file, a syntax error in the trainer: the exception a traceback
    # ends with (or, for the script Python runs, the whole report: no traceback line).
    _sig("error: ", r"^(?:ModuleNotFoundError|ImportError|SyntaxError|IndentationError|"
         r"TabError|FileNotFoundError): \S", _F.ENVIRONMENT, lambda m: ENV_EXCEPTION_DETAIL),
    # Python: generic, the specific error usually follows the traceback.
    _sig("traceback", r"^Traceback \(most recent call last\):", _F.PYTHON),
    _sig("error: ", r"^[A-Za-z_][\w.]*Error: \S", _F.PYTHON, lambda m: EXCEPTION_DETAIL),
    _sig("exception: ", r"^[A-Za-z_][\w.]*Exception: \S", _F.PYTHON,
         lambda m: EXCEPTION_DETAIL),
]

FALSE_POSITIVES: list[re.Pattern[str]] = [
    re.compile(p, flags)
    for p, flags in [
        (r"Failed call to cuInit: UNKNOWN ERROR \(303\)", 0),
        (r"INTERNAL: CUDA error", 0),
        (r"NCCL WARN MSCCL\+\+: Feature not enabled", 0),
        (r"NCCL WARN LL cutoff points not detected for a supported arch", 0),
        (r"WARNING: AMD GPU device\(s\) is/are in a low-power state", 0),
        (r"Token indices sequence length is longer than the specified maximum sequence length", 0),
        (r"OCI runtime exec failed", 0),
        # The clean-SIGTERM teardown after a scancel.
        (r"^srun: error: \S+: task \d+: Exited with exit code 143\b", 0),
        (r"^srun: Terminating StepId=", 0),
        # Zero-count ECC summaries are health reports, not errors.
        (r"\b(?:0|no|zero)\s+(?:\w+\s+)?ECC (?:error|failure)s?\b", re.IGNORECASE),
        (r"\bECC (?:error|failure)s?\s*[:=]\s*0\b", re.IGNORECASE),
        (r"\bECC\b.*\b(?:0|no|zero)\s+uncorrect(?:able|ed)\s+(?:\w+\s+)?errors?\b", re.IGNORECASE),
    ]
]

# Stage banners that are failures by themselves (other failing banners, e.g.
# `== Training FAILED`, only repeat what an earlier line said).
FAILING_BANNERS: dict[tuple[str, str], FailureClass] = {
    ("Docker pull", "TIMEOUT"): _F.PULL,
    ("Docker pull", "FAILED"): _F.PULL,
    ("Preflight", "TIMEOUT"): _F.PULL,
    ("ECC check", "FAILED"): _F.ECC,
    ("ECC check", "TIMEOUT"): _F.ECC,
}


def is_false_positive(line: str) -> bool:
    return any(p.search(line) for p in FALSE_POSITIVES)


def match_signature(line: str) -> tuple[FailureClass, str | None] | None:
    """The class and detail of the first signature row that matches `line`, if any."""
    # Most lines match nothing; a substring test per row is far cheaper than a regex search.
    lowered = line.lower()
    for sig in SIGNATURES:
        if sig.needle not in lowered:
            continue
        m = sig.pattern.search(line)
        if m is not None:
            return sig.klass, sig.detail(m)
    return None
