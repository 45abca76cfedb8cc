"""A sweep's page in HTML: one self-contained file (`sweepd report ID --html PATH`) and the
body of the dashboard's live view (`/sweeps/ID`), rendered from what `Queries.page` reads:
the report's Markdown and JSON, the `explain` lines, the progress and the kind's chart as
inline SVG.

The report's Markdown is rendered with markdown-it-py (a CommonMark parser, already
installed with rich): the kind's table and the proposal are the report's own text, so the
page says what `report` says and cannot drift from it. Raw HTML in that Markdown is shown
as text (a spec's name is a person's input), and links and images are not parsed: the page
must name nothing to fetch, and it opens with the network off. The verdict card, the runs
table and the progress come from the JSON structures (the stored verdict's rule, figure,
interval and caveats; `run_rows`; `sweep_progress`), each value escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from markdown_it import MarkdownIt

# Inline, no font to load; a narrow screen stacks the cards and lets wide tables scroll,
# a printed page drops the live marker and keeps tables whole.
CSS = """
:root{--fg:#1b1f23;--muted:#59636e;--line:#d0d7de;--bg:#fff;--card:#f6f8fa;--ok:#1a7f37;
--warn:#9a6700;--bad:#cf222e}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1100px;padding:1rem;font:15px/1.45 system-ui,-apple-system,
"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:1.4rem;margin:.2rem 0 .6rem}h2{font-size:1.1rem;margin:1.4rem 0 .5rem;
border-bottom:1px solid var(--line);padding-bottom:.2rem}
.verdict{background:var(--card);border:1px solid var(--line);border-left:5px solid var(--ok);
border-radius:6px;padding:.8rem 1rem}
.verdict.open{border-left-color:var(--warn)}.verdict.bad{border-left-color:var(--bad)}
.verdict p{margin:.2rem 0 .6rem}
.verdict,.report li,.report p{overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}
dt{color:var(--muted)}dd{margin:0}
.caveats{margin:.4rem 0 0;padding-left:1.2rem}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.9rem;margin:.4rem 0}
th,td{border:1px solid var(--line);padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:var(--card)}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre,code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:var(--card);padding:.6rem;overflow-x:auto;border-radius:4px}
.plot svg{max-width:100%;height:auto}
.muted{color:var(--muted)}
.bar{height:.6rem;background:var(--line);border-radius:3px;overflow:hidden;min-width:6rem}
.bar i{display:block;height:100%;background:var(--ok)}
.live{font-size:.8rem;color:var(--muted)}
@media (max-width:640px){body{padding:.5rem;font-size:14px}
dl{grid-template-columns:1fr}dt{margin-top:.3rem}
table{font-size:.8rem}}
@media print{.live{display:none}body{max-width:none}pre{white-space:pre-wrap}
h2{break-after:avoid}table,.plot{break-inside:avoid}}
"""

# The file opens with the network off: its own policy forbids every fetch.
STATIC_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return md.disable(["link", "image", "autolink"])


MD = _markdown()


def e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def document(title: str, body: str, *, head: str = "", csp: str = STATIC_CSP) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{e(csp)}\">"
            "<meta name=\"referrer\" content=\"no-referrer\">"
            f"<title>{e(title)}</title><style>{CSS}</style>{head}</head>"
            f"<body>{body}</body></html>\n")


def page_title(data: Mapping[str, Any]) -> str:
    sweep = data["report"]["json"]["sweep"]
    return f"sweepd: sweep {sweep['id']} — {sweep['name']}"


def render_page(data: Mapping[str, Any]) -> str:
    """The self-contained file: the sweep's page, no script, nothing to fetch."""
    return document(page_title(data), f"<main id=\"page\">{render_main(data)}</main>")


def render_main(data: Mapping[str, Any]) -> str:
    """The page's body (the live view replaces it whole on each update): the verdict
    first, the chart, the report (the kind's table, the proposal), the runs, the timeline."""
    report = data["report"]
    js = report["json"]
    sweep = js["sweep"]
    parts = [f"<h1>Sweep {e(sweep['id'])}: {e(sweep['name'])}</h1>",
             verdict_card(sweep, js.get("verdict") or {}, data.get("progress") or {})]
    if data.get("plot_svg"):
        # Our own chart, drawn by matplotlib from numbers (its text as paths): inlined as is.
        parts += ["<h2>Chart</h2>", f"<div class=\"plot\">{data['plot_svg']}</div>"]
    parts += ["<h2>Report</h2>", f"<div class=\"scroll report\">{report_html(report)}</div>",
              "<h2>Runs</h2>", runs_table(js.get("runs") or []),
              "<h2>Decision timeline</h2>",
              "<p class=\"muted\">What <code>sweepd explain</code> prints: every transition and "
              "decision, with the rule that made it and its evidence.</p>",
              f"<pre class=\"timeline\">{e(chr(10).join(data.get('explain') or []))}</pre>"]
    return "\n".join(parts)


def report_html(report: Mapping[str, Any]) -> str:
    """The report's Markdown, without its title (the page has its own) rendered."""
    text = str(report["markdown"])
    if text.startswith("# "):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return str(MD.render(text))


def _state_class(state: str, verdict: Mapping[str, Any]) -> str:
    if state in ("failed", "aborted"):
        return "bad"
    if state != "done" or verdict.get("settled") is False:
        return "open"
    return ""


def verdict_card(sweep: Mapping[str, Any], verdict: Mapping[str, Any],
                 progress: Mapping[str, Any]) -> str:
    """The verdict, from the stored structure: the state line (the kind's own verdict
    prose), then the figure, its interval, the rule that decided and each caveat. Keys a
    kind does not store are left out: the card names no kind."""
    state = str(sweep.get("state"))
    said = sweep.get("reason") or ("no verdict yet" if state != "done" else "")
    rows = [("State", state)]
    if progress.get("line"):
        rows.append(("Progress", progress["line"]))
    job = progress.get("current_job")
    if isinstance(job, Mapping) and job.get("job") is not None:
        rows.append(("Running job", f"{job['job']}: step {job.get('steps_done', 0)} of "
                                    f"{job.get('steps', '?')}"))
    for label, value in figures(verdict):
        rows.append((label, value))
    if verdict.get("rule"):
        rows.append(("Deciding rule", verdict["rule"]))
    body = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    caveats = caveat_texts(verdict)
    listed = ("<div class=\"muted\">Caveats</div><ul class=\"caveats\">"
              + "".join(f"<li>{e(c)}</li>" for c in caveats) + "</ul>") if caveats else ""
    return (f"<section class=\"verdict {_state_class(state, verdict)}\" id=\"verdict\">"
            f"<p><strong>{e(said)}</strong></p><dl>{body}</dl>{listed}</section>")


def figures(verdict: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The verdict's figure and interval, as the stored verdict holds them: a gain with its
    95 % interval (a tuning), a best value with its TGS and range (a search)."""
    out: list[tuple[str, str]] = []
    if isinstance(verdict.get("gain"), int | float):
        what = f"{verdict['gain']:+.2%}"
        if verdict.get("recipe"):
            what = f"{verdict['recipe']}: {what}"
        out.append(("Figure", what))
        interval = verdict.get("interval")
        if isinstance(interval, Sequence) and len(interval) == 2:
            runs = f" ({verdict['gain_runs']} runs)" if verdict.get("gain_runs") else ""
            out.append(("95 % interval", f"{interval[0]:+.2%} to {interval[1]:+.2%}{runs}"))
    elif verdict.get("best") is not None:
        what = f"{verdict.get('parameter') or 'best'}={verdict['best']}"
        if verdict.get("second_best") is not None:
            what += f", {verdict['second_best']}"
        if isinstance(verdict.get("tgs"), int | float):
            what += f" at {verdict['tgs']:,.0f} TGS/device"
        if verdict.get("settled") is False:
            what += " (best so far, not settled)"
        out.append(("Figure", what))
        spread = verdict.get("tgs_range")
        if isinstance(spread, Sequence) and len(spread) == 2:
            out.append(("Range", f"{spread[0]:,.0f} to {spread[1]:,.0f} TGS/device"))
    if verdict.get("proposal"):
        out.append(("Proposed change", str(verdict["proposal"])))
    return out


def caveat_texts(verdict: Mapping[str, Any]) -> list[str]:
    """Each typed caveat's clause; a verdict stored with one caveat line, that line."""
    typed = [str(c["text"]) for c in verdict.get("caveats") or []
             if isinstance(c, Mapping) and c.get("text")]
    if typed:
        return typed
    return [str(verdict["caveat"])] if verdict.get("caveat") else []


_RUN_COLUMNS = (("run", "#"), ("values", "Values"), ("state", "State"), ("tgs", "TGS/device"),
                ("mfu", "MFU %"), ("memory", "Memory"), ("job_id", "Job"), ("nodes", "Nodes"),
                ("start", "Start"), ("end", "End"), ("node_hours", "Node-hours"))
_NUMERIC = {"run", "tgs", "mfu", "node_hours"}


def _cell(key: str, row: Mapping[str, Any]) -> str:
    value = row.get(key)
    if value is None:
        return "—"
    if key == "state" and row.get("failure_class"):
        return f"{value} ({row['failure_class']})"
    if key == "tgs" and isinstance(value, int | float):
        return f"{value:,.0f}"
    if key == "mfu" and isinstance(value, int | float):
        return f"{value:.1f}"
    return str(value)


def runs_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per run (`reports/run_table.run_rows`, what `report --csv` writes)."""
    if not rows:
        return "<p class=\"muted\">No run yet.</p>"
    head = "".join(f"<th>{e(title)}</th>" for _, title in _RUN_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td{' class=num' if k in _NUMERIC else ''}>"
                                    f"{e(_cell(k, r))}</td>" for k, _ in _RUN_COLUMNS)
                   + "</tr>" for r in rows)
    return (f"<div class=\"scroll\"><table class=\"runs\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def progress_bar(progress: Mapping[str, Any]) -> str:
    """Runs done of the most, as `top` draws it."""
    done, most = progress.get("runs_done") or 0, progress.get("runs_most")
    share = min(1.0, done / most) if most else (1.0 if progress.get("ended") else 0.0)
    return (f"<div class=\"bar\" title=\"{e(done)} of {e(most if most is not None else '?')}"
            f"\"><i style=\"width:{share * 100:.0f}%\"></i></div>")


def best_so_far(sweep: Mapping[str, Any]) -> str:
    verdict = sweep.get("verdict") or {}
    shown = figures(verdict)
    return shown[0][1] if shown else "—"


def render_index(sweeps: Sequence[Mapping[str, Any]]) -> str:
    """The dashboard's first page: each sweep's state, progress, ETA and best so far."""
    if not sweeps:
        return "<h1>Sweeps</h1><p class=\"muted\">No sweep yet.</p>"
    rows = []
    for s in sorted(sweeps, key=lambda s: -int(s["id"])):
        p = s.get("progress") or {}
        most = p.get("runs_most")
        runs = f"{p.get('runs_done', 0)}/{'≤' + str(most) if most is not None else '?'}"
        rows.append(
            f"<tr><td class=num><a href=\"/sweeps/{e(s['id'])}\">{e(s['id'])}</a></td>"
            f"<td>{e(s.get('state'))}</td><td>{e(s.get('kind'))}</td>"
            f"<td>{progress_bar(p)}<span class=\"muted\">{e(runs)}</span></td>"
            f"<td>{e(p.get('line'))}</td><td>{e(best_so_far(s))}</td>"
            f"<td><a href=\"/sweeps/{e(s['id'])}\">{e(s.get('name'))}</a></td></tr>")
    return ("<h1>Sweeps</h1><div class=\"scroll\"><table class=\"sweeps\"><thead><tr>"
            "<th>ID</th><th>State</th><th>Kind</th><th>Runs</th><th>Progress · ETA</th>"
            "<th>Best so far</th><th>Name</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")
