"""Reaching a node's own shell: the xla-tuning SKILL.md's recovery primitives (recent
`dmesg`, `rocm-smi` temperatures and XGMI errors, the ionic NIC reset, `ibstat`), each
over a configurable ssh command and bounded in time.

A call that fails (ssh refused, a timeout, a missing tool) is an answer too: it comes back
as a `Probe` that says so, never as an exception, so a fault is handled whether or not the
node can be reached. Reading the outputs is pure (`recent_dmesg`, `rocm_summary`,
`ib_active`): the fake ssh of the simulated cluster and a real node are read alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass

NODE = "{node}"
# The seed's commands (xla-tuning.SKILL.md "Recovery primitives"). dmesg is filtered here,
# not with a remote grep: no match is then an empty answer, not grep's exit 1.
DMESG = "dmesg -T | tail -n 100"
DMESG_PATTERN = re.compile(r"oom|kill|fault|reset|amdgpu|hsa|ionic", re.IGNORECASE)
ROCM_SMI = "rocm-smi --showtemp; rocm-smi --showxgmierr 2>/dev/null"
IBSTAT = "ibstat"
NIC_RESET = "rmmod ionic_rdma; rmmod ionic; sleep 3; modprobe ionic; modprobe ionic_rdma; sleep 5"
# Most lines of one command's output kept as evidence (a stop message must stay readable).
KEEP_LINES = 20

_TEMP = re.compile(r"GPU\[(\d+)\].*Temperature \(Sensor ([^)]*)\) \(C\):\s*([\d.]+)")
_XGMI = re.compile(r"GPU\[(\d+)\].*XGMI[^:]*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_IB_STATE = re.compile(r"^\s*State:\s*(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Probe:
    """One command's answer: `ok` False with `out` saying why (timeout, exit code)."""

    ok: bool
    out: str


def ssh_argv(ssh: Sequence[str], node: str, command: str) -> list[str]:
    """The ssh words with `{node}` filled in, then the remote command as one word (ssh
    hands it to the node's shell)."""
    return [w.replace(NODE, node) for w in ssh] + [command]


async def run_on(ssh: Sequence[str], node: str, command: str, timeout_s: float) -> Probe:
    """Run `command` on `node`, killed (its whole process group) after `timeout_s` wall
    seconds: a hung ssh must never hold the engine's pass."""
    argv = ssh_argv(ssh, node, command)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as e:
        return Probe(False, f"could not start {argv[0]}: {e.strerror or e}")
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return Probe(False, f"no answer within {timeout_s:g} s (killed)")
    text = out.decode("utf-8", "replace")
    if proc.returncode != 0:
        why = (err.decode("utf-8", "replace").strip() or text.strip()).splitlines()
        return Probe(False, f"exit {proc.returncode}" + (f": {why[-1]}" if why else ""))
    return Probe(True, text)


def recent_dmesg(out: str) -> list[str]:
    """The dmesg lines the seed's pattern picks (oom/kill/fault/reset/amdgpu/hsa/ionic),
    the latest KEEP_LINES of them."""
    return [line.rstrip() for line in out.splitlines() if DMESG_PATTERN.search(line)][-KEEP_LINES:]


def rocm_summary(out: str) -> list[str]:
    """rocm-smi's temperatures (the hottest sensor per GPU) and any GPU whose XGMI error
    count is not zero, one line each."""
    hottest: dict[int, tuple[float, str]] = {}
    for gpu, sensor, value in _TEMP.findall(out):
        t = float(value)
        if int(gpu) not in hottest or t > hottest[int(gpu)][0]:
            hottest[int(gpu)] = (t, sensor)
    lines = []
    if hottest:
        top = max(hottest, key=lambda g: hottest[g][0])
        lines.append("temperatures (C): " + ", ".join(
            f"GPU[{g}] {hottest[g][0]:g}" for g in sorted(hottest))
            + f"; hottest GPU[{top}] {hottest[top][0]:g} ({hottest[top][1]})")
    errors = [(int(g), v) for g, v in _XGMI.findall(out)
              if v.strip().lower() not in ("0", "no errors", "none", "n/a")]
    counts = [line for line in out.splitlines() if _XGMI.search(line)]
    if errors:
        lines.append("XGMI errors: " + ", ".join(f"GPU[{g}] {v}" for g, v in errors))
    elif counts:
        lines.append(f"XGMI errors: none on {len(counts)} GPU(s)")
    return lines or ["rocm-smi printed no temperature or XGMI line"]


def ib_active(out: str) -> tuple[bool, str]:
    """Every port ibstat lists is `State: Active` (the seed's check after a NIC reset):
    (all active, `n/m ports Active`)."""
    states = _IB_STATE.findall(out)
    active = sum(1 for s in states if s == "Active")
    return bool(states) and active == len(states), f"{active}/{len(states)} ports Active"


def ib_ports(out: str) -> str:
    """ibstat's adapter and state lines (the seed's `grep -E "^CA |State:"`)."""
    return "\n".join(line.rstrip() for line in out.splitlines()
                     if line.startswith("CA ") or "State:" in line)


def tail(text: str, lines: int = KEEP_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
