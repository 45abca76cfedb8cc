"""A fake MaxText on one TPU v5e chip, for a new user's path on the local backend: it prints the
lines real MaxText printed on the chip (shared/reference/tpu/, tests/fixtures/tpu_v5e/) for a
model sweepd has no shape for, with memory that grows with `per_device_batch_size`:

- `TFRT TPU v5 lite`, the absl-prefixed `Config param` lines;
- the compiled memory as MaxText's max_utils prints it on TPU (`Total estimated memory size:
  …, estimated temp size: …`), then `Memstats: After params initialized:` and `Using (GB)
  3.01 / 15.75 (…%) on TPU_0(…)`: the chip's pool;
- over the chip's HBM, the compile-time out-of-memory with its own sizes (`RESOURCE_EXHAUSTED:
  Ran out of memory on HBM, the total memory required for HLO temporaries (19.02G) exceeds
  available HBM (15.75G).`), exit 1, as maxtext-oom.log;
- steps 0-14 as `metric_logger.py:230] completed step: N, seconds: …, Tokens/s/device: …`.

Memory (GB, the chip's figures for the 0.27 B model, reference/tpu): arguments 3.0, temp
1.18 + 0.219 x batch (batch 1: total 4.4; batch 48: 14.7); the run needs what the estimate
says, so it fits up to TPU_FAKE_FITS (52 by default on 15.75 GB). TGS rises and saturates,
then falls past TPU_FAKE_PEAK; TPU_FAKE_TGS names another curve. Every start is appended to
$FAKE_STARTS. Standard library only."""

from __future__ import annotations

import sys
from pathlib import Path

TRAINER = r'''
import os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
starts = os.environ.get("FAKE_STARTS")
if starts:
    with open(starts, "a") as f:
        f.write(f"{os.getpid()} {' '.join(sys.argv[1:])}\n")
batch = int(args.get("per_device_batch_size", "2"))
steps = int(args.get("steps", "15"))
hbm = float(os.environ.get("TPU_FAKE_HBM_GB", "15.75"))
arg = float(os.environ.get("TPU_FAKE_ARG_GB", "3.0"))
temp0 = float(os.environ.get("TPU_FAKE_TEMP0_GB", "1.18"))
slope = float(os.environ.get("TPU_FAKE_SLOPE_GB", "0.219"))
peak = float(os.environ.get("TPU_FAKE_PEAK", "24"))
t = "I1206 00:23:%02d.000000 139325610507136"
print("/opt/device-scrub/jax/_src/cloud_tpu_init.py:88: UserWarning: Transparent hugepages "
      "are not enabled.", flush=True)
print(f"{t % 9} pyconfig.py:584] Config param hardware: tpu", flush=True)
print(f"{t % 9} pyconfig.py:584] Config param per_device_batch_size: {batch}", flush=True)
print(f"{t % 9} pyconfig.py:584] Config param steps: {steps}", flush=True)
print("TFRT TPU v5 lite", flush=True)
temp = temp0 + slope * batch
total = arg + temp
# What the run needs against what its compiled-memory line estimates: above 1 the line
# under-states (runtime buffers, fragmentation), so a batch it says fits runs out.
need = total * float(os.environ.get("TPU_FAKE_NEED", "1.0"))
if need > hbm:
    print("Traceback (most recent call last):", flush=True)
    print('  File "/opt/device-scrub/jax/_src/compiler.py", line 353, in '
          "backend_compile_and_load", flush=True)
    print("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total "
          f"memory required for HLO temporaries ({need:.2f}G) exceeds available HBM "
          f"({hbm:.2f}G).", flush=True)
    sys.exit(1)
print(f"{t % 30} max_utils.py:820] Total estimated memory size: {total:.1f} GB, estimated "
      f"output size: {arg:.1f} GB, estimated temp size: {temp:.1f} GB, estimated argument "
      f"size: {arg:.1f} GB, Estimated host temp size: 0.0 GB.", flush=True)
print(f"{t % 30} max_utils.py:826] Note that compiler could over-estimate the HBM usage.",
      flush=True)
print("Memstats: After params initialized:", flush=True)
print(f"{t % 32} max_utils.py:785] \tUsing (GB) 3.01 / {hbm:.2f} "
      f"({301 / hbm:.6f}%) on TPU_0(process=0,(0,0,0,0))", flush=True)
curve = os.environ.get("TPU_FAKE_TGS", "saturating")
if curve == "saturating":
    tgs = 64000.0 * batch / (batch + 1.5) * (1 - 0.002 * max(0.0, batch - peak))
else:
    tgs = float(eval(curve, {"b": batch}))
for step in range(steps):
    seconds = batch * 2048 / tgs
    print(f"{t % 33} metric_logger.py:230] completed step: {step}, seconds: {seconds:.3f}, "
          f"TFLOP/s/device: 67.000, Tokens/s/device: {tgs:.3f}, total_weights: {2048 * batch}, "
          f"loss: {10 - step * 0.3:.3f}, lm_loss: {10 - step * 0.3:.3f}", flush=True)
sys.exit(0)
'''


def write_tpu_trainer(folder: Path) -> Path:
    path = folder / "fake_maxtext_tpu.py"
    path.write_text(TRAINER)
    return path


def train_command(trainer: Path) -> str:
    return f"{sys.executable} {trainer}"
