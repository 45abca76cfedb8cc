"""Job names as submit.sh builds them, and what leaves the name when it would be too long
(issue 21 item 6: the seed's MoE sparse overrides made the shipped xla-tuning example's
names 263 bytes, and the submission was refused)."""

from __future__ import annotations

import pytest

from sweepd.util.jobname import MAX_JOB_NAME_BYTES, JobNameTooLong, build_name, fit, job_name
from tests.golden_files import GOLDEN, check_golden

# The seed's submission template for an FSDP=8 MoE sparse profile (xla-tuning.SKILL.md).
SEED = ["dcn_fsdp_parallelism=8", "sparse_matmul=true", "use_turbo_grouped_gemm=true",
        "use_deepep_dispatch=true", "steps=15", "dataset_type=synthetic",
        "per_device_batch_size=7", "jax_distributed_heartbeat_timeout_seconds=99999",
        "_env_TUNE_PROFILE=ovl2+hpas", "_env_SWEEPD_TOKEN=sw12-1a2b3c4d.5e6f70"]


def test_the_seed_template_is_over_the_limit_whole() -> None:
    assert len(build_name("deepseek3-671b", None, SEED)) > MAX_JOB_NAME_BYTES
    with pytest.raises(JobNameTooLong):
        job_name("deepseek3-671b", None, SEED)


def test_a_name_that_fits_keeps_every_argument() -> None:
    fitted = fit("llama2-70b", "t", ["steps=15", "_env_A=1"])
    assert fitted.name == "JAX-llama2-70b-t-steps_15-_env_A_1"
    assert fitted.carried == () and fitted.note is None


def test_maxtext_overrides_leave_the_name_longest_first_until_it_fits() -> None:
    fitted = fit("deepseek3-671b", None, SEED)
    assert len(fitted.name.encode()) <= MAX_JOB_NAME_BYTES
    # Nothing is dropped: what is not in the name is carried, and only MaxText overrides.
    assert sorted([*fitted.named, *fitted.carried]) == sorted(SEED)
    assert all(not a.startswith("_env_") for a in fitted.carried)
    assert fitted.carried[0] == "jax_distributed_heartbeat_timeout_seconds=99999"
    assert fitted.name == build_name("deepseek3-671b", None, fitted.named)
    assert fitted.note and fitted.carried[0] in fitted.note   # the note names what it carried


def test_env_settings_and_enable_checkpointing_stay_in_the_name() -> None:
    """The toolkit exports only passthrough env, and reads enable_checkpointing=true from the
    name: neither can be carried; a name too long with them alone is refused, naming them."""
    args = ["enable_checkpointing=true", "_env_X=" + "v" * 230, "steps=15"]
    with pytest.raises(JobNameTooLong) as info:
        fit("llama2-70b", None, args)
    message = str(info.value)
    check_golden(GOLDEN / "jobname" / "cannot_be_carried.txt", message + "\n")
    assert "steps=15" not in message.split("what cannot be carried:")[1]


def test_the_callers_extra_model_bytes_count() -> None:
    args = ["k=" + "v" * 200, "steps=15"]
    assert fit("m", None, args).carried == ()
    assert fit("m", None, args, prefix_len=30).carried == ("k=" + "v" * 200,)
