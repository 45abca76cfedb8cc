"""Line formats of a maxtext-slurm job log (maxtext-slurm-facts.md §2), as pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence

import hostlist

SUMMARY_RULE = "=" * 26 + " JOB SUMMARY " + "=" * 26
SUMMARY_END = "=" * 65
GREEN, RED, YELLOW, RESET = "\x1b[1;32m", "\x1b[1;31m", "\x1b[1;33m", "\x1b[0m"
CANCEL_EXITS = (130, 143)


def header_lines(job_id: str, job_name: str, model: str, nodes: Sequence[str],
                 passthrough: Sequence[str]) -> list[str]:
    return [
        f"JOB_ID={job_id}",
        f"JOB_NAME={job_name}",
        f"NNODES={len(nodes)}",
        f"JOB_NODELIST={hostlist.collect_hostlist(list(nodes))}",
        f'PASSTHROUGH_ARGS="{" ".join(passthrough)}"',
        f"MODEL_NAME={model}",
    ]


def banner(stage: str, status: str, detail: str) -> str:
    """`== Preflight BEGIN (timeout=900s) ==`, `== ECC check FAILED (exit=1, 12s) ==`."""
    return f"== {stage} {status} ({detail}) =="


def wall(seconds: float) -> str:
    total = max(0, round(seconds))
    return f"{total // 3600}h {total % 3600 // 60}m {total % 60}s"


def status_text(exit_code: int, failure: str | None) -> str:
    if exit_code == 0:
        return f"{GREEN}SUCCESS (exit 0){RESET}"
    if exit_code in CANCEL_EXITS:
        return f"{YELLOW}CANCELLED (scancel / SIGTERM){RESET}"
    return f"{RED}FAILED (exit {exit_code}){RESET}" + (f" — {failure}" if failure else "")


def summary_lines(job_id: str, job_name: str, model: str, nodes: Sequence[str],
                  wall_seconds: float, exit_code: int, failure: str | None,
                  cluster_start: float | None = None) -> list[str]:
    # The simulated cluster's own clock (`cluster_line`): when the job ran in cluster time.
    clock = [] if cluster_start is None else [cluster_line(cluster_start,
                                                           cluster_start + wall_seconds)]
    return [
        SUMMARY_RULE,
        f"  Job:    {job_id} ({job_name})",
        f"  Model:  {model}",
        f"  Nodes:  {hostlist.collect_hostlist(list(nodes))}",
        f"  Wall:   {wall(wall_seconds)}",
        *clock,
        f"  Status: {status_text(exit_code, failure)}",
        SUMMARY_END,
    ]


# The simulated cluster's clock is not the machine's: a job ran from its start (its
# submission, or the end of the job it queued behind) for its planned duration, in cluster
# seconds since the simulated cluster's first job. Only the simulator prints it; the
# monitor reads it (`monitor.parse.CLUSTER_TIME`).
def cluster_line(start: float, end: float) -> str:
    return f"  Cluster time: {start:.3f}s to {end:.3f}s"


def step_line(step: int, seconds: float, tflops: float, mfu: float, tgs: float,
              total_weights: int, loss: float) -> str:
    return (f"completed step: {step}, seconds: {seconds:.3f}, TFLOP/s/device: {tflops:.3f}, "
            f"MFU: {mfu:.2f}%, Tokens/s/device: {tgs:.3f}, total_weights: {total_weights}, "
            f"loss: {loss:.3f}")


def memstats_lines(used_gb: float, limit_gb: float, device: str = "rocm:0",
                   digits: int = 1) -> list[str]:
    """`digits`: 2 where one would move the pool (a TPU's 15.75 GiB reads 15.8 at one)."""
    pct = 100 * used_gb / limit_gb
    return ["Memstats: After params initialized:",
            f"\tUsing (GB) {used_gb:.{digits}f} / {limit_gb:.{digits}f} ({pct:.2f}%) on "
            f"{device}"]


def oom_line(alloc_gib: float) -> str:
    """XLA's out-of-memory error as a GPU run prints it: the allocation that failed."""
    return (f"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory "
            f"while trying to allocate {alloc_gib:.2f}GiB.")


# The TPU forms (a replayed chip run's `log_format: tpu`; /work/shared/reference/tpu's
# raw logs): absl's prefix, the estimate line, the HBM out-of-memory error.
_TPU_PREFIX = "I1206 00:23:30.731024 139325610507136"


def tpu_memory_line(total_gb: float, output_gb: float, temp_gb: float,
                    argument_gb: float) -> str:
    return (f"{_TPU_PREFIX} max_utils.py:820] Total estimated memory size: {total_gb:.1f} GB, "
            f"estimated output size: {output_gb:.1f} GB, estimated temp size: {temp_gb:.1f} "
            f"GB, estimated argument size: {argument_gb:.1f} GB, Estimated host temp size: "
            "0.0 GB.")


def tpu_oom_line(required_gib: float, available_gib: float) -> str:
    return ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the "
            f"total memory required for HLO temporaries ({required_gib:.2f}G) exceeds "
            f"available HBM ({available_gib:.2f}G).")


def tpu_step_line(step: int, seconds: float, tflops: float, tgs: float, total_weights: int,
                  loss: float) -> str:
    return (f"{_TPU_PREFIX} metric_logger.py:230] completed step: {step}, seconds: "
            f"{seconds:.3f}, TFLOP/s/device: {tflops:.3f}, Tokens/s/device: {tgs:.3f}, "
            f"total_weights: {total_weights}, loss: {loss:.3f}, lm_loss: {loss:.3f}, "
            f"perplexity: {math.exp(loss):.3f}")


def compiled_memory_line(output_gb: float, temp_gb: float, argument_gb: float,
                         host_temp_gb: float = 0.0) -> str:
    """MaxText's print after compilation (xla-tuning-facts.md, "Logs that matter")."""
    total = output_gb + temp_gb + argument_gb
    return (f"Total memory size: {total:.1f} GB, Output size: {output_gb:.1f} GB, "
            f"Temp size: {temp_gb:.1f} GB, Argument size: {argument_gb:.1f} GB, "
            f"Host temp size: {host_temp_gb:.1f} GB.")


def mfu_line(gpu: str, peak_tflops: float) -> str:
    return (f"[MFU] MFU tracking enabled (gpu={gpu}, dtype=bf16, peak={peak_tflops:g} TFLOP/s, "
            f"source=builtin table)")


def node_exit(host: str, exit_code: int) -> str:
    return f"NODE_EXIT host={host} exit={exit_code}"
