"""One-line results as they land (batch-sweep.SKILL.md "Progressive reporting")."""

from __future__ import annotations


def result_line(model: str, nodes: int, label: str, backend_id: str | None, outcome: str,
                tgs: float | None, mfu: float | None, detail: str | None = None) -> str:
    """`llama2-70b 8N per_device_batch_size=12 (job 9801): 2,036 TGS/device, 34.9% MFU — PASS`"""
    prefix = "" if label.startswith(model) else f"{model} {nodes}N "
    head = f"{prefix}{label} (job {backend_id or '?'})"
    if outcome == "pass" and tgs is not None:
        mfu_part = f", {mfu:.1f}% MFU" if mfu is not None else ""
        return f"{head}: {tgs:,.0f} TGS/device{mfu_part} — PASS"
    if outcome == "cancelled":   # no result: the run goes again, or a person is asked
        return f"{head}: CANCELLED"
    what = {"oom": "OOM", "hang": "HANG"}.get(outcome, "FAILED")
    return f"{head}: {what}{f' ({detail})' if detail else ''} — FAIL"


def retry_line(failed_line: str, reason: str) -> str:
    """The attempt's line, turned into a retry notice (a cancel's: why it runs again)."""
    if not failed_line.endswith(" — FAIL"):
        return f"{failed_line} — {reason}"
    return failed_line.replace(" — FAIL", f" — RETRY: {reason}")
