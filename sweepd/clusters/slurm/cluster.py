"""The `slurm` backend (clusters.base.ClusterBackend) over the real Slurm CLIs: the
submission goes to the configured mode (direct or submit.sh), every other call to the
queries; all commands through one runner (prefix, env, time limit). Its public methods are
the protocol's and `name_of` (`validate`); what only Slurm is asked (the start's `ping`) is
asked of `queries` directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from sweepd.clusters.base import JobRequest, JobStatus, Listing, Submitted
from sweepd.clusters.slurm.commands import COMMAND_TIMEOUT_S, Commands, SlurmSettings
from sweepd.clusters.slurm.direct import DirectMode
from sweepd.clusters.slurm.profile import leftover_note, remove_leftovers
from sweepd.clusters.slurm.queries import Queries
from sweepd.clusters.slurm.submit_sh import SubmitShMode
from sweepd.clusters.submitguard import guard_path
from sweepd.util.jobname import Fitted


class SlurmCluster:
    name = "slurm"

    def __init__(
        self,
        settings: SlurmSettings,
        *,
        env: Mapping[str, str] | None = None,
        header_command: Sequence[str] | None = None,
        summary_command: Sequence[str] | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> None:
        if settings.mode not in ("direct", "submit_sh"):
            raise ValueError(f"unknown slurm mode {settings.mode!r}")
        if settings.mode == "submit_sh" and settings.repo is None:
            raise ValueError("submit_sh mode needs `repo` (the maxtext-slurm checkout)")
        if settings.mode == "direct" and not settings.train_command:
            raise ValueError("direct mode needs `train_command`")
        self.settings = settings
        self.commands = Commands(settings, env, timeout_s)
        self.queries = Queries(self.commands, settings)
        self.mode: DirectMode | SubmitShMode = (
            SubmitShMode(settings, self.commands, self.queries)
            if settings.mode == "submit_sh"
            else DirectMode(settings, self.commands, header_command, summary_command))

    @property
    def submit_timeout_s(self) -> float:
        """Wall seconds after which a submitting command is killed."""
        return self.commands.timeout_s

    async def submit(self, request: JobRequest) -> Submitted:
        # The submitting command holds the token's guard (clusters/submitguard.py).
        with self.commands.guarding(guard_path(request.output_dir, request.token)):
            return await self.mode.submit(request)

    def name_of(self, request: JobRequest) -> Fitted:
        """The job name a submission would get, and the overrides that leave it, without
        submitting or writing anything (`sweepd validate`). Raises SubmitRefused (SpecRefused
        when the spec causes it) as the submission would."""
        return self.mode.name_of(request)

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        return await self.queries.poll(backend_ids)

    async def find_by_token(self, token: str) -> Submitted | None:
        return await self.queries.find_by_token(token)

    async def live_tokens(self) -> dict[str, str]:
        return await self.queries.live_tokens()

    async def cancel(self, backend_id: str) -> None:
        await self.queries.cancel(backend_id)

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        return await self.queries.node_states(nodes)

    async def resume_node(self, node: str) -> None:
        await self.queries.resume_node(node)

    async def show_node(self, node: str) -> str:
        return await self.queries.show_node(node)

    def node_shell(self) -> list[str]:
        # BatchMode: never wait for a password nobody will type; ConnectTimeout: a dead
        # node answers "unreachable" well before the probe's own time limit.
        return ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "{node}"]

    async def end_note(self, output_dir: Path) -> str | None:
        return await asyncio.to_thread(leftover_note, output_dir)

    async def remove_leftovers(self, output_dir: Path) -> str | None:
        return await asyncio.to_thread(remove_leftovers, output_dir)

    async def partitions(self) -> list[str]:
        """Slurm's own (not the protocol's): the partitions, for `check` and `validate`."""
        return await self.queries.partitions()

    async def idle_nodes(self, partition: str | None) -> Listing:
        return await self.queries.idle_nodes(partition)

    async def others_jobs(self, partition: str | None) -> Listing:
        return await self.queries.others_jobs(partition)

    async def close(self) -> None:
        return None
