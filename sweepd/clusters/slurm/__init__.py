"""The `slurm` backend: the real Slurm CLIs (sbatch, squeue, scontrol, scancel, sinfo, sacct).

Two ways to submit: `direct` writes its own batch script (`direct`, `script`); `submit_sh`
runs maxtext-slurm's `./submit.sh` so jobs are exactly what a person would submit
(maxtext-slurm-facts.md §1: `submit_sh`, `toolkit`, with a per-job profile's arms in
`train_env.sh` (`profile`) and the overrides a job name cannot hold in a per-job config
(`carried`)). Every command goes through `commands` (an argv list, optionally behind a
prefix such as `["ssh", "login1"]`); `queries` asks about jobs and nodes, `parse` reads
what the commands print; `cluster.SlurmCluster` puts them behind the backend protocol.
"""

from sweepd.clusters.slurm.args import passthrough_args, sbatch_args
from sweepd.clusters.slurm.cluster import SlurmCluster
from sweepd.clusters.slurm.commands import COMMAND_TIMEOUT_S, SlurmCommandError, SlurmSettings
from sweepd.clusters.slurm.parse import (
    COMMENT_PREFIX,
    TOKEN_ENV,
    map_state,
    parse_node_states,
    parse_sacct_times,
    parse_scontrol_job,
    parse_squeue_poll,
    scontrol_exit,
    slurm_time,
    token_matches,
    token_of,
    wait_status_exit,
)
from sweepd.clusters.slurm.profile import (
    TRAIN_ENV_MARK,
    leftover_note,
    profile_placement,
    write_arm,
)
from sweepd.clusters.slurm.toolkit import (
    failing_line_first,
    model_spec,
    resolve_model,
    submit_sh_job_id,
)

__all__ = [
    "COMMAND_TIMEOUT_S", "COMMENT_PREFIX", "TOKEN_ENV", "TRAIN_ENV_MARK", "SlurmCluster",
    "SlurmCommandError", "SlurmSettings", "failing_line_first", "leftover_note", "map_state",
    "model_spec", "parse_node_states", "parse_sacct_times", "parse_scontrol_job",
    "parse_squeue_poll", "passthrough_args", "profile_placement", "resolve_model",
    "sbatch_args", "scontrol_exit", "slurm_time", "submit_sh_job_id", "token_matches",
    "token_of", "wait_status_exit", "write_arm",
]
