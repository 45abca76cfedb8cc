"""A node fault's evidence and the NIC reset (the xla-tuning SKILL.md's recovery
primitives), stored before anything acts on them.

On a node fault the node's scheduler record (`scontrol show node`), its recent `dmesg`
lines (the seed's oom/kill/fault/reset/amdgpu/hsa/ionic pattern) and `rocm-smi`'s
temperatures and XGMI errors are gathered, concurrently and each bounded by
`recovery.timeout_s`, and stored as a `node.evidence` event. The decision that follows (an
exclusion, a stop message) reads them back from the store, never from memory, so a restart
that concludes the same job again finds them there and does not ask the node twice.

A NIC fault, where `recovery.nic_reset` allows it, resets the node's ionic stack between
jobs (the node runs none) and reads `ibstat`: every port Active, the node is used again;
otherwise it is excluded (or the sweep stops) with that ibstat output as its evidence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from sweepd.clusters.base import NOT_IN_CLUSTER, ControllerUnreachable
from sweepd.clusters.node_probe import (
    DMESG,
    DMESG_PATTERN,
    IBSTAT,
    ROCM_SMI,
    ib_active,
    ib_ports,
    recent_dmesg,
    rocm_summary,
    run_on,
    tail,
)
from sweepd.monitor.facts import FailureClass
from sweepd.store.store import Store

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts

log = structlog.get_logger("sweepd.core.node_evidence")

EVIDENCE_RULE = "node.evidence"
NIC_ACTIVE_RULE = "nic.reset_active"
NIC_DOWN_RULE = "nic.reset_not_active"
NIC_SKIPPED_RULE = "nic.reset_skipped"
_NIC_RULES = (NIC_ACTIVE_RULE, NIC_DOWN_RULE)
# Classes that name a node as the culprit: its evidence is worth a look.
NODE_FAULTS = frozenset({FailureClass.GPU_HARDWARE, FailureClass.ECC, FailureClass.NODE_CRASH,
                         FailureClass.NIC, FailureClass.NO_GPU})
# sinfo states with a job on the node (or leaving it): a NIC reset would break that job.
_BUSY = frozenset({"alloc", "mix", "comp", "drng", "npc"})
# The scontrol lines worth a stop message: who, what state, why.
_SCONTROL_KEYS = ("NodeName=", "State=", "Reason=")


def _ssh(engine: EngineParts) -> list[str]:
    return engine.config.recovery.ssh or engine.backend.node_shell()


def _reason(node: str) -> str:
    return f"evidence from {node}"


async def _scontrol(engine: EngineParts, node: str, timeout_s: float) -> str:
    try:
        out = await asyncio.wait_for(engine.backend.show_node(node), timeout_s)
    except TimeoutError:
        return f"not gathered (no answer within {timeout_s:g} s)"
    except (ControllerUnreachable, OSError, RuntimeError) as e:
        return f"not gathered ({e})"
    kept = [line.strip() for line in out.splitlines() if any(k in line for k in _SCONTROL_KEYS)]
    return " ".join(kept) if kept else (tail(out, 3).replace("\n", " ") or "(empty)")


async def gather(engine: EngineParts, node: str) -> str:
    """The node's evidence as text, one part a line; a part that could not be read says
    why (each command bounded by `recovery.timeout_s`; the three run at once)."""
    timeout = engine.config.recovery.timeout_s
    ssh = _ssh(engine)
    show, dmesg, smi = await asyncio.gather(_scontrol(engine, node, timeout),
                                            run_on(ssh, node, DMESG, timeout),
                                            run_on(ssh, node, ROCM_SMI, timeout))
    lines = [f"{node}:", f"  scontrol show node: {show}"]
    if not dmesg.ok:
        lines.append(f"  dmesg: not gathered ({dmesg.out})")
    else:
        found = recent_dmesg(dmesg.out)
        lines.append(f"  dmesg: {len(found)} recent line(s) matching {DMESG_PATTERN.pattern}"
                     + (":" if found else ""))
        lines += [f"    {line}" for line in found]
    if not smi.ok:
        lines.append(f"  rocm-smi: not gathered ({smi.out})")
    else:
        lines += [f"  rocm-smi: {line}" for line in rocm_summary(smi.out)]
    return "\n".join(lines)


async def record_evidence(engine: EngineParts, sweep_id: int, nodes: Sequence[str],
                          job_id: int | None = None) -> None:
    """Gather each node's evidence and store it (event `node.evidence`). A job's nodes
    already gathered for that job are not asked again (a restart concluding it anew)."""
    if not engine.config.recovery.evidence or not nodes:
        return
    have = set()
    if job_id is not None:
        have = {e.reason for e in await engine.store.events.of_sweep(sweep_id, kind="note")
                if e.rule == EVIDENCE_RULE and e.job_id == job_id}
    todo = [n for n in dict.fromkeys(nodes) if _reason(n) not in have]
    texts = await asyncio.gather(*(gather(engine, n) for n in todo))
    async with engine.store.tx():
        for node, text in zip(todo, texts, strict=True):
            await engine.store.events.add(sweep_id, "note", _reason(node), rule=EVIDENCE_RULE,
                                                evidence=text, job_id=job_id)
    log.info("node.evidence", sweep=sweep_id, nodes=todo)


async def stored_evidence(store: Store, sweep_id: int, nodes: Sequence[str]) -> list[str]:
    """The latest stored evidence of each node (and its latest NIC reset), in `nodes`'
    order: what a decision and a stop message show."""
    latest: dict[str, str] = {}
    resets: dict[str, str] = {}
    for e in await store.events.of_sweep(sweep_id):
        if e.rule == EVIDENCE_RULE and e.evidence:
            latest[e.reason.removeprefix("evidence from ")] = e.evidence
        elif e.rule in _NIC_RULES and e.evidence:
            resets[e.reason.split(":", 1)[0].removeprefix("NIC reset of ")] = \
                f"  {e.reason}\n" + "\n".join(f"    {line}" for line in e.evidence.splitlines())
    out = []
    for node in dict.fromkeys(nodes):
        text = latest.get(node, f"{node}:" if node in resets else "")
        if node in resets:
            text += "\n" + resets[node]
        if text:
            out.append(text)
    return out


def with_evidence(first: str | None, node_evidence: Sequence[str]) -> str | None:
    """An event's evidence: the log line that proved the fault, then the node's evidence."""
    parts = [p for p in (first, *node_evidence) if p]
    return "\n".join(parts) if parts else None


async def nic_outcome(store: Store, sweep_id: int, node: str, job_id: int | None
                      ) -> bool | None:
    """The stored outcome of the NIC reset after this job: True every port Active, False
    not, None no reset was made. What the decision reads (not what the reset returned)."""
    for e in reversed(await store.events.of_sweep(sweep_id, kind="decision")):
        if e.job_id == job_id and e.rule in _NIC_RULES and e.reason.startswith(
                f"NIC reset of {node}:"):
            return e.rule == NIC_ACTIVE_RULE
    return None


async def reset_nic(engine: EngineParts, sweep_id: int, node: str,
                    job_id: int | None) -> bool | None:
    """Reset the node's NIC stack and read ibstat, where the config allows it and no job
    runs on the node. True: every port Active again; False: not (the evidence stored);
    None: no reset (not allowed, or not between jobs: said in an event)."""
    r = engine.config.recovery
    if not r.nic_reset:
        return None
    done = await nic_outcome(engine.store, sweep_id, node, job_id)
    if done is not None:
        return done   # reset before a restart: its outcome stands, the NIC is not reset twice
    try:
        state = (await engine.backend.node_states([node])).get(node, NOT_IN_CLUSTER)
    except ControllerUnreachable as e:
        state = f"unknown ({e})"
    if state in _BUSY or state == NOT_IN_CLUSTER or state.startswith("unknown"):
        await engine.store.events.add(
            sweep_id, "note", f"no NIC reset of {node}: the node is {state}; a reset runs "
            "only between jobs", rule=NIC_SKIPPED_RULE, evidence=f"sinfo: {node} {state}",
            job_id=job_id)
        return None
    ssh = _ssh(engine)
    reset = await run_on(ssh, node, r.nic_reset_command, r.nic_reset_timeout_s)
    ib = await run_on(ssh, node, IBSTAT, r.timeout_s)
    active, count = ib_active(ib.out) if ib.ok else (False, f"ibstat not read: {ib.out}")
    evidence = "\n".join([f"reset: {'done' if reset.ok else f'failed, {reset.out}'} "
                          f"({r.nic_reset_command})", f"ibstat: {count}",
                          *([ib_ports(ib.out)] if ib.ok else [])])
    what = "every port Active again" if active else f"not Active ({count})"
    await engine.store.events.add(sweep_id, "decision", f"NIC reset of {node}: {what}",
                                        rule=NIC_ACTIVE_RULE if active else NIC_DOWN_RULE,
                                        evidence=evidence, job_id=job_id)
    log.warning("node.nic_reset", sweep=sweep_id, node=node, active=active, ibstat=count)
    return active
