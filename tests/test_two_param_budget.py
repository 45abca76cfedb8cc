"""A two-parameter sweep whose max_runs runs out before every setting's search settled asks,
as the one-parameter sweep does (`model_perf.budget_gap`), and a verdict it ends on anyway
is a best so far: no winning combination, no proposed config change (red team t01: "best
so far" at 0.952 of the truth, reported as "Winning combination" with a config change)."""

from __future__ import annotations

from pathlib import Path

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.kinds.registry import kind_of
from sweepd.reports.report import report_markdown
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.simrun import open_store, perf_spec, recorded, run, sim_config, write_scenario

SAID = GOLDEN / "model_perf_two_param"

POLICIES = ["minimal_flash", "full", "save_dot_except_mlp"]
MODELS = {"llama2-70b": {"max_batch": 14, "peak_batch": 10, "peak_tgs": 1400,
                         "remat": {"save_dot_except_mlp": [1.4, 1.08], "full": [0.3, 0.78]}}}


async def test_a_two_parameter_sweep_out_of_runs_asks_for_more(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.0005, models=MODELS)
    config = sim_config(tmp_path, scenario)
    spec = perf_spec(second={"parameter": "remat_policy", "values": POLICIES}, max_runs=4)
    code, lines = await run(config, spec)
    assert code == EXIT_AWAITING_DECISION
    verdict, rules, runs = await recorded(config)
    assert verdict is None and "model_perf.budget_gap" in rules and len(runs) == 4
    # The stop as shown: max_runs (4) spent, and how to take up to 4 more runs.
    at = next(i for i, line in enumerate(lines) if "STOP]" in line)
    check_golden(SAID / "budget_stop.txt",
                 scrubbed("\n".join(lines[at:]), state=config.daemon.state_dir) + "\n")


async def test_a_verdict_cut_by_the_budget_proposes_no_config_change(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.0005, models=MODELS)
    config = sim_config(tmp_path, scenario)
    spec = perf_spec(second={"parameter": "remat_policy", "values": POLICIES}, max_runs=2,
                     extend_budget=True)
    code, _ = await run(config, spec)
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = await store.sweeps.get(1)
        text = report_markdown(kind_of(sweep.kind).report, sweep,
                               await store.runs.of_sweep(1), await store.jobs.of_sweep(1), [])
    finally:
        await store.close()
    verdict = sweep.verdict or {}
    assert verdict["settled"] is False and "best so far" in (sweep.reason or "")
    assert "Winning combination" not in text
    assert "Proposed config change" not in text and "No config change proposed" in text
    check_golden(SAID / "budget_cut_report.md", scrubbed(text, state=config.daemon.state_dir))
