"""Direct mode: sweepd writes its own batch script (clusters/slurm/script.py) and submits it
with sbatch; every override reaches the train command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from sweepd.clusters.base import (
    ControllerUnreachable,
    JobRequest,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.slurm.args import passthrough_args, sbatch_args
from sweepd.clusters.slurm.commands import UNREACHABLE, Commands, Result, SlurmSettings
from sweepd.clusters.slurm.script import BatchScript, render_batch_script
from sweepd.util.jobname import Fitted, JobNameTooLong, file_segment, fit


class DirectMode:
    """Submits a JobRequest through sweepd's own batch script."""

    def __init__(self, settings: SlurmSettings, commands: Commands,
                 header_command: Sequence[str] | None,
                 summary_command: Sequence[str] | None) -> None:
        self.settings = settings
        self._cmd = commands
        self._header_command = header_command
        self._summary_command = summary_command

    @staticmethod
    def name_of(request: JobRequest) -> Fitted:
        """The job name and the overrides that leave it (SpecRefused when none fits)."""
        try:
            # sweepd's own script: every override reaches the train command; those
            # that would make the name too long only leave the name.
            return fit(request.model, request.tag, passthrough_args(request))
        except JobNameTooLong as e:
            raise SpecRefused(str(e)) from e

    async def submit(self, request: JobRequest) -> Submitted:
        passthrough = passthrough_args(request)
        fitted = self.name_of(request)
        name = fitted.name
        out_dir = request.output_dir.resolve()
        script = render_batch_script(BatchScript(
            job_name=name, model=request.model, passthrough=passthrough, env=request.env,
            train_command=self.settings.train_command, header_command=self._header_command,
            summary_command=self._summary_command, commit=request.commit,
            xla_flags=request.xla_flags, flags_var=request.flags_var,
            output_dir=str(out_dir)))
        path = out_dir / f".sweepd-{request.token}.sbatch"
        await asyncio.to_thread(_write_script, path, script)
        chdir = [f"--chdir={request.workdir}"] if request.workdir else []
        res = await self._cmd.run(["sbatch", "-J", name, *sbatch_args(self.settings, request),
                                   *chdir, f"--output={out_dir}/%j-{file_segment(name)}.log",
                                   str(path)])
        job_id = _submit_result("sbatch", res)
        return Submitted(job_id, name, out_dir / f"{job_id}-{file_segment(name)}.log",
                         name_note=fitted.note)


def _submit_result(argv0: str, res: Result) -> str:
    if res.rc != 0:
        text = (res.err + res.out).strip()
        if UNREACHABLE.search(text):
            raise ControllerUnreachable(f"{argv0}: {text}")
        raise SubmitRefused(f"{argv0} exited {res.rc}: {text}")
    return _submitted_id(res.out)


def _submitted_id(out: str) -> str:
    words = out.split()
    if not words or not words[-1].split(";")[0].isdigit():
        raise SubmitRefused(f"no job id in sbatch output: {out.strip()!r}")
    return words[-1].split(";")[0]


def _write_script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
