"""A fake MaxText trainer for the local backend's tests, written by the test into its tmp
directory: it prints MaxText-like lines (the compiled-memory line, `completed step: N, ...`
for steps 0..steps-1) and behaves as FAKE_MODE says (pass, oom, hang, child, slow; import:
ModuleNotFoundError at start; kill9: SIGKILL at step 3; crash: a silent exit 1 there; linger:
asleep after its last step); with
`profiler=xplane` its steps 10-14 read as the profiler's start and stop did on the TPU chip.
Every start is appended to $FAKE_STARTS (pid and argv), so a test counts the processes a run had.
Its memory grows with per_device_batch_size: over FAKE_LIMIT_GB it prints XLA's OOM line at
compile and exits 1, as MaxText does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TRAINER = r'''
import os, subprocess, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
mode = os.environ.get("FAKE_MODE", "pass")
starts = os.environ.get("FAKE_STARTS")
if starts:
    with open(starts, "a") as f:
        flags = os.environ.get("LIBTPU_INIT_ARGS", "")
        f.write(f"{os.getpid()} {' '.join(sys.argv[1:])} flags={flags}\n")
if mode == "import":   # a broken environment: the trainer dies importing what it needs
    raise ModuleNotFoundError("No module named 'jax'")
batch = int(args.get("per_device_batch_size", "2"))
steps = int(args.get("steps", "15"))
limit = float(os.environ.get("FAKE_LIMIT_GB", "14.0"))
step_s = float(os.environ.get("FAKE_STEP_S", "0.02"))
print("I1206 00:23:09 pyconfig.py:584] Config param per_device_batch_size:", batch, flush=True)
if mode == "child":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["FAKE_CHILD"], "w") as f:
        f.write(str(child.pid))
total = 1.0 + 1.5 * batch
if mode == "oom" or total > limit:
    print(f"jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
          f"allocate {total:.2f}G", flush=True)
    sys.exit(1)
temp, arg = 1.5 * batch, 1.0
print(f"Total memory size: {total:.1f} GB, Output size: {arg:.1f} GB, Temp size: {temp:.1f} GB, "
      f"Argument size: {arg:.1f} GB, Host temp size: 0.0 GB.", flush=True)
tgs = 10000.0 * (batch - 0.08 * batch * batch)
# With the profiler on, steps 10-14 read as upstream MaxText's did on the TPU chip (its
# start and stop: 0.46x, 17.7x, 1x, 0.16x, 21x the others).
profiled = {10: 0.46, 11: 17.7, 13: 0.16, 14: 21.0} if args.get("profiler") == "xplane" else {}
for step in range(steps):
    if mode in ("hang", "child") and step == 5:
        time.sleep(600)
    if mode in ("kill9", "crash") and step == 3:   # `kill -9`; an exit that says nothing
        os.kill(os.getpid(), 9) if mode == "kill9" else sys.exit(1)
    time.sleep(step_s if mode != "slow" else 0.5)
    print(f"completed step: {step}, seconds: {step_s:.3f}, TFLOP/s/device: 60.000, "
          f"Tokens/s/device: {tgs * profiled.get(step, 1.0):.3f}, total_weights: 2048, "
          f"loss: {10 - step * 0.3:.3f}", flush=True)
if mode == "linger":   # a slow teardown after the last step (a checkpoint, a profile)
    time.sleep(600)
sys.exit(0)
'''


def write_trainer(tmp_path: Path) -> Path:
    path = tmp_path / "fake_train.py"
    path.write_text(TRAINER)
    return path


def train_command(trainer: Path) -> str:
    return f"{sys.executable} {trainer}"


def local_config_text(tmp_path: Path, trainer: Path, env: dict[str, str] | None = None,
                      **policy: Any) -> str:
    """A config for the local backend over the fake trainer, with test-sized thresholds;
    `env`: the jobs' configured environment (the fake trainer's FAKE_* settings)."""
    table = ", ".join(f'{k} = "{v}"' for k, v in (env or {}).items())
    knobs = {"poll_interval_s": 0.3, "hang_timeout_s": 3, "tail_backoff_max_s": 1, **policy}
    lines = [
        "[daemon]", f'state_dir = "{tmp_path / "state"}"',
        f'socket = "{tmp_path / "sweepd.sock"}"', "tick_s = 0.1", "hang_floor_wall_s = 1.0",
        "", "[cluster]", 'backend = "local"', "gpus_per_node = 1", "gpu_memory_gib = 16",
        "", "[cluster.local]", f'train_command = "{train_command(trainer)}"', 'node = "box1"',
        "cancel_grace_s = 2", f'lock = "{tmp_path / "slot.lock"}"', f'workdir = "{tmp_path}"',
        f"env = {{{table}}}",
        "", "[policy]", *(f"{k} = {v}" for k, v in knobs.items()), ""]
    return "\n".join(lines)


def starts(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
