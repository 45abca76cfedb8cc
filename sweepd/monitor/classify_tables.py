"""The tables classification reads (`classify.classify`): how strong each kind of evidence
is, what a hang is in each phase, the exit codes of a stop and of a kill, which classes name
no node or become a config error on every node, and the scheduler states that name a cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

from sweepd.monitor.facts import FailureClass, Phase

_F = FailureClass

CANCEL_EXITS = frozenset({130, 143})      # SIGINT / SIGTERM: a stop, not a failure
BENIGN_EXITS = CANCEL_EXITS | {0}
OOM_KILL_EXIT = 137                      # SIGKILL: the kernel OOM killer (or a hard kill)


class Tier(IntEnum):
    """Lower is stronger. Within a tier the earliest evidence wins."""

    ROOT = 0        # a signature that names its own cause
    CRASH = 1       # a node exited non-zero while the others went on
    PYTHON = 2      # a bare traceback: the specific error line usually follows it
    HANG = 3        # the caller saw no output for the hang timeout
    TIMEOUT = 4     # collective / coordination timeouts: usually another node's failure
    HEARTBEAT = 5   # the heartbeat kill: how a hang ends, never why
    ALL_EXITED = 6  # every node exited alike and nothing says why: the config


SIGNAL_TIER: Mapping[FailureClass, Tier] = {
    _F.PYTHON: Tier.PYTHON,
    _F.COLLECTIVE_TIMEOUT: Tier.TIMEOUT,
    _F.COORD_TIMEOUT: Tier.TIMEOUT,
}  # every other class is Tier.ROOT

# Hang phase -> (class, detail), batch-sweep.SKILL.md "Hang detection".
HANG_BY_PHASE: Mapping[Phase, tuple[FailureClass, str]] = {
    Phase.PROLOG: (_F.RCCL_FLAKE, "hang before Memstats (RCCL/IB init)"),
    Phase.PREFLIGHT: (_F.RCCL_FLAKE, "hang before Memstats (RCCL/IB init)"),
    Phase.COMPILE: (_F.OOM, "silent OOM during XLA compile (hang after Memstats, before step 0)"),
    Phase.TRAINING: (_F.HANG, "hang after step 0 (RCCL error mid-training)"),
    Phase.SUMMARY: (_F.HANG, "hang after the job summary"),
}

# Failures that point at one node, unless every node shows them: then it is the config.
ALL_NODES_MEANS_CONFIG = frozenset({_F.GPU_HARDWARE, _F.PYTHON, _F.NODE_CRASH})

# Failures that are not any node's fault: the verdict names no node.
NOT_A_NODE = frozenset({_F.CONFIG, _F.UNKNOWN_FLAG, _F.ENVIRONMENT, _F.CHECKOUT_OUTAGE,
                        _F.CONTROLLER_DOWN})

PREEMPTED = "preempted by the scheduler"
# Scheduler states that name a cause when the log names none.
SCHEDULER_CAUSE: Mapping[str, tuple[FailureClass, str]] = {
    "PREEMPTED": (_F.CANCELLED, PREEMPTED),
    "NODE_FAIL": (_F.NODE_CRASH, "the scheduler says NODE_FAIL"),
    "OUT_OF_MEMORY": (_F.HOST_OOM, "the scheduler says OUT_OF_MEMORY (host memory)"),
}
