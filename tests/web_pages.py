"""A recorded sweep's HTML page (`sweepd report ID --html`), checked against the structures
it is rendered from: the report's JSON (the verdict's rule, figure and caveats, each run's
row), `explain`'s lines, and a file that names nothing to fetch. The demo tests and the
chip's replayed sweep call it on the state directory they keep."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

_REMOTE = re.compile(r"^\s*(?:https?:)?//", re.I)
_CSS_FETCH = re.compile(r"url\(\s*[\"']?\s*(?:https?:)?//|@import", re.I)


class _Fetches(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "poster", "data") \
                    and value and _REMOTE.search(value):
                self.found.append(f"<{tag} {name}={value}>")
            if name == "style" and value and _CSS_FETCH.search(value):
                self.found.append(f"<{tag} style={value}>")

    def handle_data(self, data: str) -> None:
        if self._in_style and _CSS_FETCH.search(data):
            self.found.append("<style> fetches")


def fetches(page: str) -> list[str]:
    """Anything a browser would fetch from the page: a src or href to http(s) or //, a CSS
    url() or @import (text that only shows such a string is not one)."""
    parser = _Fetches()
    parser.feed(page)
    return parser.found


class _Card(HTMLParser):
    """The verdict card's rows (each `<dt>` with its `<dd>`, as text) and caveats (`<li>`)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.caveats: list[str] = []
        self._depth = 0          # > 0 inside the card's <section id="verdict">
        self._tag = ""
        self._key = ""
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._depth:
            self._depth += tag == "section"
        elif tag == "section" and ("id", "verdict") in attrs:
            self._depth = 1
        if self._depth and tag in ("dt", "dd", "li"):
            self._tag, self._text = tag, ""

    def handle_endtag(self, tag: str) -> None:
        if not self._depth:
            return
        if tag == self._tag == "dt":
            self._key = self._text
        elif tag == self._tag == "dd":
            self.rows[self._key] = self._text
        elif tag == self._tag == "li":
            self.caveats.append(self._text)
        if tag == self._tag:
            self._tag = ""
        self._depth -= tag == "section"

    def handle_data(self, data: str) -> None:
        if self._tag:
            self._text += data


def card(page: str) -> tuple[dict[str, str], list[str]]:
    """The verdict card of `page`, as the structure it is rendered from: its rows by label
    ("Deciding rule", "Figure", ...) and its caveats, each as the text a person reads."""
    parser = _Card()
    parser.feed(page)
    return parser.rows, parser.caveats


def _sweepd(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def check_page(state_dir: Path, sweep_id: int = 1, *, plot: bool = True) -> str:
    """Writes the page, checks it, returns its text."""
    path = state_dir.parent / f"sweep-{state_dir.name}-{sweep_id}.html"
    _sweepd("report", str(sweep_id), "--html", str(path), "--state-dir", str(state_dir))
    page = path.read_text("utf-8")
    report: dict[str, Any] = json.loads(_sweepd("report", str(sweep_id), "--json",
                                                "--state-dir", str(state_dir)))
    explain = json.loads(_sweepd("--json", "explain", str(sweep_id), "--state-dir",
                                 str(state_dir)))
    assert page.startswith("<!DOCTYPE html>")
    assert fetches(page) == []
    assert "default-src 'none'" in html.unescape(page) and "<script" not in page
    text = html.unescape(page)
    verdict = report["verdict"] or {}
    # The verdict first: its card before the chart, the report and the runs.
    at = page.index('id="verdict"')
    assert at < page.index("<h2>Report</h2>") < page.index("<h2>Runs</h2>")
    rows, _ = card(page)
    if verdict.get("rule"):
        assert rows["Deciding rule"] == verdict["rule"]
    for caveat in verdict.get("caveats") or []:
        assert caveat["text"] in text
    if isinstance(verdict.get("interval"), list):
        lo, hi = verdict["interval"]
        assert f"{lo:+.2%} to {hi:+.2%}" in text
    if verdict.get("proposal"):
        assert str(verdict["proposal"]) in text
    # Every run's row, and every explain line, as the CLI reads them.
    runs = report["runs"]
    assert page.count("<tr><td class=num>") >= len(runs)
    for row in runs:
        assert f"<td class=num>{row['run']}</td><td>{html.escape(row['values'])}</td>" in page
    for line in explain["lines"]:
        assert line in text, line
    if plot:
        assert "<svg" in page.split("<h2>Report</h2>")[0]
    return page
