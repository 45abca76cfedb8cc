"""submit.sh mode: jobs go through maxtext-slurm's `./submit.sh`, exactly as a person would
submit them (maxtext-slurm-facts.md §1). A per-job profile rides in a `train_env.sh` arm
(clusters/slurm/profile.py); overrides a job name cannot hold ride in a per-job config
(clusters/slurm/carried.py); a submission whose outcome is unclear is settled from the queue.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from sweepd.clusters import train_env
from sweepd.clusters.base import (
    ControllerUnreachable,
    JobRequest,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.slurm import carried as carry
from sweepd.clusters.slurm.args import passthrough_args, sbatch_args
from sweepd.clusters.slurm.commands import UNREACHABLE, Commands, SlurmCommandError, SlurmSettings
from sweepd.clusters.slurm.parse import TOKEN_ENV
from sweepd.clusters.slurm.profile import profile_placement, write_arm
from sweepd.clusters.slurm.queries import Queries
from sweepd.clusters.slurm.toolkit import (
    failing_line_first,
    model_spec,
    resolve_model,
    submit_sh_job_id,
)
from sweepd.util.jobname import Fitted, JobNameTooLong, fit, job_name


class SubmitShMode:
    """Submits a JobRequest through the toolkit's submit.sh in the configured repo (or a
    commit's checkout of it)."""

    def __init__(self, settings: SlurmSettings, commands: Commands, queries: Queries) -> None:
        assert settings.repo is not None  # checked by SlurmCluster
        self.settings = settings
        self._cmd = commands
        self._queries = queries
        self._train_env_lock = asyncio.Lock()

    def name_of(self, request: JobRequest) -> Fitted:
        """The job name and the overrides that leave it (carried in a per-job config),
        without writing anything; refused as the submission would be."""
        assert self.settings.repo is not None
        _refuse_other_flags_var(request)
        repo = request.workdir or self.settings.repo
        placed = profile_placement(repo, request) if request.profile is not None else None
        named, name, _, carried = self._named(request, placed, repo)
        return Fitted(name, tuple(named), carried)

    async def submit(self, request: JobRequest) -> Submitted:
        assert self.settings.repo is not None  # checked in __init__
        _refuse_other_flags_var(request)
        if request.xla_flags and request.profile is None:
            # submit.sh takes the model's XLA_FLAGS from its env file; a passthrough
            # `_env_XLA_FLAGS=` would replace them, not add to them. Only a named profile's
            # flags reach the job (as train_env.sh arms).
            raise SubmitRefused(
                f"this run adds XLA flags ({' '.join(request.xla_flags)}) under no profile "
                "name, which submit.sh mode cannot pass on: use direct mode "
                "(cluster.slurm.mode: direct)")
        repo = request.workdir or self.settings.repo  # a checkout of one commit, or the repo
        placed = None
        if request.profile is not None:
            placed = await asyncio.to_thread(profile_placement, repo, request)
        passthrough, name, prepared, carried = self._named(request, placed, repo)
        if placed is not None:
            async with self._train_env_lock:  # read-modify-write of one shared file
                wrote = await asyncio.to_thread(write_arm, repo, request, placed.arm)
            prepared = f"{wrote}; {prepared}" if prepared else wrote
        written = None
        if carried:
            written = await asyncio.to_thread(self._carry, repo, request, carried)
            said = (f"overrides {' '.join(carried)} carried in configs/{written.name}.gpu.yml "
                    f"(the job name would be over 243 bytes with them; a copy: {written.copy})")
            prepared = f"{prepared}; {said}" if prepared else said
        try:
            spec_request = replace(request, model=written.name) if written else request
            sub = await self._run(spec_request, repo, passthrough, name)
        except SubmitRefused as e:
            if prepared is None:
                raise
            raise SubmitRefused(f"{e}\n(before it: {prepared})") from e
        finally:
            if written is not None:   # submit.sh froze its copy into the job's artifact
                await asyncio.to_thread(carry.remove, written)
        return replace(sub, prepared=prepared)

    @staticmethod
    def _carry(repo: Path, request: JobRequest, carried: Sequence[str]) -> carry.Written:
        model = resolve_model(repo, request.model)
        if model is None:   # submit.sh would refuse the name; say so before writing
            raise SubmitRefused(f"!!! Unknown model: {request.model} (no single "
                                f"configs/*{request.model}*.gpu.yml in {repo})")
        try:
            return carry.write(repo, model, request.token, carried, request.output_dir)
        except (carry.CarryError, OSError) as e:
            raise SubmitRefused(str(e)) from e

    def _named(self, request: JobRequest, placed: train_env.Placement | None,
                  repo: Path | None = None
                  ) -> tuple[list[str], str, str | None, tuple[str, ...]]:
        """(passthrough, job name, a note, the overrides carried in a per-job config).
        sweepd's token rides in the name when it fits (`_env_SWEEPD_TOKEN=`); it is always
        in `--comment`, which recovery reads first, so a name that fits only without it
        goes without it (noted). A name still too long carries MaxText overrides in a
        per-job config (clusters/slurm/carried.py), longest first, until it fits; when even
        that cannot make it fit, refused (the spec must change), nothing written."""
        base = self._passthrough(request, placed)
        with_token = [*base, f"_env_{TOKEN_ENV}={request.token}"]
        try:
            return with_token, job_name(request.model, request.tag, with_token), None, ()
        except JobNameTooLong as e:
            too_long = e
        dropped = (f"sweepd's token in --comment only: with it the job name "
                   f"would be over the limit ({too_long})")
        try:
            return base, job_name(request.model, request.tag, base), dropped, ()
        except JobNameTooLong:
            pass
        model = (resolve_model(repo, request.model) if repo is not None else None) \
            or request.model
        shim = carry.config_name(model, request.token)
        for args, note in ((with_token, None), (base, dropped)):
            try:
                fitted = fit(shim, request.tag, args)
            except JobNameTooLong as e:
                last = e
                continue
            return list(fitted.named), fitted.name, note, fitted.carried
        hint = (f"; shorten the profile's name ({request.profile.name})"
                if placed and request.profile else "")
        raise SpecRefused(f"{last}{hint}") from last

    @staticmethod
    def _passthrough(request: JobRequest, placed: train_env.Placement | None) -> list[str]:
        """The overrides and env, where a profile's own env vars ride in its train_env.sh
        arm (and its flags never in the passthrough: `_env_XLA_FLAGS=` would replace)."""
        if placed is None or request.profile is None:
            return passthrough_args(request)
        env = {k: v for k, v in request.env.items() if k not in request.profile.env}
        return [*(f"{k}={v}" for k, v in request.overrides.items()),
                *(f"_env_{k}={v}" for k, v in env.items()), *placed.passthrough]

    async def _run(self, request: JobRequest, repo: Path, passthrough: list[str],
                             name: str) -> Submitted:
        argv = [*self._workspace_env(repo), "./submit.sh", model_spec(request),
                *sbatch_args(self.settings, request), "--", *passthrough]
        try:
            res = await self._cmd.run(argv, cwd=repo)
        except ControllerUnreachable as e:
            # Timed out: it may have submitted before it was stopped.
            found = await self._settle_unclear(request.token, None, str(e))
            if found is None:
                raise
            return found
        job_id = submit_sh_job_id(res.out)
        if res.rc == 0 and job_id is not None:
            return await self._submitted(job_id, name)
        why = f"submit.sh exited {res.rc}" + ("" if job_id else " and printed no job id")
        found = await self._settle_unclear(request.token, job_id, why)
        if found is not None:
            return found
        output = failing_line_first(res.out + "\n" + res.err)
        if UNREACHABLE.search(output):
            raise ControllerUnreachable(f"submit.sh: {output}")
        first, _, rest = output.partition("\n")
        raise SubmitRefused(f"{first} ({why}; its whole output follows)\n{rest}".rstrip())

    def job_workspace(self) -> Path:
        """Where submit.sh writes logs: `JOB_WORKSPACE` as submit.sh sees it (relative to
        the configured repo), else that repo's `outputs/` — also for a commit's checkout
        (see _workspace_env)."""
        assert self.settings.repo is not None
        ssh = bool(self.settings.command_prefix) and \
            Path(self.settings.command_prefix[0]).name == "ssh"
        seen = self._cmd.env if ssh else {**os.environ, **self._cmd.env}
        raw = seen.get("JOB_WORKSPACE")
        return self.settings.repo / raw if raw else self.settings.repo / "outputs"

    def _workspace_env(self, repo: Path) -> list[str]:
        """A commit's checkout would keep its logs in its own `outputs/`, which goes when
        the sweep ends: point submit.sh at the person's workspace instead."""
        if repo == self.settings.repo:
            return []
        return ["env", f"JOB_WORKSPACE={self.job_workspace()}"]

    async def _submitted(self, job_id: str, name: str, note: str | None = None) -> Submitted:
        """The job's record as Slurm has it: submit.sh resolves the model name (`70b` ->
        `llama2-70b`), and `StdOut` is the log's real path wherever JOB_WORKSPACE points.
        The job exists now, so a failed lookup must not turn into an exception."""
        try:
            found = await self._queries.job_record(job_id)
        except (ControllerUnreachable, SlurmCommandError):
            found = None
        if found is not None:
            name = found[0]
        log_path = found[1] if found is not None and found[1] is not None else \
            self.job_workspace() / f"{job_id}-{name}.log"
        return Submitted(job_id, name, log_path, note=note)

    async def _settle_unclear(self, token: str, printed: str | None,
                              why: str) -> Submitted | None:
        """A submission whose outcome is unclear (no job id, an exit code after one, a
        timeout): the queue decides. The job submit.sh named, else the newest with our
        token, is adopted; any other job with our token is a duplicate and is cancelled.
        None: the scheduler has no such job (a refusal). Raises ControllerUnreachable
        when the queue cannot be asked (the write-ahead row is reconciled later)."""
        ids = [str(i) for i in sorted(await self._queries.jobs_with_token(token), reverse=True)]
        for candidate in dict.fromkeys([*([printed] if printed else []), *ids]):
            record = await self._queries.job_record(candidate)
            if record is None:
                continue
            extra = [i for i in ids if i != candidate]
            for other in extra:
                await self._queries.cancel(other)
            note = (f"{why}; job {candidate} with token {token} found in the queue: adopted"
                    + (f"; duplicate job(s) {', '.join(extra)} cancelled" if extra else ""))
            return await self._submitted(candidate, record[0], note)
        return None


def _refuse_other_flags_var(request: JobRequest) -> None:
    """train_env.sh's arms append to XLA_FLAGS: flags meant for another variable (a TPU
    job's LIBTPU_INIT_ARGS) would reach the job where libtpu never reads them."""
    if request.xla_flags and request.flags_var != "XLA_FLAGS":
        raise SubmitRefused(
            f"this run's flags go in {request.flags_var}, which submit.sh mode's train_env.sh "
            "arms cannot set (they append to XLA_FLAGS): use direct mode "
            "(cluster.slurm.mode: direct)")
