"""What the next wave may hold, each with its rule and reason (see search.py for the order,
`next_wave.py` for a wave filled in it; the numbers behind each rule are `wave_rules.py`'s)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweepd.kinds.xla_tuning import wave_rules as rules
from sweepd.kinds.xla_tuning.board import (
    BASELINE,
    EVIDENCE,
    RESTORE,
    Board,
    Entry,
    Fate,
    Inputs,
)
from sweepd.kinds.xla_tuning.catalog import (
    Axis,
    Evidence,
    Mechanism,
    Profile,
    bubble,
    mechanism_order,
    stack,
)
from sweepd.kinds.xla_tuning.claims import WAVE6_N, cross_tag

Item = tuple[Profile, str, str, str]  # profile, config tag, rule, reason


@dataclass
class Candidates:
    inp: Inputs
    board: Board
    evidence: Evidence | None
    table: dict[str, Profile]

    def __post_init__(self) -> None:
        self.primary = self.inp.tags[0]
        self.order = mechanism_order(self.inp.parallelism, self.evidence)
        self.unknown = {e.detail for e in self.board.entries.values()
                        if e.fate is Fate.UNKNOWN_FLAG}

    def _d(self, name: str, tag: str | None = None) -> float:
        d = self.board.search_delta(name, tag or self.primary)
        return -math.inf if d is None else d

    def _ok(self, p: Profile) -> bool:
        """Untried on the primary tag and free of a flag the image already rejected."""
        return self.board.get(p.name, self.primary) is None and not (p.keys & self.unknown)

    def _candidates(self) -> list[Entry]:
        skip = {BASELINE, EVIDENCE}
        return [e for e in self.board.measured(self.primary) if e.profile not in skip]

    def distinct_tried(self) -> int:
        """Distinct profiles run in Waves 2-4 (pipeline shapes are Wave 5)."""
        return sum(1 for (p, t), e in self.board.entries.items()
                   if t == self.primary and e.first_wave >= 2 and p not in (BASELINE, EVIDENCE)
                   and Mechanism.PIPELINE not in self._profile(p).mechanisms)

    def _profile(self, name: str) -> Profile:
        if name in self.table:
            return self.table[name]
        missing = [part for part in name.split("+") if part not in self.table]
        if missing:
            raise ValueError(f"result for profile {name!r}: not in this sweep's catalog "
                             f"({', '.join(missing)})")
        return stack(tuple(self.table[part] for part in name.split("+")))

    def confirmations(self) -> list[Item]:
        """Noise: a result that would change the verdict is re-run, judged on the mean."""
        best = max((self._d(e.profile) for e in self._candidates() if e.n >= 2), default=0.0)
        out: list[Item] = []
        near = False  # a fresh mean near the win bar is re-run: the baseline goes further
        for e in self._candidates():
            d, se = self._d(e.profile), self.board.search_se(e.profile, self.primary)
            why = rules.rerun_reason(self.inp, e.n, d, se, best)
            rule = "noise.rerun"
            # Near the win bar after MAX_N runs: the next runs measure the claim (a recipe
            # with no claim run yet is judged on all of its runs).
            fd = self.board.fresh_delta(e.profile, self.primary)
            fse = self.board.fresh_se(e.profile, self.primary)
            if fd is None:
                fd, fse = d, se
            if (not why and rules.MAX_N <= e.n < rules.NEAR_BAR_N
                    and fd > self.inp.bounded_gain and abs(fd - self.inp.win) < 2 * fse):
                why = f"fresh {fd:+.2%} within 2 se of the +{self.inp.win:.0%} bar"
                near = len(self._profile(e.profile).settings) <= self.inp.max_flags
                rule = "noise.confirm"
            elif (not why and rules.MAX_N <= e.n < rules.NEAR_BAR_N
                  and fd > self.inp.bounded_gain
                  and not self.board.above(e.profile, self.primary, self.inp.bounded_gain)):
                # "Bounded" would otherwise read "not shown above +2 %" as "shown below":
                # a true +3.3 % read +2.2 % on two fresh runs and the cell was bounded.
                why = (f"fresh {fd:+.2%} above the +{self.inp.bounded_gain:.0%} bar, not "
                       "significantly: measured further before the cell may be bounded")
                rule = "noise.confirm"
            if why and len(self._profile(e.profile).settings) <= self.inp.max_flags:
                out.append((self._profile(e.profile), self.primary, rule,
                            f"{e.profile} {d:+.2%} over n={e.n}: {why}"))
        base = self.board.base(self.primary)
        if near and base is not None and base.n < rules.NEAR_BASE_N:
            out.insert(0, (self.table[BASELINE], self.primary, "noise.rerun_baseline",
                           f"baseline n={base.n}: a fresh mean near the +{self.inp.win:.0%} "
                           "bar is judged against its mean"))
        elif out and base is not None and base.n < rules.BASE_N:
            out.insert(0, (self.table[BASELINE], self.primary, "noise.rerun_baseline",
                           f"baseline n={base.n}: deltas are judged against its mean"))
        return out

    def refinements(self) -> list[Item]:
        """Numeric families: the untried neighbours of the family's best value so far."""
        out: list[Item] = []
        for fam, members in self._numeric_families().items():
            done = [p for p in members if self.board.get(p.name, self.primary) is not None
                    and self.board.get(p.name, self.primary).n]  # type: ignore[union-attr]
            if len(members) < 2 or not done:
                continue
            top = max(done, key=lambda p: self._d(p.name))
            if max(abs(self._d(p.name)) for p in done) < rules.LIVE:
                out += self._ends(fam, members)
                continue
            if len(done) >= rules.SETTLED_FAMILY and self._d(top.name) < 2 * rules.POSITIVE:
                continue
            for i in (top.position - 1, top.position + 1):
                if 0 <= i < len(members) and self._ok(members[i]):
                    out.append((members[i], self.primary, "wave.numeric_neighbour",
                                f"{fam}: best so far {top.name} {self._d(top.name):+.2%}; "
                                f"trying its neighbour"))
        return out

    def _numeric_families(self) -> dict[str, list[Profile]]:
        """The catalog's numeric families (pipeline shapes are Wave 5's), by position."""
        families: dict[str, list[Profile]] = {}
        for p in self.table.values():
            if p.family and Mechanism.PIPELINE not in p.mechanisms:
                families.setdefault(p.family, []).append(p)
        for members in families.values():
            members.sort(key=lambda p: p.position)
        return families

    def _ends(self, fam: str, members: list[Profile]) -> list[Item]:
        """A flat numeric family in a mechanism the evidence points at is not left on one
        value: its ends are tried (an effect may sit at one extreme only: PP=8 dense's
        overlap limit 4 measured ~0 %, its limit 2 is the winner's core)."""
        if self.evidence is None or len(members) < 3:
            return []
        if not members[0].mechanisms & set(self.order[:rules.POINTED]):
            return []
        return [(p, self.primary, "wave.numeric_ends",
                 f"{fam}: flat at its tried value, in a mechanism the evidence points at "
                 f"({', '.join(sorted(str(m) for m in p.mechanisms))}): trying its end {p.name}")
                for p in (members[0], members[-1]) if self._ok(p)]

    def stacks(self) -> list[Item]:
        """Forward selection: the leading recipe plus each positive single of another flag.

        The leader is the best confirmed recipe (else the best single); a part need only be
        clear of noise in its own run, since the stack is measured (and confirmed) itself.
        """
        singles: dict[str, Entry] = {}
        for e in self._candidates():
            d = self._d(e.profile)
            if "+" in e.profile or d < max(rules.POSITIVE,
                                           self.board.search_se(e.profile, self.primary)):
                continue
            fam = self._profile(e.profile).family or e.profile
            if fam not in singles or d > self._d(singles[fam].profile):
                singles[fam] = e
        ranked = sorted(singles.values(), key=lambda e: -self._d(e.profile))
        leader = best_recipe(self) or (ranked[0].profile if ranked else None)
        restore = self.board.get(RESTORE, self.primary)
        if (restore is not None and restore.n and RESTORE not in singles
                and self._d(RESTORE) > -self.board.search_se(RESTORE, self.primary)):
            # The env file's flags were tuned elsewhere (sign flips are systematic): taking
            # them out is tried on top of the leader unless Wave 1 showed it clearly hurts.
            ranked.append(restore)
        if leader is None:
            return []
        out: list[Item] = []
        for e in ranked:
            s = self._on_top(leader, e.profile)
            if s is not None:
                pred = (1 + self._d(leader)) * (1 + self._d(e.profile)) - 1
                out.append((s, self.primary, "wave.stack", f"{leader} + {e.profile} "
                            f"({e.profile} {self._d(e.profile):+.2%}): {pred:+.2%} if they add up"))
        return out[:rules.STACKS_PER_WAVE]

    def _on_top(self, leader: str, single: str) -> Profile | None:
        """The leader with one more single stacked on it, if they set different flags, stay
        within the flag limit and the stack may still run."""
        base, part = self._profile(leader), self._profile(single)
        if part.keys & base.keys or len(base.settings) + len(part.settings) > \
                self.inp.max_flags:
            return None
        s = self._profile("+".join(sorted([*leader.split("+"), single])))
        return s if self._ok(s) else None

    def polish(self) -> list[Item]:
        """Endgame on the leader: each numeric part moved to its neighbour values, then each
        other single that measured faster than baseline added (a small flag the noise hid
        from `stacks` is tried where it would count: on top of the leader)."""
        leader = best_recipe(self)
        if leader is None:
            return []
        parts = [self._profile(n) for n in leader.split("+")]
        out: list[Item] = []
        for i, part in enumerate(parts):
            for nb in self._neighbours(part):
                s = self._profile("+".join(sorted(p.name for p in [*parts[:i], nb,
                                                                   *parts[i + 1:]])))
                if self._ok(s):
                    out.append((s, self.primary, "wave.polish_value",
                                f"{leader} with {part.name} -> {nb.name}"))
        singles = sorted((e for e in self._candidates() if "+" not in e.profile
                          and self._d(e.profile) > rules.POSITIVE),
                         key=lambda e: -self._d(e.profile))
        for e in singles:
            stack = self._on_top(leader, e.profile)
            if stack is not None:
                out.append((stack, self.primary, "wave.polish_add",
                            f"{leader} + {e.profile} ({self._d(e.profile):+.2%} alone)"))
        return out[:rules.POLISH]

    def pairs(self) -> list[Item]:
        """The catalog spent short of the seed's bounded count (SKILL.md: "tested >= 25
        distinct profiles"; "a single flag (or 2-3 flag stack)"): pairs of the singles that
        measured fastest, the best predicted first, until the count is reached. Singles too
        small to clear the noise alone can be large together (a pair of +1.2 % singles gave
        +6.5 %: "catalog exhausted after 21 profiles" was called bounded without it)."""
        left = self.inp.bounded_count - self.distinct_tried()
        if left <= 0:
            return []
        short = f"{left} profiles short of the bounded rule's {self.inp.bounded_count}"
        gaps = self.untried_values(rules.POINTED, short) if self.inp.family_gaps else []
        return [*self._flat_ends(left), *self.top_pairs(short), *gaps][:left]

    def top_pairs(self, why: str) -> list[Item]:
        """Pairs of the five fastest singles of distinct families, best predicted first."""
        best: dict[str, Entry] = {}
        for e in self._candidates():
            fam = self._profile(e.profile).family or e.profile
            if ("+" not in e.profile and e.profile != RESTORE and self._d(e.profile) > 0
                    and (fam not in best or self._d(e.profile) > self._d(best[fam].profile))):
                best[fam] = e
        top = sorted(best.values(), key=lambda e: -self._d(e.profile))[:rules.PAIR_SINGLES]
        out: list[tuple[float, Item]] = []
        for i, a in enumerate(top):
            for b in top[i + 1:]:
                s = self._on_top(a.profile, b.profile)
                if s is not None:
                    pred = (1 + self._d(a.profile)) * (1 + self._d(b.profile)) - 1
                    out.append((pred, (s, self.primary, "wave.pair_fill",
                                       f"{a.profile} {self._d(a.profile):+.2%} + {b.profile} "
                                       f"{self._d(b.profile):+.2%}: {pred:+.2%} if they add "
                                       f"up; {why}")))
        out.sort(key=lambda x: -x[0])
        return [it for _, it in out]

    def untried_values(self, mechanisms: int, why: str = "") -> list[Item]:
        """The untried values of the numeric families in the evidence's first `mechanisms`,
        mechanism by mechanism, in each the value farthest from any value run first (a
        value may help on its own between flat or falling neighbours: `family_gaps.py`)."""
        pointed = [m for m in self.order if m is not Mechanism.PIPELINE][:mechanisms]
        out: list[tuple[int, int, int, Item]] = []
        for fam, members in self._numeric_families().items():
            rank = next((i for i, m in enumerate(pointed) if m in members[0].mechanisms), None)
            run = [p.position for p in members if not self._ok(p)]
            if rank is None or not run:
                continue
            ran = ", ".join(m.name for m in members if m.position in run)
            for p in members:
                if self._ok(p):
                    gap = min(abs(p.position - q) for q in run)
                    out.append((len(run), rank, -gap, (p, self.primary, "wave.family_gap", (
                        f"{fam} run at {ran}; {p.name} not yet: a value may help on its own "
                        "where its neighbours do not; " + (why or "run before a bounded "
                        "verdict, in queue time the sweep would leave unused")))))
        out.sort(key=lambda x: (x[0], x[1], x[2]))
        return [it for *_, it in out]

    def _flat_ends(self, left: int) -> list[Item]:
        """Numeric families run at one value that read flat: their ends first (an effect
        may sit at one extreme only; a family's ends are tried up front only in the
        mechanism the evidence points at, so an overlap limit of 2 worth +6.5 % in the
        fourth was left while pairs of noise-level singles filled the count)."""
        out: list[Item] = []
        for fam, members in self._numeric_families().items():
            done = [p for p in members if not self._ok(p)]
            if len(done) != 1 or abs(self._d(done[0].name)) >= rules.LIVE:
                continue
            out += [(p, self.primary, "wave.fill_ends",
                     f"{fam}: flat at {done[0].name} ({self._d(done[0].name):+.2%}), its only "
                     f"value run; trying its end {p.name} ({left} profiles short of the "
                     f"bounded rule's {self.inp.bounded_count})")
                    for p in (members[0], members[-1]) if self._ok(p)]
        return out

    def _neighbours(self, part: Profile) -> list[Profile]:
        if not part.family or part.name not in self.table:
            return []
        fam = [p for p in self.table.values() if p.family == part.family]
        return [p for p in fam if abs(p.position - part.position) == 1]

    def seeds(self, focus_only: bool) -> list[Item]:
        """The first value of every untried family, mechanisms in the evidence's order."""
        focus = (self.inp.focus if self.inp.stop != "seed"
                 else min(self.inp.focus, rules.SEED_FOCUS))
        mechs = self.order[:focus] if focus_only else self.order
        out: list[Item] = []
        for rank, mech in enumerate(mechs):
            if mech is Mechanism.PIPELINE:
                continue
            fams: dict[str, list[Profile]] = {}
            for p in self.inp.catalog:
                if mech in p.mechanisms:
                    fams.setdefault(p.family or p.name, []).append(p)
            for fam, members in fams.items():
                members.sort(key=lambda p: p.position)
                for seed in (members[i] for i in rules.seed_positions(len(members))):
                    if self._ok(seed):
                        out.append((seed, self.primary, "wave.catalog",
                                    f"{mech} (mechanism #{rank + 1} for "
                                    f"{self.inp.parallelism.text}); {fam} at {seed.name}"))
        return out

    def wave5(self, best: str | None) -> list[Item]:
        """PP only: pipeline shapes on top of the best recipe, bubble predicted first."""
        stages = self.inp.parallelism.degree(Axis.PP)
        m0 = self.inp.microbatches or stages
        base = self._profile(best) if best and self._d(best) > 0 else None
        out: list[Item] = []
        for p in self.inp.catalog:
            if Mechanism.PIPELINE not in p.mechanisms:
                continue
            run = p
            if (base is not None and not base.keys & p.keys
                    and len(base.settings) + len(p.settings) <= self.inp.max_flags):
                run = self._profile("+".join(sorted([*base.name.split("+"), p.name])))
            if not self._ok(run):
                continue
            s = p.settings[0]
            m, v = (int(s.value), 1) if "microbatch" in s.key else (m0, int(s.value))
            out.append((run, self.primary, "wave5.pipeline_shape",
                        f"bubble {bubble(stages, m0):.1%} -> {bubble(stages, m, v):.1%} "
                        f"predicted (S={stages}, M={m}, V={v})"))
        return out

    def wave6(self, best: str) -> list[Item]:
        """The winning recipe on every other config tag, then it and that tag's baseline
        re-run until its delta clears the -1 % line either way (`claims.cross_tag`)."""
        out: list[Item] = []
        for tag in self.inp.tags[1:]:
            e, b = self.board.get(best, tag), self.board.base(tag)
            if e is None:
                out.append((self._profile(best), tag, "wave6.cross_tag",
                            f"{best} must not regress {tag} by > {self.inp.regress:.0%}"))
            elif b is not None and cross_tag(self.inp, self.board, best, tag) == "rerun":
                why = (f"{best} {self._d(best, tag):+.2%} on {tag} over n={e.n} vs baseline "
                       f"n={b.n}: not clear of -{self.inp.regress:.0%} either way, re-run")
                if len(e.ranked) < WAVE6_N:
                    out.append((self._profile(best), tag, "wave6.recheck", why))
                if b.n < WAVE6_N:
                    out.append((self.table[BASELINE], tag, "wave6.recheck_baseline", why))
        return out

    def plateaued(self) -> bool:
        return not (self.confirmations() or self.refinements() or self.stacks()
                    or self.seeds(focus_only=True) or self.polish())

    def settled(self, best: str) -> bool:
        return self.plateaued() and not self.wave5(best)


def best_recipe(c: Candidates) -> str | None:
    """The best profile of at most max_flags settings measured at least twice."""
    ok = [e for e in c._candidates()
          if e.n >= 2 and len(c._profile(e.profile).settings) <= c.inp.max_flags]
    top = max(ok, key=lambda e: c._d(e.profile), default=None)
    return top.profile if top is not None and c._d(top.profile) > 0 else None


__all__ = ["Candidates", "best_recipe"]
