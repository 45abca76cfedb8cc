"""What a spec must pass before a sweep is accepted (at submit, and shown by validate): it
parses, fits this cluster's nodes, names only known chats, its slot resolves to idle
nodes, what it refers to holds (the kind's gather), every pinned node is known to the
cluster, and the kind's pre-flight passes (again at a resume). Each refusal is a
`SpecError`; nothing is recorded here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.app import slot
from sweepd.clusters.base import NOT_IN_CLUSTER, ControllerUnreachable
from sweepd.clusters.slurm.partition import partition_problem
from sweepd.core.engine import Engine
from sweepd.kinds.api import GatherError
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import Check, PreflightContext, gather_context, kind_of
from sweepd.kinds.spec import SpecError, SweepSpec
from sweepd.notify.chats import refuse_unknown_chats
from sweepd.store.rows import Run
from sweepd.util.text import compact_nodes


class Admission:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def parse(self, data: Any, toolkit_repo: Path | None,
              allowed_chats: frozenset[int] | None) -> SweepSpec:
        """The spec parsed (field-level errors), fitted to this cluster, its chats known."""
        spec = parse_spec(data, toolkit_repo, local_node=self.local_node())
        self.refuse_misfits(spec)
        refuse_unknown_chats(spec.chats, allowed_chats)
        return spec

    def local_node(self) -> str | None:
        """The local backend's one node (a spec may leave `nodes` out), else None."""
        cluster = self.engine.config.cluster
        return cluster.local.node_name() if cluster.backend == "local" else None

    def refuse_misfits(self, spec: SweepSpec) -> None:
        """What the spec cannot see alone: does it fit this cluster's nodes (e.g. a TP
        degree against `cluster.gpus_per_node`)? One line if not."""
        problem = spec.cluster_problem(self.engine.config.cluster.gpus_per_node)
        if problem is not None:
            raise SpecError(problem, [{"loc": [], "msg": problem}])

    def default_partition(self) -> str | None:
        """The configured Slurm partition a spec without one uses (None off Slurm)."""
        cluster = self.engine.config.cluster
        return cluster.slurm.partition if cluster.backend == "slurm" else None

    async def refuse_unknown_partition(self, spec: SweepSpec) -> None:
        """The partition the jobs go to (the spec's, else the config's) must be one the
        scheduler has: one line naming those it has, not a refusal at the first submission.
        A backend without partitions, or a scheduler that does not answer, refuses
        nothing (the sweep waits for it as it would later)."""
        partition = getattr(spec, "partition", None) or self.default_partition()
        backend = getattr(self.engine.backend, "inner", self.engine.backend)
        listed = getattr(backend, "partitions", None)
        if partition is None or listed is None:
            return
        try:
            known: list[str] = await listed()
        except (ControllerUnreachable, RuntimeError):
            return
        problem = partition_problem(partition, known)
        if problem is not None:
            raise SpecError(problem, [{"loc": ["partition"], "msg": problem}])

    async def resolve_slot(self, spec: SweepSpec) -> tuple[SweepSpec, slot.Chosen | None]:
        return await slot.resolve(self.engine.backend, spec, self.default_partition())

    async def preflight(self, spec: SweepSpec, resumed: Sequence[Run] | None = None
                         ) -> list[Check]:
        """The kind's checks at submission and at a resume (`resumed`: the sweep's runs); a
        failed one refuses it, nothing recorded."""
        hook = kind_of(spec.kind).preflight
        if hook is None:
            return []
        partition = getattr(spec, "partition", None) or self.default_partition()
        checks: list[Check] = await hook(spec, PreflightContext(
            self.engine.backend, gather_context(self.engine.config), partition, resumed))
        failed = [c for c in checks if not c.ok]
        if failed:
            what = "pre-flight: " + "; ".join(c.text for c in failed)
            raise SpecError(what, [{"loc": [c.rule], "msg": c.text} for c in failed])
        return checks

    async def gather(self, spec: SweepSpec) -> Any:
        """What the spec refers to must hold now (a refusal), not fail the sweep later."""
        try:
            return await kind_of(spec.kind).gather(self.engine.store, spec,
                                                    gather_context(self.engine.config))
        except GatherError as e:
            raise SpecError(str(e)) from None

    async def refuse_strangers(self, nodes: list[str]) -> None:
        """A node name the cluster does not know (a typo) would stop the sweep at its first
        job; say so now. A scheduler that does not answer is no reason to refuse: the sweep
        waits for it as it would later."""
        try:
            states = await self.engine.backend.node_states(nodes)
        except (ControllerUnreachable, RuntimeError):
            return
        strangers = [n for n in nodes if states.get(n) == NOT_IN_CLUSTER]
        if strangers:   # one compact line, however many: a typo may name thousands
            what = f"not nodes of this cluster: {compact_nodes(strangers)}"
            raise SpecError(what, [{"loc": ["nodes"], "msg": what}])
