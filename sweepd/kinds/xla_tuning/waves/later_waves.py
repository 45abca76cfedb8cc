"""The waves after the search: Wave 5 (PP only: pipeline shapes on top of the best recipe,
bubble predicted) and Wave 6 (the winning recipe on every other config tag)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Axis, Mechanism, bubble
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import BASELINE
from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase, Item
from sweepd.kinds.xla_tuning.waves.claims import WAVE6_N, cross_tag


class LaterWaves:
    def __init__(self, c: CandidatesBase) -> None:
        self.c = c  # what every rule reads

    def wave5(self, best: str | None) -> list[Item]:
        """PP only: pipeline shapes on top of the best recipe, bubble predicted first."""
        stages = self.c.inp.parallelism.degree(Axis.PP)
        m0 = self.c.inp.microbatches or stages
        base = self.c._profile(best) if best and self.c._d(best) > 0 else None
        out: list[Item] = []
        for p in self.c.inp.catalog:
            if Mechanism.PIPELINE not in p.mechanisms:
                continue
            run = p
            if (base is not None and not base.keys & p.keys
                    and len(base.settings) + len(p.settings) <= self.c.inp.max_flags):
                run = self.c._profile("+".join(sorted([*base.name.split("+"), p.name])))
            if not self.c._ok(run):
                continue
            s = p.settings[0]
            m, v = (int(s.value), 1) if "microbatch" in s.key else (m0, int(s.value))
            out.append((run, self.c.primary, rule_book.PIPELINE_SHAPE.id,
                        f"bubble {bubble(stages, m0):.1%} -> {bubble(stages, m, v):.1%} "
                        f"predicted (S={stages}, M={m}, V={v})"))
        return out

    def wave6(self, best: str) -> list[Item]:
        """The winning recipe on every other config tag, then it and that tag's baseline
        re-run until its delta clears the -1 % line either way (`claims.cross_tag`). Unless
        the baseline is read by its mean (`drift`), the tag's baseline runs beside the
        recipe's first run there: its Wave 1 run is hours old, and on a cluster rising 4 %
        over 8 h a recipe 1.5 % slower on dense was read clean in 22 of 60 sweeps (9 with
        the baseline beside it; 1 at no drift either way)."""
        out: list[Item] = []
        for tag in self.c.inp.tags[1:]:
            e, b = self.c.board.get(best, tag), self.c.board.base(tag)
            if e is None:
                out.append((self.c._profile(best), tag, rule_book.CROSS_TAG.id,
                            f"{best} must not regress {tag} by > {self.c.inp.regress:.0%}"))
                if self.c.inp.drift is not DriftRead.MEAN:
                    out.append((self.c.table[BASELINE], tag, rule_book.BESIDE_BASELINE.id,
                                f"{tag}'s baseline beside {best}'s run on it: a cluster "
                                "that drifts is read where the recipe ran"))
            elif b is not None and cross_tag(self.c.inp, self.c.board, best, tag) == "rerun":
                why = (f"{best} {self.c._d(best, tag):+.2%} on {tag} over n={e.n} vs baseline "
                       f"n={b.n}: not clear of -{self.c.inp.regress:.0%} either way, re-run")
                if len(e.ranked) < WAVE6_N:
                    out.append((self.c._profile(best), tag, rule_book.RECHECK.id, why))
                if b.n < WAVE6_N:
                    out.append((self.c.table[BASELINE], tag, rule_book.RECHECK_BASELINE.id, why))
        return out
