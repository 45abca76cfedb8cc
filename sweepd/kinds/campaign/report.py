"""The campaign's report (`<MODEL_TAG>-campaign.md`): each stage's result and the sweep
that holds its evidence, then the confirmed claim (the confirm runs alone), per
parallelism when there are several; a confirm stage's own report is its interleaved runs.
The chart: TGS per stage with intervals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweepd.kinds.campaign import confirm
from sweepd.kinds.campaign.plot import Bar, stage_plot
from sweepd.kinds.campaign.results import cells_of, confirmed_cells
from sweepd.store.rows import Job, Run, Sweep


def _pct(v: Any) -> str:
    return f"{v:+.2%}" if isinstance(v, int | float) else "—"


def _iv(iv: Any) -> str:
    return f"{iv[0]:+.2%} to {iv[1]:+.2%}" if iv else "—"


def _confirm_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    return [{"run": r.label, "arm": "baseline-deployed" if r.label.startswith(confirm.BASE)
             else "candidate", "state": str(r.state), "tgs": r.tgs,
             "batch": r.params.overrides.get("per_device_batch_size"),
             "xla_flags": list(r.params.xla_flags)} for r in runs]


def _table(sweep: Sweep) -> list[tuple[str, str | None, str]]:
    """(stage key, sweep, result) per row: node health once, then each parallelism's
    batch, flags and confirm."""
    v = sweep.verdict or {}
    sweeps = v.get("sweeps", {})
    stages = v.get("stages", sweep.spec.get("stages", []))
    out: list[tuple[str, str | None, str]] = []
    if "health" in stages:
        out.append(("health", sweeps.get("health"), _result("health", v, v)))
    for cell in cells_of(v):
        keys = cell.get("keys") or {}
        out += [(keys.get(s, s), sweeps.get(keys.get(s, s)), _result(s, v, cell, keys))
                for s in stages if s != "health"]
    return out


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    if sweep.spec.get("stages") == ["confirm"]:
        return _confirm_rows(runs)
    return [{"stage": key, "sweep": ref, "result": result}
            for key, ref, result in _table(sweep)]


def _spent(verdict: dict[str, Any]) -> str:
    spent = verdict.get("spent_hours")
    return "" if spent is None else f"; {spent:.1f} h spent on the cluster's clock"


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    if sweep.spec.get("stages") == ["confirm"]:
        return _confirm_markdown(sweep, runs)
    v = sweep.verdict or {}
    tag = f"{sweep.spec.get('model')}-campaign.md"
    par = sweep.spec.get("parallelism")
    cells = cells_of(v)
    lines = [f"## {tag}", "",
             f"- Parallelism: {' + '.join(par) if isinstance(par, list) else par}",
             f"- Budget: {sweep.spec.get('budget_hours')} h over "
             f"{', '.join(sweep.spec.get('stages', []))}" + _spent(v),
             f"- Frozen nodes: {v.get('nodes') or '—'}"]
    several = len(cells) > 1
    lines += [f"  - {c['parallelism']}: {c.get('nodes') or '—'}" for c in cells if several]
    lines += ["", "| Stage | Sweep | Result |", "|---|---|---|"]
    lines += [f"| {key} | {ref if ref is not None else '—'} | {result} |"
              for key, ref, result in _table(sweep)]
    for cell in cells:
        claim = (cell.get("confirmed") or {}).get("claim")
        at = f" at {cell.get('parallelism')}" if several else ""
        if claim:
            lines += ["", f"**Final{at}: {claim}** over the deployed configuration, from the "
                          "confirm runs alone (interleaved baseline-deployed and candidate)."]
    lines += _patch(sweep, v)
    if not v:
        lines += ["", "(in progress: each stage's sweep has its own report)"]
    return "\n".join(lines)


def _patch(sweep: Sweep, v: dict[str, Any]) -> list[str]:
    """What `--apply` writes, by parallelism: the gpu.yml batch (one value, YAML cannot
    guard it) and each recipe, guarded by its parallelism in the env file."""
    good = confirmed_cells(v)
    model = sweep.spec.get("model")
    batches = [(c["parallelism"], c["batch"]["best"]) for c in good
               if (c.get("batch") or {}).get("best") is not None]
    out = [f"- `configs/{model}.gpu.yml`: per_device_batch_size: {b}, found at {p}"
           + (" (the first confirmed parallelism's; YAML cannot guard it)" if i == 0
              and len(batches) > 1 else "" if i == 0 else
              " (noted in the comment: pass it to this parallelism's jobs)")
           for i, (p, b) in enumerate(batches)]
    for c in good:
        f = c.get("flags") or {}
        words = [*f.get("xla_flags", []), *(f"{k}={x}" for k, x in f.get("env", {}).items())]
        if words:
            out.append(f"- `configs/{model}.env.sh`: the {c['parallelism']} recipe, guarded "
                       f"by {c['parallelism']}: {' '.join(words)}")
    if not out:
        return []
    return ["", f"Patch (`sweepd report {sweep.id} --apply`):", *out]


def _result(stage: str, v: dict[str, Any], cell: dict[str, Any],
            keys: dict[str, str] | None = None) -> str:
    if (keys or {}).get(stage, stage) in v.get("skipped", []):
        return "skipped (its sweep ended without a result)"
    if stage == "health" and "health" in v:
        ex = v["health"].get("excluded") or {}
        return ("excluded " + ", ".join(f"{n} {w}" for n, w in ex.items())) if ex \
            else "every node healthy"
    if stage == "batch" and "batch" in cell:
        b = cell["batch"]
        return f"per_device_batch_size={b['best']}" + (
            f" ({b['tgs']:,.0f} TGS/device)" if b.get("tgs") else "")
    if stage == "flags" and "flags" in cell:
        f = cell["flags"]
        if not f.get("xla_flags") and not f.get("env"):
            return f"no recipe ({f.get('verdict')}): the deployed flags stay"
        return (f"{' '.join(f['xla_flags'])} {_pct(f.get('gain'))} "
                f"(interval {_iv(f.get('interval'))}) vs baseline-deployed")
    if stage == "confirm" and "confirmed" in cell:
        return str(cell["confirmed"].get("claim"))
    return "—"


def _confirm_markdown(sweep: Sweep, runs: Sequence[Run]) -> str:
    lines = ["| Run | Arm | Batch | XLA flags | TGS/device | State |", "|---|---|---|---|---|---|"]
    for r in _confirm_rows(runs):
        tgs = f"{r['tgs']:,.1f}" if r["tgs"] else "—"
        lines.append(f"| {r['run']} | {r['arm']} | {r['batch'] or 'config'} | "
                     f"{' '.join(r['xla_flags']) or '—'} | {tgs} | {r['state']} |")
    found = confirm.measure(confirm.passed(runs, confirm.BASE),
                            confirm.passed(runs, confirm.CAND))
    return "\n".join([*lines, "", f"Claim: {found.claim}"])


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """TGS per stage with its interval: where the campaign started (baseline-deployed),
    the batch stage's optimum, the flags stage's recipe, the confirmed candidate (each
    parallelism's, labelled with it, when there are several)."""
    bars = bars_of(verdict_of(sweep, runs))
    return stage_plot(bars, f"{sweep.spec.get('model')} campaign: TGS/device per stage") \
        if bars else None


def verdict_of(sweep: Sweep, runs: Sequence[Run]) -> dict[str, Any]:
    """The verdict the chart draws: a confirm stage alone's is its runs' claim."""
    if sweep.spec.get("stages") == ["confirm"]:
        found = confirm.measure(confirm.passed(runs, confirm.BASE),
                                confirm.passed(runs, confirm.CAND))
        return {"confirmed": found.as_dict()}
    return sweep.verdict or {}


def bars_of(v: dict[str, Any]) -> list[Bar]:
    cells = cells_of(v)
    return [bar for c in cells for bar in _cell_bars(
        c, f"{c.get('parallelism')}: " if len(cells) > 1 else "")]


def _cell_bars(v: dict[str, Any], at: str) -> list[Bar]:
    out: list[Bar] = []
    c = v.get("confirmed") or {}
    base = c.get("base") or []
    if base:
        out.append(Bar.of(f"{at}start (baseline-deployed)", base))
    if (v.get("batch") or {}).get("tgs"):
        out.append(Bar(f"{at}batch stage", v["batch"]["tgs"], None))
    f = v.get("flags") or {}
    if f.get("recipe_tgs") and f.get("baseline_tgs") and f.get("interval"):
        b = f["baseline_tgs"]
        out.append(Bar(f"{at}flags stage", f["recipe_tgs"],
                       (b * (1 + f["interval"][0]), b * (1 + f["interval"][1]))))
    cand = c.get("cand") or []
    if cand:
        out.append(Bar.of(f"{at}confirmed candidate", cand))
    return out
