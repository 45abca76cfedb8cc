"""What the monitor reads out of a log: one typed fact per interesting line.

`parse.parse_line` turns a raw line into one of these (or None); `classify.classify`
turns a job's recorded facts into one FailureClass. Both are pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureClass(StrEnum):
    OOM = "oom"                              # device out of memory (its sizes recorded)
    GPU_HARDWARE = "gpu_hardware"            # HSA_STATUS_ERROR / rocdevice.cpp: Aborting
    ECC = "ecc"                              # ECC errors in preflight
    NODE_CRASH = "node_crash"                # one node exits non-zero, others fine
    CONFIG = "config"                        # all nodes fail the same way; bad model name
    UNKNOWN_FLAG = "unknown_flag"            # XLA_FLAGS / libtpu: an unknown flag
    ENVIRONMENT = "environment"              # the trainer cannot start: import, file, syntax
    COLLECTIVE_TIMEOUT = "collective_timeout"  # NCCL WARN Timeout / ncclSystemError
    COORD_TIMEOUT = "coord_timeout"          # DEADLINE_EXCEEDED: GetKeyValue() timed out
    RCCL_FLAKE = "rccl_flake"                # hang before Memstats (RCCL/IB init)
    NIC = "nic"                              # ionic_comp_msn cqe with error / NCCL_SOCKET_IFNAME
    CONTROLLER_DOWN = "controller_down"      # slurm_load_jobs error: Connection refused
    CHECKOUT_OUTAGE = "checkout_outage"      # remote: Internal Server Error / HTTP 5xx
    HOST_OOM = "host_oom"                    # Killed / oom-kill / NODE_EXIT exit=137
    COMPILE = "compile"                      # INTERNAL: Failed to compile
    PULL = "pull"                            # [ERROR] Pull failed for / stage TIMEOUT
    NO_GPU = "no_gpu"                        # WARNING: No GPU devices detected
    PYTHON = "python"                        # Traceback (most recent call last):
    HANG = "hang"                            # no output for the hang timeout while RUNNING
    CANCELLED = "cancelled"                  # scancel / SIGTERM, exit 130 or 143; preempted
    LOG_LOST = "log_lost"                    # exit 0, but no log to measure it from
    UNKNOWN = "unknown"                      # nothing recognised: reported with the log tail


class Phase(StrEnum):
    """How far a job got, as the log shows it. Ordered."""

    PROLOG = "prolog"          # no log yet
    PREFLIGHT = "preflight"    # log exists, before Memstats
    COMPILE = "compile"        # Memstats seen, no `completed step: 0` yet
    TRAINING = "training"      # step 0 completed
    SUMMARY = "summary"        # JOB SUMMARY block seen


@dataclass(frozen=True)
class StepFact:
    rank: int | None
    step: int
    tgs: float
    seconds: float | None = None
    tflops: float | None = None
    mfu: float | None = None      # percent, e.g. 23.07
    loss: float | None = None


@dataclass(frozen=True)
class MemstatsFact:
    rank: int | None
    used_gb: float
    limit_gb: float


@dataclass(frozen=True)
class CompiledMemoryFact:
    """MaxText's compiled memory, printed after compilation (xla-tuning-facts.md). GB as
    printed; temp grows about linearly with the batch, the rest does not."""

    rank: int | None
    total_gb: float
    output_gb: float
    temp_gb: float
    argument_gb: float
    host_temp_gb: float


@dataclass(frozen=True)
class HeaderFact:
    key: str      # JOB_ID, JOB_NAME, NNODES, JOB_NODELIST, PASSTHROUGH_ARGS, MODEL_NAME
    value: str


@dataclass(frozen=True)
class BannerFact:
    stage: str    # "Preflight", "Docker pull", "ECC check", "Training"
    status: str   # BEGIN, END, TIMEOUT, FAILED
    detail: str


@dataclass(frozen=True)
class NodeExitFact:
    host: str
    exit_code: int


@dataclass(frozen=True)
class SummaryFact:
    status: str            # SUCCESS, FAILED, CANCELLED
    exit_code: int | None
    detail: str


@dataclass(frozen=True)
class ClusterTimeFact:
    """When the job ran on the cluster's own clock, in its seconds (a JOB SUMMARY's
    `Cluster time: <start>s to <end>s`, printed where that clock is not the machine's: the
    simulated cluster's)."""

    start: float
    end: float


@dataclass(frozen=True)
class SignalFact:
    """A line that matches a failure signature (false positives already filtered)."""

    rank: int | None
    klass: FailureClass
    text: str
    detail: str | None = None    # e.g. "12.50GiB" for an OOM allocation
    # An out-of-memory line that names both: what the program needed and what the device
    # had (GiB; TPU: `the total memory required for HLO temporaries (17.57G) exceeds
    # available HBM (15.75G)`). `detail` is then the required size, in the GPU OOM's
    # shape (`12.50GiB`): the run was at most that short, as a failed allocation is.
    required_gb: float | None = None
    available_gb: float | None = None


LineFact = (
    StepFact | MemstatsFact | CompiledMemoryFact | HeaderFact | BannerFact | NodeExitFact
    | SummaryFact | ClusterTimeFact | SignalFact
)


@dataclass(frozen=True)
class Verdict:
    """Classification of a finished or stuck job."""

    klass: FailureClass | None     # None: the job succeeded
    node: str | None = None        # the node the evidence points at, when one does
    evidence: str | None = None    # the log line (or scheduler fact) that proved it
    detail: str | None = None
