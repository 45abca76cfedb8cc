"""The sections of one sweep's `<MODEL_TAG>-tuning.md` cell (`tuning_md.Cell`): its header,
the Inventory, the env file's measured effect, the standings, why the winner wins, the
env-file patch `--apply` writes and the job list."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sweepd.kinds.xla_tuning.catalog.catalog import Axis, bubble
from sweepd.kinds.xla_tuning.catalog.flags import IMAGE_DEFAULTS
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.evidence.results import (
    BASELINE,
    EVIDENCE,
    RESTORE,
    Fate,
    Outcome,
    Result,
)
from sweepd.kinds.xla_tuning.reporting import tuning_md
from sweepd.kinds.xla_tuning.reporting.report_view import View, leaderboard, mean_of
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.kinds.xla_tuning.verdict.render import reason
from sweepd.kinds.xla_tuning.verdict.structure import from_stored
from sweepd.store.rows import Sweep
from sweepd.util.model_shapes import ModelShape, UnknownModel, resolve_model

_STATUS = {Outcome.OK: "ok", Outcome.OOM: "oom", Outcome.UNKNOWN_FLAG: "unknown flag",
           Outcome.NOT_APPLIED: "not applied", Outcome.FLAKE: "flake"}


def cell(sweep: Sweep, v: View, guard: str = "") -> tuning_md.Cell:
    spec, board, primary = v.spec, v.board, v.primary
    verdict = sweep.verdict or {}
    winner = verdict.get("recipe") if isinstance(verdict.get("recipe"), str) else None
    standing = [_claimed(_standing(v, r), winner, verdict) for r in leaderboard(v)
                if r["tag"] == primary and r["n"] and r["profile"] != EVIDENCE]
    try:
        shape: ModelShape | None = resolve_model(spec.model)
    except UnknownModel:   # the overrides define it (local backend): not known here
        shape = None
    unknown = "unknown (no shape sweepd knows for the model)"
    header = {"Date": sweep.created_at, "Hardware": f"{spec.count} nodes x "
              f"{shape.gpus_per_node if shape else '?'} GPUs "
              f"({spec.nodes or 'slot not resolved'})",
              "Parallelism": spec.parsed_parallelism().text,
              "Base config": f"configs/{spec.model}.gpu.yml",
              "Sequence length": str(spec.overrides.get("max_target_length")
                                     or (shape.seq_len if shape else unknown)),
              "Steps": str(max(spec.steps, 15)),
              "Image": _recorded(runs_env(v, "DOCKER_IMAGE"), "the checkout's container_env.sh "
                                 "DOCKER_IMAGE (not recorded by the sweep)"),
              "MaxText branch/commit": _recorded(v.commit, "the checkout's HEAD (not recorded "
                                                 "by the sweep)"),
              "per_device_batch_size": _batch(v, verdict),
              "Metric": "steady TGS/device, steps 5-14 (9-14 with the profiler), "
                        f"per-run noise {board.noise:.2%}",
              "Sweep": f"{sweep.id} ({sweep.state})"}
    return tuning_md.Cell(
        spec.model, spec.parsed_parallelism().text, primary, header,
        _inventory(v, verdict.get("inventory")), _env_effect(v), tuple(standing), winner,
        _why(v, winner),
        verdict_prose(verdict) or f"in progress ({sweep.state})", _patch(v, winner),
        tuple(_job(r) for r in v.results if r.outcome is not Outcome.PENDING), guard)


def verdict_prose(verdict: dict[str, Any]) -> str:
    """The verdict's reason as the one renderer words its stored structure; a verdict
    stored before the structure was kept, as its stored prose."""
    said = from_stored(verdict)
    return reason(said) if said is not None else str(verdict.get("reason") or "")


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
    base_loss = mean_of([r.loss for r in v.results if r.profile == BASELINE
                         and r.tag == row["tag"] and r.outcome is Outcome.OK])
    shift = bool(row["loss"] is not None and base_loss and base is not None
                 and abs(row["loss"] / base_loss - 1) > 2 * v.board.noise)
    return tuning_md.Standing(row["profile"], row["flags"], row["tgs"], row["step_s"],
                              row["delta"] or 0.0, row["n"], tuple(row["job_ids"]), shift,
                              row["se"])


def _claimed(s: tuning_md.Standing, winner: str | None,
             verdict: dict[str, Any]) -> tuning_md.Standing:
    """The verdict's recipe shows the verdict's gain: the mean of the runs that ranked it
    first (the board's delta) is biased high, the claim's runs are not."""
    gain, interval, n = verdict.get("gain"), verdict.get("interval"), verdict.get("gain_runs")
    if s.profile != winner or not isinstance(gain, int | float):
        return s
    iv = (f", 95 % interval {interval[0]:+.2%} to {interval[1]:+.2%}"
          if isinstance(interval, list) and len(interval) == 2 else "")
    runs = f" from {n} runs that did not select it" if isinstance(n, int) else ""
    return replace(s, delta=float(gain), claim=f" (the claim{runs}{iv})")


def _inventory(v: View, inventory: object) -> str:
    """The image's flags and what the env file sets: the Inventory the verdict recorded
    (what the planner read), else the keys a restore_default run put back."""
    deployed = v.table.get(RESTORE)
    image = " ".join(f"--{k}={x}" for k, x in IMAGE_DEFAULTS.items() if k.startswith("xla_"))
    keys = [s.key for s in deployed.settings] if deployed else list(v.restored)
    if isinstance(inventory, str) and inventory:
        found = inventory.removeprefix("Inventory: ")
    else:
        found = (", ".join(keys) if keys else
                 "no XLA/NCCL setting recorded (no restore_default run, and no Inventory "
                 "recorded: the sweep has no verdict yet)")
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
        elif r is None:
            out.append(f"- {tag}: baseline-deployed {b.mean:.1f} TGS (n={b.n}); "
                       "restore_default not run (nothing the env file sets has a known "
                       "default to put back: the Inventory above)")
        elif not r.n:
            why = f"{r.fate.value} ({r.detail})" if r.detail else r.fate.value
            out.append(f"- {tag}: baseline-deployed {b.mean:.1f} TGS (n={b.n}); "
                       f"restore_default (putting {put_back} back to the image's default) "
                       f"{'not measured yet' if r.fate is Fate.OPEN else why}")
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


def _job(r: Result) -> tuning_md.Job:
    status = _STATUS.get(r.outcome, str(r.outcome))
    if r.detail:
        status += f" ({r.detail})"
    return tuning_md.Job(r.job_id, r.profile, r.tag, status, r.tgs, r.step_s, r.loss)


def guard_for(spec: XlaTuningSpec) -> str:
    """An env-file patch of one parallelism must not reach another's jobs: the condition of
    the guard every patch carries (`deploy.guarded`; the patch holds it already)."""
    return deploy.guard_text(spec.parsed_parallelism())
