"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from typing import Any

# --- from test_slurm_campaign_crash ---

SLOT = "chi[2867-2868,2880-2881]"   # FSDP=2 takes two: one spare, one slow node


PAG = "xla_gpu_enable_pipelined_all_gather"


SPEC: dict[str, Any] = {
    "kind": "campaign", "model": "deepseek3-671b", "parallelism": "FSDP=2", "nodes": SLOT,
    "budget_hours": 12, "batch_stage": {"max_runs": 6},
    "flags_stage": {"catalog": "replace", "profiles": [
        {"name": "pag", "settings": {PAG: "true"}},
        {"name": "nch8", "settings": {"NCCL_NCHANNELS_PER_NET_PEER": "8"}}]}}

