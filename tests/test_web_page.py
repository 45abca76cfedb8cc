"""The HTML page's renderer on its own (`sweepd/web/page.py`): a person's input is text, never
markup or a link; the verdict card reads the stored verdict's structure; the charts come
out as inline SVG that names nothing to fetch. The pages of recorded sweeps: tests/web_pages.py,
called from the demo tests and the chip's replayed sweep."""

from __future__ import annotations

from typing import Any

from sweepd.reports.plots import as_svg
from sweepd.web.page import caveat_texts, figures, render_index, render_page
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.web_pages import card, fetches


def _data(name: str, verdict: dict[str, Any], markdown: str = "") -> dict[str, Any]:
    sweep = {"id": 3, "kind": "model-perf", "name": name, "state": "done",
             "reason": "optimum <b>10</b>", "spec": {}}
    return {"report": {"markdown": markdown or f"# Sweep 3: {name}\n\n- Kind: model-perf\n",
                       "json": {"sweep": sweep, "verdict": verdict, "runs": []}},
            "explain": ["2026-01-01  sweep  →running  [-] <started>"],
            "progress": {"line": "5 runs ran, all ended"}, "plot_svg": None}


def test_a_persons_text_is_shown_as_text_never_as_markup_or_a_link() -> None:
    name = "<script>alert(1)</script> [x](https://evil.example/) ![i](http://evil/i.png)"
    md = f"# Sweep 3: {name}\n\n- Model: <img src=http://evil/x>\n\n| a |\n|---|\n| {name} |\n"
    page = render_page(_data(name, {"rule": "model_perf.optimum"}, md))
    assert "<script>" not in page and "<img" not in page and "<a " not in page
    assert fetches(page) == []
    # What a person reads, escaped: the name in the title and the table, the state line,
    # the Markdown's raw HTML, the explain line.
    check_golden(GOLDEN / "web_page" / "escaped_body.html", page[page.index("<body"):])
    assert "&lt;started&gt;" in page
    assert "<table>" in page   # the kind's Markdown table is a table
    # The check itself sees a remote src and a CSS url(), each on its own.
    assert fetches('<img src="https://x/y.png">') == ["<img src=https://x/y.png>"]
    assert fetches('<p style="x:url(//x)">') == ["<p style=x:url(//x)>"]


def test_the_verdict_card_reads_the_stored_structure() -> None:
    tuning = {"rule": "stop.winner", "recipe": "ag768M", "gain": 0.1245, "gain_runs": 2,
              "interval": [0.1042, 0.1448],
              "caveats": [{"kind": "in_effect", "text": "not run, already in effect: lhs"}]}
    assert figures(tuning) == [("Figure", "ag768M: +12.45%"),
                               ("95 % interval", "+10.42% to +14.48% (2 runs)")]
    assert caveat_texts(tuning) == [tuning["caveats"][0]["text"]]   # type: ignore[index]
    search = {"rule": "model_perf.optimum", "best": 10, "parameter": "per_device_batch_size",
              "tgs": 1282.8, "settled": False, "caveat": "one line", "proposal": "b: 10"}
    assert [label for label, _ in figures(search)] == ["Figure", "Proposed change"]
    check_golden_cases(GOLDEN / "web_page" / "figures.txt", {
        name: "\n".join(f"{label}: {value}" for label, value in figures(verdict))
        for name, verdict in (("tuning", tuning), ("search", search))})
    assert caveat_texts(search) == ["one line"]
    rows, caveats = card(render_page(_data("n", tuning)))
    assert rows["Deciding rule"] == "stop.winner"
    assert rows["95 % interval"] == "+10.42% to +14.48% (2 runs)"
    assert caveats == caveat_texts(tuning)
    # While a job runs, the card says which and how far its steps are (progress's current_job).
    running = _data("n", {})
    running["progress"]["current_job"] = {"job": "10018", "steps_done": 10, "steps": 15}
    rows, _ = card(render_page(running))
    assert rows["Running job"] == "10018: step 10 of 15"
    assert "Running job" not in card(render_page(_data("n", {})))[0]


def test_the_index_lists_each_sweep_with_its_progress_and_best() -> None:
    sweeps = [{"id": 1, "kind": "model-perf", "name": "a <b>", "state": "running",
               "verdict": None, "progress": {"runs_done": 2, "runs_most": 8,
                                             "line": "run 3 of ≤ 8 (2 done)"}},
              {"id": 2, "kind": "xla-tuning", "name": "b", "state": "done",
               "verdict": {"gain": 0.05, "recipe": "r"},
               "progress": {"runs_done": 4, "runs_most": 4, "ended": True, "line": "4 ran"}}]
    page = render_index(sweeps)
    assert page.index('href="/sweeps/2"') < page.index('href="/sweeps/1"')   # newest first
    assert "a &lt;b&gt;" in page and "2/≤8" in page and "r: +5.00%" in page
    assert 'style="width:25%"' in page and 'style="width:100%"' in page


def test_a_chart_drawn_as_svg_names_nothing_to_fetch() -> None:
    from sweepd.kinds.xla_tuning.plot import delta_bars

    png = delta_bars([("a", 0.05, 0.01), ("b", -0.02, 0.01)], "a", "t")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with as_svg():
        svg = delta_bars([("a", 0.05, 0.01), ("b", -0.02, 0.01)], "a", "t").decode()
    assert svg.startswith("<svg") and "<!DOCTYPE" not in svg and "<metadata" not in svg
    assert fetches(svg) == [] and "<text" not in svg   # text drawn as paths
    assert delta_bars([("a", 0.05, 0.01)], "a", "t")[:8] == b"\x89PNG\r\n\x1a\n"   # reset
