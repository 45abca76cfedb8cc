"""`proposer: tpe` (not the default): Optuna's TPE sampler proposes the exploring part of
each wave (first values, neighbours, stacks: what the hand rules of `search_steps.py` propose
in the seed's mode), fitted to every result so far on the primary tag; the seed's waves,
re-runs, confirmation, report block and stop rules stay on top (`next_wave.py`). A recipe is
three slots, each a catalog profile or none; its value the search's delta (a run that did
not fit or run, -20 %). The planner is stateless: the study is rebuilt from the board at
each plan, its sampler seeded by the run count, so a replay proposes the same."""

from __future__ import annotations

from typing import Any

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism, Profile
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, Fate
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.candidates_base import Item

SLOTS = 3
FAILED = -0.2  # the value told for a recipe that did not run (OOM, unknown flag)
ASKS = 40  # suggestions asked per proposal wanted, before giving up on new recipes
NONE = "none"


def tpe_items(c: Candidates, n: int) -> list[Item]:
    """Up to `n` recipes TPE proposes that have not run on the primary tag."""
    if n <= 0:
        return []
    import optuna  # only this option needs it

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = sorted(p.name for p in c.table.values() if p.name not in (BASELINE, EVIDENCE)
                   and Mechanism.PIPELINE not in p.mechanisms)
    choices = [NONE, *names]
    dist: dict[str, optuna.distributions.BaseDistribution] = {
        f"slot{k}": optuna.distributions.CategoricalDistribution(choices) for k in range(SLOTS)}
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=c.board.runs, n_startup_trials=5))
    for (name, tag), e in c.board.entries.items():
        parts = name.split("+")
        if tag != c.primary or name in (BASELINE, EVIDENCE) or len(parts) > SLOTS \
                or any(p not in c.table for p in parts):
            continue
        d = c.board.search_delta(name, tag) if e.n else None
        if d is None and e.fate is Fate.OPEN:
            continue  # not measured yet, nor dropped
        params = {f"slot{k}": (parts[k] if k < len(parts) else NONE) for k in range(SLOTS)}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dist,
                                                  value=FAILED if d is None else d))
    out: list[Item] = []
    seen: set[str] = set()
    for _ in range(ASKS * n):
        if len(out) >= n:
            break
        trial = study.ask(dist)
        picked = sorted({str(trial.params[f"slot{k}"]) for k in range(SLOTS)} - {NONE})
        prof = _recipe(c, picked)
        value: Any = FAILED if prof is None else 0.0
        if prof is not None and prof.name not in seen:
            seen.add(prof.name)
            out.append((prof, c.primary, rule_book.TPE.id,
                        f"Optuna TPE's proposal over {len(study.trials)} results "
                        f"(proposer: tpe): {prof.name}"))
        study.tell(trial, value)  # keeps the next asks off this one
    return out


def _recipe(c: Candidates, parts: list[str]) -> Profile | None:
    """The recipe of these profiles, if it is one that may still run."""
    if not parts:
        return None
    profs = [c.table[p] for p in parts]
    settings = [s for p in profs for s in p.settings]
    if len(settings) > c.inp.max_flags or len({s.key for s in settings}) < len(settings):
        return None
    prof = c._profile("+".join(parts))
    return prof if c._ok(prof) else None
