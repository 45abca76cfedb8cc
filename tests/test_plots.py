"""Plots: the model perf curve with its OOM region and optimum, as a PNG."""

from __future__ import annotations

from pathlib import Path

from sweepd.app.daemon import open_parts
from tests.simrun import perf_spec, run, sim_config, write_scenario


async def test_model_perf_plot_is_a_png(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    await run(config, perf_spec(values=[4, 8, 10, 64]))
    async with open_parts(config) as parts:
        png = await parts.service.plot(1)
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    (tmp_path / "plot.png").write_bytes(png)


async def test_no_plot_before_anything_ran(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep = await parts.service.submit(perf_spec(values=[4]))
        assert await parts.service.plot(int(sweep["id"])) is None


async def test_model_sweep_and_network_plots(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, commits={"cand": {"llama2-70b": {"tgs_factor": 0.9}}},
                              links=[{"a": "chi2832", "b": "chi2868", "factor": 0.85}])
    config = sim_config(tmp_path, scenario)
    four = "chi[2832,2863,2867-2868]"
    await run(config, {"kind": "model-sweep", "nodes": four, "commits": ["main", "cand"],
                       "matrix": {"llama2-70b": [1, 2]}})
    await run(config, {"kind": "node-perf", "nodes": four})
    await run(config, {"kind": "network", "nodes": four})
    async with open_parts(config) as parts:
        for sweep_id in (1, 2, 3):
            png = await parts.service.plot(sweep_id)
            assert png is not None and png.startswith(b"\x89PNG"), sweep_id
            (tmp_path / f"plot-{sweep_id}.png").write_bytes(png)
