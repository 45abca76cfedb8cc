"""submit.sh mode: how a per-job profile reaches its job through the toolkit's `train_env.sh`.

A profile is any kind's: a name with the XLA flags and env vars that are its own
(`JobRequest.profile`, a `JobProfile`, and `xla_flags`); the backend writes it as an arm and the
job selects it by name. Nothing here knows which kind asked (the XLA tuning kind is the
first to fill profiles; its pre-flight reads the arms back, its Inventory the env file).

The pattern (xla-tuning.SKILL.md, "train_env.sh editing pattern"): two
`case "${TUNE_PROFILE}"` blocks at the end of `train_env.sh`, the XLA-flags block (its arms
append to `TUNE_FLAGS`, then to the inherited `XLA_FLAGS`, never composing it from scratch)
and, after it and after every NCCL export of the file, the post-NCCL block (its arms
`export K=V`). A job picks its arm with the passthrough `_env_TUNE_PROFILE=<name>`, read
early as `${EXTRACTED_ENV_MAP[TUNE_PROFILE]}`.
Each submission freezes its own copy of the file, so arms are only ever added while jobs are
pending: an arm of the same name with other content is an error, never an overwrite.

The parts: `blocks` (pure text in, text out: arms checked, read back, added, removed,
described), `layering` (what wins: the per-model env file against an arm), `files`
(`write_atomic` for sweepd's own files; `apply`, `clean`, `leftover` on the person's file,
through `util.person_files`) and `__main__` (`python -m sweepd.clusters.train_env`).
sweepd's two blocks end with marker lines so that they, and only they, can be listed and
removed; a TUNE_PROFILE block sweepd did not write is refused, never edited.

The layering that decides what wins (xla-tuning-facts.md, "How settings reach a job"):
`train_env.sh` -> `configs/<model>.env.sh` (sourced after it) -> `_env_K=V` (re-exported
after both). An env var the per-model file also sets wins over the post-NCCL arm: its
passthrough `_env_K=V` wins instead (`placement`). An XLA flag the per-model file appends
comes after the arm's and wins; nothing in `train_env.sh` can beat it (`Placement.lost`).
"""

from sweepd.clusters.train_env.blocks import (
    BASELINE,
    ENV_END,
    ENV_HEADER,
    SELECTOR,
    XLA_END,
    XLA_HEADER,
    Arm,
    TrainEnvError,
    add_arm,
    arm,
    arms,
    describe,
    remove_arms,
    without_arms,
)
from sweepd.clusters.train_env.files import apply, clean, leftover, remove, write_atomic
from sweepd.clusters.train_env.layering import (
    Override,
    Placement,
    env_file_settings,
    job_name_for,
    overrides,
    placement,
    read_early,
    selector,
)

__all__ = [
    "BASELINE", "ENV_END", "ENV_HEADER", "SELECTOR", "XLA_END", "XLA_HEADER", "Arm",
    "Override", "Placement", "TrainEnvError", "add_arm", "apply", "arm", "arms", "clean",
    "describe", "env_file_settings", "job_name_for", "leftover", "overrides", "placement",
    "read_early", "remove", "remove_arms", "selector", "without_arms", "write_atomic",
]
