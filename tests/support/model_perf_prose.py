"""The prose a model perf decision shows a person, laid out for a golden file: a verdict's
line with its typed caveats one per line (as tests/test_verdict_golden.py lays them)."""

from __future__ import annotations

from sweepd.kinds.api import Finished


def verdict_prose(done: Finished) -> str:
    """The verdict line, then each caveat as `[kind] text`."""
    caveats = done.verdict.get("caveats") or []
    return done.summary + "\n" + "".join(f"  [{c['kind']}] {c['text']}\n" for c in caveats)


def caveat_kinds(done: Finished) -> list[str]:
    """The kinds of a verdict's caveats, in the order the line says them."""
    return [str(c["kind"]) for c in done.verdict.get("caveats") or []]


def caveat_of(done: Finished, kind: str) -> dict[str, object]:
    """The verdict's one caveat of `kind` (its text and data)."""
    found = [c for c in done.verdict.get("caveats") or [] if c["kind"] == kind]
    assert len(found) == 1, (kind, caveat_kinds(done))
    return dict(found[0])
