"""Which scenario fault hits a job, with `times` counted across processes.

A fault with `times: N` hits the first N matching jobs. Claims are recorded per job id, so
every rank of one job (separate processes in Slurm mode) and a re-read by the same job
agree, and a later job sees the fault exhausted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sweepd.sim.scenario import FaultKind, FaultSpec, Scenario
from sweepd.sim.statefiles import atomic_write_json, locked, read_json
from sweepd.util.model_shapes import resolve_model

CLAIMS_FILE = "fault-claims.json"


def fault_matches(fault: FaultSpec, model: str, nodes: Sequence[str], batch: int) -> bool:
    if fault.node is not None and fault.node not in nodes:
        return False
    if fault.model is not None and resolve_model(fault.model).name != resolve_model(model).name:
        return False
    return fault.batch is None or fault.batch == batch


def _key(index: int, fault: FaultSpec) -> str:
    return f"{index}:{fault.kind.value}:{fault.node or '*'}:{fault.model or '*'}"


def claim(state_dir: Path, index: int, fault: FaultSpec, job_id: str) -> bool:
    """True if this job is hit by the fault (claiming one of its `times` if needed)."""
    if fault.times is None:
        return True
    path = state_dir / CLAIMS_FILE
    with locked(state_dir / f"{CLAIMS_FILE}.lock"):
        claims: dict[str, list[str]] = read_json(path, {})
        holders = claims.setdefault(_key(index, fault), [])
        if job_id in holders:
            return True
        if len(holders) >= fault.times:
            return False
        holders.append(job_id)
        atomic_write_json(path, claims)
        return True


def pick_fault(scenario: Scenario, state_dir: Path, job_id: str, model: str,
               nodes: Sequence[str], batch: int, *, controller: bool = False) -> FaultSpec | None:
    """The first matching fault (scenario order) that still has uses left.

    `controller=True` looks only at `controller_down` (the backend's business); otherwise
    only at faults that break the job itself.
    """
    for index, fault in enumerate(scenario.faults):
        if (fault.kind is FaultKind.CONTROLLER_DOWN) != controller:
            continue
        if fault_matches(fault, model, nodes, batch) and claim(state_dir, index, fault, job_id):
            return fault
    return None
