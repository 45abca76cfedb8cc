"""`sweepd compare ID ID`: two sweeps side by side, as people used to Optuna's and W&B's
run comparisons read them: kind, model, nodes, verdict, best value and its figure, runs,
node-hours; then per value both sweeps' TGS where both ran. Reads the reports' JSON (the
daemon's, or a state directory's with --state-dir)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from sweepd.cli.client import Client
from sweepd.cli.output import cell, print_json, say
from sweepd.cli.source import with_source
from sweepd.util.columns import align
from sweepd.util.text import escape

VERDICT_CHARS = 70   # the verdict's first clause, cut: the whole is in `report`


def run_compare(args: argparse.Namespace) -> int:
    def body(client: Client) -> int:
        left, right = (client.reads.report(i)["json"] for i in (args.a, args.b))
        if args.json:
            print_json({"sweeps": [_side(left), _side(right)],
                        "per_value": _per_value(left, right)})
        else:
            say(compare_text(args.a, args.b, left, right))
        return 0

    return with_source(args, body)


def _verdict(report: Mapping[str, Any]) -> str:
    sweep = report["sweep"]
    reason = str(sweep.get("reason") or "").split("; ", 1)[0]
    text = f"{sweep['state']}" + (f": {reason}" if reason else "")
    return text if len(text) <= VERDICT_CHARS else text[:VERDICT_CHARS - 1] + "…"


def _best(report: Mapping[str, Any]) -> str | None:
    verdict = report.get("verdict") or {}
    if verdict.get("best") is None:
        return None
    name = f"{verdict['parameter']}={verdict['best']}" if verdict.get("parameter") \
        else str(verdict["best"])
    return name + (f" at {cell(verdict['tgs'])} TGS" if verdict.get("tgs") is not None else "")


def _side(report: Mapping[str, Any]) -> dict[str, Any]:
    sweep, runs = report["sweep"], report.get("runs") or []
    return {"id": sweep["id"], "kind": sweep["kind"], "model": sweep["spec"].get("model"),
            "nodes": len(_nodes(sweep["spec"])), "verdict": _verdict(report),
            "best": _best(report), "runs": len(runs),
            "node_hours": round(sum(r["node_hours"] or 0 for r in runs), 2)}


def _nodes(spec: Mapping[str, Any]) -> list[str]:
    from sweepd.util.hostlists import expand_nodes

    return expand_nodes(str(spec.get("nodes") or ""))


def _measured(report: Mapping[str, Any]) -> dict[str, float]:
    """Value -> TGS of its best finished run in the sweep."""
    out: dict[str, float] = {}
    for row in report.get("runs") or []:
        if row["tgs"] is not None and row["state"] == "passed":
            out[row["values"]] = max(out.get(row["values"], 0.0), float(row["tgs"]))
    return out


def _per_value(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[dict[str, Any]]:
    a, b = _measured(left), _measured(right)
    return [{"value": v, "a": a[v], "b": b[v]} for v in a if v in b]


def compare_text(a: int, b: int, left: Mapping[str, Any], right: Mapping[str, Any]) -> str:
    sides = (_side(left), _side(right))
    rows = [["", f"sweep {a}", f"sweep {b}"]]
    for key, header in (("kind", "kind"), ("model", "model"), ("nodes", "nodes"),
                        ("verdict", "verdict"), ("best", "best"), ("runs", "runs"),
                        ("node_hours", "node-hours")):
        rows.append([header, *(cell(s[key]) for s in sides)])
    lines = align(rows)
    both = _per_value(left, right)
    lines += ["", "per value (TGS where both ran):"]
    if both:
        lines += align([["VALUE", f"#{a}", f"#{b}"],
                        *([escape(r["value"]), cell(r["a"]), cell(r["b"])] for r in both)])
    else:
        lines.append("  (no value was run by both)")
    return "\n".join(lines)


def compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=int, metavar="ID", help="a sweep")
    p.add_argument("b", type=int, metavar="ID", help="the sweep to set beside it")
