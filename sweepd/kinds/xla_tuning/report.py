"""The xla-tuning report: the leaderboard (table, JSON rows, plot) and `<MODEL_TAG>-tuning.md`.

Every number comes from the store through `gather.results` and `board.build`, the same
view the planner decided from: a profile's TGS is the mean of its measured runs (each the
job's recorded steady TGS), its delta is over baseline-deployed's mean, its whisker the
standard error of that delta from the cell's own noise.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from sweepd.kinds.xla_tuning import deploy, gather, logfacts, tuning_md
from sweepd.kinds.xla_tuning.board import BASELINE, EVIDENCE, RESTORE, Board, Outcome, Result, build
from sweepd.kinds.xla_tuning.catalog import (
    Axis,
    Evidence,
    Layer,
    Profile,
    Setting,
    bubble,
    stack,
)
from sweepd.kinds.xla_tuning.flags import IMAGE_DEFAULTS
from sweepd.kinds.xla_tuning.labels import roles
from sweepd.kinds.xla_tuning.plot import delta_bars
from sweepd.kinds.xla_tuning.search import profiles
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import Job, Run, Sweep
from sweepd.util.model_shapes import resolve_model
from sweepd.util.text import escape

_STATUS = {Outcome.OK: "ok", Outcome.OOM: "oom", Outcome.UNKNOWN_FLAG: "unknown flag",
           Outcome.NOT_APPLIED: "not applied", Outcome.FLAKE: "flake"}


@dataclass(frozen=True)
class View:
    spec: XlaTuningSpec
    results: list[Result]
    board: Board
    table: dict[str, Profile]
    # What the env file sets, as the store knows it: the keys restore_default put back.
    restored: tuple[str, ...] = ()
    # Each profile's settings as its run's params carry them (a profile the spec's table
    # cannot rebuild: restore_default, whose values come from the env file).
    recorded: dict[str, str] | None = None
    batch: int | None = None  # the per_device_batch_size the runs carried
    commit: str | None = None  # the commit the runs were submitted from, when recorded
    evidence: Evidence | None = None  # the evidence run's HLO shares

    @property
    def primary(self) -> str:
        return next(iter(self.spec.config_tags))


def view(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
         read: logfacts.Reader = logfacts.stored) -> View:
    spec = XlaTuningSpec.from_stored(sweep.spec)
    assert isinstance(spec, XlaTuningSpec)
    results = roles(gather.results(runs, jobs, read), runs, jobs)
    t = spec.thresholds
    batch = next((r.params.overrides.get("per_device_batch_size") for r in runs
                  if "per_device_batch_size" in r.params.overrides), None)
    commit = next((r.params.commit for r in runs if r.params.commit), None)
    return View(spec, results, build(results, t.noise, t.max_flakes), profiles(spec.inputs()),
                restored_keys(runs), recorded_settings(runs),
                int(batch) if isinstance(batch, int | float | str) and str(batch).isdigit()
                else None, commit, gather.evidence(runs, jobs))


def recorded_settings(runs: Sequence[Run]) -> dict[str, str]:
    out: dict[str, str] = {}
    for run in runs:
        p = run.params
        if p.profile is not None and p.profile not in out:
            # Not its overrides: those carry the config tag's too.
            out[p.profile] = " ".join([*p.xla_flags, *(f"{k}={v}" for k, v in p.env.items())])
    return out


def restored_keys(runs: Sequence[Run]) -> tuple[str, ...]:
    """The XLA flags and env vars a restore_default run put back to the image's defaults:
    the env file's settings (the Inventory), read from the run's own params."""
    for run in runs:
        p = run.params
        if p.profile == RESTORE:
            flags = [f[2:].split("=", 1)[0] for f in p.xla_flags]
            return tuple(dict.fromkeys([*flags, *p.env]))
    return ()


def flags_of(name: str, table: dict[str, Profile], recorded: dict[str, str] | None = None
             ) -> str:
    """A profile's settings as they reach the job (a stack from its parts); one the table
    cannot rebuild as its run recorded them."""
    parts = [table.get(p) for p in name.split("+")]
    if any(p is None for p in parts):
        return (recorded or {}).get(name) or name
    prof = stack(tuple(p for p in parts if p is not None))
    return " ".join(s.text for s in prof.settings) or "(as deployed)"


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """One row per profile and config tag, best first: the leaderboard the JSON carries."""
    return leaderboard(view(sweep, runs, jobs))


def leaderboard(v: View) -> list[dict[str, Any]]:
    out = []
    for e in sorted(v.board.entries.values(), key=lambda e: (e.tag != v.primary,
                                                             -(e.mean if e.n else -1.0))):
        ok = [r for r in v.results if (r.profile, r.tag) == (e.profile, e.tag)
              and r.outcome is Outcome.OK]
        out.append({"profile": e.profile, "tag": e.tag,
                    "flags": flags_of(e.profile, v.table, v.recorded),
                    "tgs": e.mean if e.n else None, "n": e.n,
                    "delta": v.board.delta(e.profile, e.tag), "se": v.board.se(e.profile, e.tag),
                    "fate": str(e.fate), "detail": e.detail, "flakes": e.flakes,
                    "job_ids": [r.job_id for r in ok],
                    "step_s": _mean([r.step_s for r in ok]), "loss": _mean([r.loss for r in ok])})
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    got = [x for x in values if x is not None]
    return fmean(got) if got else None


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    table = rows(sweep, runs, jobs)
    if not table:
        return "No run has finished yet."
    winner = (sweep.verdict or {}).get("recipe")
    lines = ["| Profile | Config | TGS | n | Δ vs baseline-deployed | Jobs | Fate |",
             "|---|---|---|---|---|---|---|"]
    for r in table:
        tgs = f"{r['tgs']:.1f}" if r["tgs"] is not None else "—"
        delta = f"{r['delta']:+.2%} ± {r['se']:.2%}" if r["delta"] is not None else "—"
        fate = r["fate"] + (f" ({r['detail']})" if r["detail"] else "")
        star = " ⭐" if r["profile"] == winner and r["tag"] == table[0]["tag"] else ""
        lines.append(f"| {r['profile']}{star} | {r['tag']} | {tgs} | {r['n']} | {delta} | "
                     f"{', '.join(r['job_ids']) or '—'} | {fate} |")
    model = sweep.spec.get("model")
    lines += ["", f"`sweepd report {sweep.id} --tuning-md` writes {model}-tuning.md here"
              + (f"; `--apply` writes the {winner} recipe, guarded by parallelism, into "
                 f"configs/{model}.env.sh" if winner else "") + "."]
    return "\n".join(lines)


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """Δ% bars vs baseline-deployed on the primary tag, each with its noise whisker."""
    v = view(sweep, runs, jobs)
    bars = [(r["profile"], r["delta"], r["se"]) for r in leaderboard(v)
            if r["tag"] == v.primary and r["delta"] is not None and r["profile"] != EVIDENCE]
    if not bars:
        return None
    winner = (sweep.verdict or {}).get("recipe")
    title = f"{v.spec.model} {v.spec.parsed_parallelism().text} ({v.primary})"
    return delta_bars(bars, winner if isinstance(winner, str) else None, title)


def report_json(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> dict[str, Any]:
    """The JSON report: the same cell the markdown file is written from (`cell`, which the
    CLI writes `<MODEL_TAG>-tuning.md` from), and the env-file patch `--apply` writes: the
    winner's lines guarded by parallelism (empty: nothing to deploy)."""
    v = view(sweep, runs, jobs)
    c = cell(sweep, v)
    guard = guard_for(v.spec)
    return {"model": v.spec.model, "parallelism": c.parallelism, "tag": c.tag,
            "header": c.header, "verdict": sweep.verdict, "noise": v.board.noise,
            "leaderboard": leaderboard(v), "winner": c.winner, "patch": c.patch,
            "guard": guard, "env_patch": c.patch if c.winner else "",
            "deploy": deployment(v, c.winner),
            "jobs": [j.__dict__ for j in c.jobs], "cell": tuning_md.cell_to_json(c)}


def cell(sweep: Sweep, v: View, guard: str = "") -> tuning_md.Cell:
    spec, board, primary = v.spec, v.board, v.primary
    verdict = sweep.verdict or {}
    winner = verdict.get("recipe") if isinstance(verdict.get("recipe"), str) else None
    standing = [_standing(v, r) for r in leaderboard(v)
                if r["tag"] == primary and r["n"] and r["profile"] != EVIDENCE]
    shape = resolve_model(spec.model)
    header = {"Date": sweep.created_at, "Hardware": f"{spec.count} nodes x "
              f"{shape.gpus_per_node} GPUs ({spec.nodes or 'slot not resolved'})",
              "Parallelism": spec.parsed_parallelism().text,
              "Base config": f"configs/{spec.model}.gpu.yml",
              "Sequence length": str(shape.seq_len), "Steps": str(max(spec.steps, 15)),
              "Image": _recorded(runs_env(v, "DOCKER_IMAGE"), "the checkout's container_env.sh "
                                 "DOCKER_IMAGE (not recorded by the sweep)"),
              "MaxText branch/commit": _recorded(v.commit, "the checkout's HEAD (not recorded "
                                                 "by the sweep)"),
              "per_device_batch_size": _batch(v, verdict),
              "Metric": "steady TGS/device, steps 5-14 (9-14 with the profiler), "
                        f"per-run noise {board.noise:.2%}",
              "Sweep": f"{sweep.id} ({sweep.state})"}
    return tuning_md.Cell(
        spec.model, spec.parsed_parallelism().text, primary, header, _inventory(v),
        _env_effect(v), tuple(standing), winner, _why(v, winner),
        str(verdict.get("reason") or f"in progress ({sweep.state})"), _patch(v, winner),
        tuple(_job(r) for r in v.results if r.outcome is not Outcome.PENDING), guard)


def _recorded(value: str | None, otherwise: str) -> str:
    return value if value else otherwise


def runs_env(v: View, key: str) -> str | None:
    return v.spec.env.get(key)


def _batch(v: View, verdict: dict[str, Any]) -> str:
    """The numeric per_device_batch_size the jobs ran with, and where it came from."""
    value = v.batch
    source = verdict.get("batch_source")
    shown = str(value) if value is not None else "as configured (the config's value)"
    return shown + (f" ({source})" if source else "")


def _standing(v: View, row: dict[str, Any]) -> tuning_md.Standing:
    base = v.board.base(row["tag"])
    base_loss = _mean([r.loss for r in v.results if r.profile == BASELINE
                       and r.tag == row["tag"] and r.outcome is Outcome.OK])
    shift = bool(row["loss"] is not None and base_loss and base is not None
                 and abs(row["loss"] / base_loss - 1) > 2 * v.board.noise)
    return tuning_md.Standing(row["profile"], row["flags"], row["tgs"], row["step_s"],
                              row["delta"] or 0.0, row["n"], tuple(row["job_ids"]), shift,
                              row["se"])


def _inventory(v: View) -> str:
    deployed = v.table.get(RESTORE)
    image = " ".join(f"--{k}={x}" for k, x in IMAGE_DEFAULTS.items() if k.startswith("xla_"))
    keys = [s.key for s in deployed.settings] if deployed else list(v.restored)
    found = (", ".join(keys) if keys else
             "no XLA/NCCL setting recorded (no restore_default run: the env file sets none, "
             "or was not read)")
    return f"- Image's inherited XLA_FLAGS: `{image}`\n- Env file sets: {found}"


def _env_effect(v: View) -> str:
    """Wave 1: baseline-deployed against restore_default, naming exactly what restore_default
    put back (the measured statement, nothing more)."""
    put_back = ", ".join(v.restored) or "the env file's settings"
    out = []
    for tag in v.spec.config_tags:
        b, r = v.board.get(BASELINE, tag), v.board.get(RESTORE, tag)
        if b is None or not b.n:
            out.append(f"- {tag}: baseline-deployed not measured")
        elif r is None or not r.n:
            out.append(f"- {tag}: baseline-deployed {b.mean:.1f} TGS (n={b.n}); "
                       "restore_default not run (the env file sets no XLA/NCCL flag)")
        else:
            d = r.mean / b.mean - 1
            se = v.board.se(RESTORE, tag)
            size = "beyond noise" if abs(d) > 2 * se else "within noise"
            out.append(f"- {tag}: baseline-deployed {b.mean:.1f} TGS (n={b.n}), restore_default "
                       f"{r.mean:.1f} (n={r.n}): putting {put_back} back to the image's "
                       f"default moved TGS {d:+.2%} (± {se:.2%}, {size})")
    return "\n".join(out)


def _mechanism(part: str, v: View) -> str:
    """What one part of the recipe changes, from its own settings only."""
    if part == RESTORE:
        return _restore_mechanism(v)
    prof = v.table.get(part)
    if prof is None:
        return part
    mechs = sorted({str(m) for m in prof.mechanisms}) or ["an unclassified setting"]
    return f"{part} ({', '.join(mechs)}: `{' '.join(st.text for st in prof.settings)}`)"


def _restore_mechanism(v: View) -> str:
    """restore_default as its runs carried it (`deploy.parts`: the table's profile, else the
    run's recorded settings) and what those keys act on; never an "unknown mechanism"."""
    keys = ", ".join(v.restored) or "the env file's settings"
    try:
        (part,) = _parts(v, RESTORE)
    except deploy.DeployError:
        return f"restore_default (puts {keys} back to the image's defaults)"
    mechs = sorted(deploy.key_mechanisms(part.settings)) or ["a setting no catalog family sets"]
    shown = " ".join(st.text for st in part.settings) or "no setting recorded"
    return (f"restore_default ({', '.join(mechs)}: `{shown}`, putting {keys} back to the "
            "image's defaults)")


def _why(v: View, winner: str | None) -> str:
    """Why the winning flag wins: what each part changes, the evidence run's figures (each
    cost's share of the step from its HLO dump, the pipeline bubble on PP) and job ids."""
    evidence = [r.job_id for r in v.results if r.profile == EVIDENCE and r.job_id]
    source = (f"evidence run job {evidence[-1]} (profiler + HLO dump)" if evidence
              else "no evidence run measured")
    figures = ""
    if v.evidence is not None:
        figures = f"; its HLO dump: {v.evidence.describe()}"
    par = v.spec.parsed_parallelism()
    stages = par.degree(Axis.PP)
    if stages > 1:
        micro = v.spec.overrides.get("num_pipeline_microbatches")
        m = int(micro) if isinstance(micro, int) else stages
        figures += (f"; pipeline bubble (S-1)/(M*V+S-1) = {bubble(stages, m):.1%} "
                    f"(S={stages}, M={m}, V=1)")
    if winner is None:
        return f"No winner; {source}{figures}."
    ok = [r.job_id for r in v.results if r.profile == winner and r.tag == v.primary
          and r.outcome is Outcome.OK]
    parts = "; ".join(_mechanism(p, v) for p in winner.split("+"))
    return (f"{winner} changes: {parts}. Measured in jobs {', '.join(ok) or '—'}; the "
            f"catalog was ordered for {par.text} from {source}{figures}.")


def _parts(v: View, winner: str) -> tuple[deploy.Part, ...]:
    recorded = {k: deploy.settings_from_text(t) for k, t in (v.recorded or {}).items()}
    return deploy.parts(winner, v.table, recorded)


def deployment(v: View, winner: str | None) -> dict[str, Any] | None:
    """What `--apply` writes: the recipe's exact lines (restore_default's included) and the
    cell they are guarded by (`kinds.xla_tuning.deploy`); None: nothing to deploy."""
    if winner is None:
        return None
    try:
        lines = deploy.body(_parts(v, winner))
    except deploy.DeployError as e:
        return {"error": str(e)}
    return {"model": v.spec.model, "parallelism": v.spec.parsed_parallelism().text,
            "lines": lines}


def _patch(v: View, winner: str | None) -> str:
    """The env-file block as `--apply` writes it (guarded by the cell's exact parallelism)."""
    d = deployment(v, winner)
    if d is None:
        return ""
    if "error" in d:
        return f"# not deployable: {d['error']}"
    return "\n".join(deploy.guarded(v.spec.model, v.spec.parsed_parallelism(), d["lines"]))


# Every job of the checkout sources the env file: a value that is not one plain word is
# never written into it (a spec's setting is free text), only named in a comment.
_XLA_WORD = re.compile(r"--[A-Za-z0-9_]+=[A-Za-z0-9_.,:+/=-]*")
_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")


def shell_line(s: Setting) -> str:
    """One setting as a line of `configs/<model>.env.sh`."""
    if s.layer is Layer.XLA and _XLA_WORD.fullmatch(s.text):
        return f'export XLA_FLAGS="${{XLA_FLAGS}} {s.text}"'
    if s.layer is Layer.ENV and _ENV_KEY.fullmatch(s.key):
        return f"export {s.key}={shlex.quote(s.value)}"
    if s.layer is Layer.MAXTEXT:
        return f"# MaxText override (configs/<model>.gpu.yml, not this file): {escape(s.label)}"
    return f"# not written, not one plain shell word: {escape(s.label)!r}"


def _job(r: Result) -> tuning_md.Job:
    status = _STATUS.get(r.outcome, str(r.outcome))
    if r.detail:
        status += f" ({r.detail})"
    return tuning_md.Job(r.job_id, r.profile, r.tag, status, r.tgs, r.step_s, r.loss)


def guard_for(spec: XlaTuningSpec) -> str:
    """An env-file patch of one parallelism must not reach another's jobs: the condition of
    the guard every patch carries (`deploy.guarded`; the patch holds it already)."""
    return deploy.guard_text(spec.parsed_parallelism())


def write_tuning_md(directory: Path, sweep: Sweep, runs: Sequence[Run],
                    jobs: Sequence[Job]) -> Path:
    """Writes `<MODEL_TAG>-tuning.md`, or extends it with this parallelism (a guarded patch
    and the sign-flip table) when it already covers another."""
    v = view(sweep, runs, jobs)
    path = directory / f"{v.spec.model}-tuning.md"
    existing = path.read_text("utf-8") if path.is_file() else None
    path.write_text(tuning_md.write_or_extend(existing, cell(sweep, v), guard_for(v.spec)),
                    "utf-8")
    return path


def stop_files(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
               directory: Path) -> str | None:
    """Kind.stops.files: the SKILL.md's partial `<MODEL_TAG>-tuning.md` at a stop, from what
    ran so far, in the sweep's directory (the person's copy comes from `report
    --tuning-md`, where they run it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_tuning_md(directory, sweep, runs, jobs)
    return (f"Partial report (what ran so far): {path}; `sweepd report {sweep.id} "
            "--tuning-md` writes it where you are")

