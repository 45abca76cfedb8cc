"""Issue 21, the report the seed asks for: "why the winning flag wins" gives the evidence
run's figures (each cost's share of the step from its HLO dump; on PP the pipeline bubble)
and the job ids of the runs that measured the winner."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.reporting.report_sections import _env_effect, _inventory, _why
from sweepd.kinds.xla_tuning.reporting.report_view import View
from sweepd.kinds.xla_tuning.search import profiles
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from tests.golden_files import GOLDEN, check_golden


def _view(parallelism: str, evidence: Evidence | None) -> View:
    spec = XlaTuningSpec.model_validate({"kind": "xla-tuning", "model": "deepseek3-671b",
                                         "nodes": "n[1-8]", "parallelism": parallelism})
    assert isinstance(spec, XlaTuningSpec)
    tag = next(iter(spec.config_tags))
    results = [Result("baseline", tag, Outcome.OK, 1000.0, job_id="11"),
               Result("evidence", tag, Outcome.OK, 990.0, job_id="12"),
               Result("hpas", tag, Outcome.OK, 1030.0, job_id="13"),
               Result("hpas", tag, Outcome.OK, 1032.0, job_id="17")]
    return View(spec, results, build(results, 0.008, 3), profiles(spec.inputs()),
                evidence=evidence)


def test_why_gives_the_hlo_shares_the_bubble_on_pp_and_the_winners_jobs() -> None:
    ev = Evidence(((Cost.COLLECTIVE_PERMUTE, 0.31), (Cost.COMPUTE, 0.55),
                   (Cost.ALL_GATHER, 0.08)), "HLO dump of job 12")
    why = _why(_view("PP=8", ev), "hpas")
    # The winner's jobs, the evidence run, its dump's shares, PP's bubble: whole.
    check_golden(GOLDEN / "xla_tuning_messages" / "why_on_pp_with_a_dump.txt", why + "\n")


def test_without_pp_or_a_dump_why_claims_neither() -> None:
    why = _why(_view("FSDP=8", None), "hpas")
    assert "pipeline bubble" not in why and "its HLO dump" not in why
    assert "Measured in jobs 13, 17" in why


def test_wave1_says_restore_default_ran_out_of_memory_not_that_it_never_ran() -> None:
    base = _view("PP=8", None)
    tag = base.primary
    oom = Result("restore_default", tag, Outcome.OOM, detail="allocation of 3.1 GiB")
    results = [*base.results, oom]
    view = View(base.spec, results, build(results, 0.008, 3), base.table,
                restored=("XLA_PYTHON_CLIENT_MEM_FRACTION",))
    text = _env_effect(view)
    assert "restore_default not run" not in text
    check_golden(GOLDEN / "xla_tuning_messages" / "env_effect_restore_default_oom.txt", text + "\n")
    never = View(base.spec, base.results, base.board, base.table)
    assert "restore_default not run" in _env_effect(never)


def test_the_inventory_is_the_one_the_verdict_recorded_not_guessed_from_restore_default() -> None:
    """An env file whose only flag has no default to put back runs no restore_default; the
    report said the env file sets nothing (red team): it gives the recorded Inventory."""
    view = _view("FSDP=8", None)
    line = ("Inventory: configs/deepseek3-671b.env.sh sets "
            "xla_gpu_enable_highest_priority_async_stream=false")
    text = _inventory(view, line)
    check_golden(GOLDEN / "xla_tuning_messages" / "inventory_as_recorded.txt", text + "\n")
    assert "sets none" not in _inventory(view, None)
    check_golden(GOLDEN / "xla_tuning_messages" / "env_effect_no_known_default.txt",
                 _env_effect(view) + "\n")
