"""What a wave of the search may hold (search.py gives the order): re-runs of results that
would change the verdict, numeric-family neighbours, forward-selection stacks and first
values in mechanism order; once those plateau, the endgame on the leading recipe (`polish`).
The numbers behind each rule are `wave_rules.py`'s."""

from __future__ import annotations

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism, Profile, secondary_axis
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, RESTORE, Entry
from sweepd.kinds.xla_tuning.waves import wave_rules as rules
from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase, Item, best_recipe
from sweepd.kinds.xla_tuning.waves.closing_pair import closing_pair


class SearchSteps:
    def __init__(self, c: CandidatesBase) -> None:
        self.c = c  # what every rule reads

    def confirmations(self) -> list[Item]:
        """Noise: a result that would change the verdict is re-run, judged on the mean."""
        best = max((self.c._d(e.profile) for e in self.c._candidates() if e.n >= 2), default=0.0)
        out: list[Item] = []
        near = False  # a fresh mean near the win bar is re-run: the baseline goes further
        few = rules.few_runs(self.c.inp, self.c.board)
        for e in self.c._candidates():
            d, se = self.c._d(e.profile), self.c.board.search_se(e.profile, self.c.primary)
            why = rules.rerun_reason(self.c.inp, e.n, d, se, best, few) or (
                self._family_rival(e.profile, d, se) if few else "")
            rule = rule_book.RERUN.id
            # Near the win bar after MAX_N runs: the next runs measure the claim (a recipe
            # with no claim run yet is judged on all of its runs).
            fd = self.c.board.claim.delta(e.profile, self.c.primary)
            fse = self.c.board.claim.se(e.profile, self.c.primary)
            if fd is None:
                fd, fse = d, se
            if (not why and rules.MAX_N <= e.n < rules.NEAR_BAR_N
                    and fd > self.c.inp.bounded_gain and abs(fd - self.c.inp.win) < 2 * fse):
                why = f"fresh {fd:+.2%} within 2 se of the +{self.c.inp.win:.0%} bar"
                near = len(self.c._profile(e.profile).settings) <= self.c.inp.max_flags
                rule = rule_book.CONFIRM.id
            elif (not why and rules.MAX_N <= e.n < rules.NEAR_BAR_N
                  and fd > self.c.inp.bounded_gain
                  and not self.c.board.claim.above(e.profile, self.c.primary,
                                                   self.c.inp.bounded_gain)):
                # "Bounded" would otherwise read "not shown above +2 %" as "shown below":
                # a true +3.3 % read +2.2 % on two fresh runs and the cell was bounded.
                why = (f"fresh {fd:+.2%} above the +{self.c.inp.bounded_gain:.0%} bar, not "
                       "significantly: measured further before the cell may be bounded")
                rule = rule_book.CONFIRM.id
            if why and len(self.c._profile(e.profile).settings) <= self.c.inp.max_flags:
                out.append((self.c._profile(e.profile), self.c.primary, rule,
                            f"{e.profile} {d:+.2%} over n={e.n}: {why}"))
        base = self.c.board.base(self.c.primary)
        if near and base is not None and base.n < rules.NEAR_BASE_N:
            out.insert(0, (self.c.table[BASELINE], self.c.primary, rule_book.RERUN_BASELINE.id,
                           f"baseline n={base.n}: a fresh mean near the +{self.c.inp.win:.0%} "
                           "bar is judged against its mean"))
        elif out and base is not None and base.n < rules.CONFIRM_BASE_N:
            out.insert(0, (self.c.table[BASELINE], self.c.primary, rule_book.RERUN_BASELINE.id,
                           f"baseline n={base.n}: deltas are judged against its mean"))
        return out

    def refinements(self) -> list[Item]:
        """Numeric families: the untried neighbours of the family's best value so far."""
        out: list[Item] = []
        for fam, members in self.c._numeric_families().items():
            done = [p for p in members if self.c.board.get(p.name, self.c.primary) is not None
                    and self.c.board.get(p.name, self.c.primary).n]  # type: ignore[union-attr]
            if len(members) < 2 or not done:
                continue
            top = max(done, key=lambda p: self.c._d(p.name))
            if max(abs(self.c._d(p.name)) for p in done) < rules.LIVE:
                out += self._ends(fam, members)
                continue
            if len(done) >= rules.SETTLED_FAMILY and self.c._d(top.name) < 2 * rules.POSITIVE:
                continue
            for i in (top.position - 1, top.position + 1):
                if 0 <= i < len(members) and self.c._ok(members[i]):
                    out.append((members[i], self.c.primary, rule_book.NUMERIC_NEIGHBOUR.id,
                                f"{fam}: best so far {top.name} {self.c._d(top.name):+.2%}; "
                                f"trying its neighbour"))
        return out

    def edge_neighbours(self) -> list[Item]:
        """The closing wave: a numeric family whose best value leads (or is within CONTENDER
        of the best reading) at the edge of the values run, rising toward it by EDGE_RISE
        from the value run next to it, has the unrun value beyond it tried before the
        re-runs that could only narrow the leader's interval: when the leader reads under
        the win bar (on its fresh runs, else on all), those re-runs cannot confirm it
        (`claims.confirmed_win` needs a fresh mean >= +5 %). At 880 s jobs rs1G, rs768M,
        rs512M read -1.1, +1.5, +3.3 % and the last wave re-ran rs512M and the baseline;
        rs256M (+6.8 %) never ran. The value run here is not proposed on that one run."""
        ranked = sorted(self.c._candidates(), key=lambda e: -self.c._d(e.profile))
        if not ranked:
            return []
        best = ranked[0].profile
        out: list[Item] = []
        for fam, members in self.c._numeric_families().items():
            done = [p for p in members if (e := self.c.board.get(p.name, self.c.primary))
                    is not None and e.n]
            if len(done) < 2:
                continue
            top = max(done, key=lambda p: self.c._d(p.name))
            d = self.c._d(top.name)
            if d < rules.LIVE or d < self.c._d(best) - rules.CONTENDER:
                continue
            below = [p for p in done if p.position < top.position]
            above = [p for p in done if p.position > top.position]
            if below and above:
                continue  # not at an edge of the values run
            inner = min(below or above, key=lambda p: abs(p.position - top.position))
            i = top.position + (1 if below else -1)
            if (self.c._d(inner.name) > d - rules.EDGE_RISE or not 0 <= i < len(members)
                    or not self.c._ok(members[i])
                    or max(self._reading(top.name), self._reading(best)) >= self.c.inp.win):
                continue
            out.append((members[i], self.c.primary, rule_book.NUMERIC_EDGE.id,
                        f"{fam}: {inner.name} {self.c._d(inner.name):+.2%} -> {top.name} "
                        f"{d:+.2%}, rising at the edge of the values run; its re-runs "
                        f"cannot confirm it at +{self.c.inp.win:.0%}: trying {members[i].name}"))
        return out

    def _family_rival(self, name: str, d: float, se: float) -> str:
        """At few runs, a value of a numeric family run once that reads within 2 se of the
        family's best value (measured more often) is re-run, so the value the verdict and
        the stacks take is the one the family's runs support, not the one that read first
        (issue 43: overlap limit 8 was proposed at +2.8 % over limit 2's +3.4 %)."""
        prof = self.c._profile(name)
        e = self.c.board.get(name, self.c.primary)
        if (not rules.FAMILY_RIVAL or e is None or e.n != 1 or "+" in name or not prof.family
                or d <= 2 * rules.POSITIVE):
            return ""
        sibs = [p.name for p in self.c.table.values() if p.family == prof.family
                and p.name != name and (self.c.board.get(p.name, self.c.primary) or e).n > 1]
        top = max(sibs, key=lambda n: self.c._d(n), default=None)
        if top is None or d < self.c._d(top) - 2 * se:
            return ""
        return (f"{prof.family}: within 2 se of {top} {self.c._d(top):+.2%}: the family's "
                "value is chosen on more than one run each")

    def closing_stacks(self) -> list[Item]:
        """The closing wave at few runs: the stack predicted best, if it reaches the win bar
        ("+6.09 % if they add up"), runs before the re-runs of a leader that reads under the
        bar (on its fresh runs, else on all), which cannot confirm it (`claims.confirmed_win`
        needs a fresh mean >= +5 %). At 880 s jobs two +3 % singles (their stack +7 %) were
        read by run 22 of 33; the rest went to the +3 % leader's confirmation, baseline
        re-runs and Wave 6, and the stack ran in 3 of 40 sweeps. CLOSING_STACKS a wave:
        each run is taken from the leader's needs and the report block (two stacks of
        +2 % noise singles on a +3.5 % leader left no room for the block). Off at 10-minute
        jobs: there the stack mostly runs before the closing wave, and a stack whose parts
        cancel cost more sweeps than the rule won."""
        ranked = sorted(self.c._candidates(), key=lambda e: -self.c._d(e.profile))
        if (not ranked or not rules.few_runs(self.c.inp, self.c.board)
                or self._reading(ranked[0].profile) >= self.c.inp.win):
            return []
        return [(p, tag, rule_book.CLOSING_STACK.id, f"{why} (closing: reaches the "
                 f"+{self.c.inp.win:.0%} bar; the leader's re-runs cannot confirm it)")
                for (p, tag, _, why), pred in self.predicted_stacks()
                if pred >= self.c.inp.win][:rules.CLOSING_STACKS]

    def closing_firsts(self) -> list[Item]:
        """What the closing wave runs before a leader's needs that cannot confirm it (with
        `closing_pair`, the two best singles' stack predicted above the leader too)."""
        firsts = [*self.edge_neighbours(), *self.closing_stacks()]
        return firsts + [it for it in closing_pair(self.c)
                         if all(it[0].name != f[0].name for f in firsts)]

    def _reading(self, name: str) -> float:
        """The profile's delta on its fresh runs, else on all of them."""
        fd = self.c.board.claim.delta(name, self.c.primary)
        return self.c._d(name) if fd is None else fd

    def _ends(self, fam: str, members: list[Profile]) -> list[Item]:
        """A flat numeric family in a mechanism the evidence points at is not left on one
        value: its ends are tried (an effect may sit at one extreme only: PP=8 dense's
        overlap limit 4 measured ~0 %, its limit 2 is the winner's core)."""
        if self.c.evidence is None or len(members) < 3:
            return []
        if not members[0].mechanisms & set(self.c.order[:rules.POINTED]):
            return []
        return [(p, self.c.primary, rule_book.NUMERIC_ENDS.id,
                 f"{fam}: flat at its tried value, in a mechanism the evidence points at "
                 f"({', '.join(sorted(str(m) for m in p.mechanisms))}): trying its end {p.name}")
                for p in (members[0], members[-1]) if self.c._ok(p)]

    def stacks(self) -> list[Item]:
        """Forward selection: the leading recipe plus each positive single of another flag."""
        return [item for item, _ in self.predicted_stacks()]

    def predicted_stacks(self, clear_of_noise: bool = True) -> list[tuple[Item, float]]:
        """`stacks`, each with its predicted gain (the leader's and the single's, compounded).

        The leader is the best confirmed recipe (else the best single); a part need only be
        clear of noise in its own run, since the stack is measured (and confirmed) itself.
        Not `clear_of_noise` (`bounded_stack.py`): a part need only read above POSITIVE.
        """
        singles: dict[str, Entry] = {}
        for e in self.c._candidates():
            d = self.c._d(e.profile)
            floor = (self.c.board.search_se(e.profile, self.c.primary) if clear_of_noise
                     else 0.0)
            if "+" in e.profile or d < max(rules.POSITIVE, floor):
                continue
            fam = self.c._profile(e.profile).family or e.profile
            if fam not in singles or d > self.c._d(singles[fam].profile):
                singles[fam] = e
        ranked = sorted(singles.values(), key=lambda e: -self.c._d(e.profile))
        leader = best_recipe(self.c) or (ranked[0].profile if ranked else None)
        restore = self.c.board.get(RESTORE, self.c.primary)
        if (restore is not None and restore.n and RESTORE not in singles
                and self.c._d(RESTORE) > -self.c.board.search_se(RESTORE, self.c.primary)):
            # The env file's flags were tuned elsewhere (sign flips are systematic): taking
            # them out is tried on top of the leader unless Wave 1 showed it clearly hurts.
            ranked.append(restore)
        if leader is None:
            return []
        out: list[tuple[Item, float]] = []
        for e in ranked:
            s = self.c._on_top(leader, e.profile)
            if s is not None:
                pred = (1 + self.c._d(leader)) * (1 + self.c._d(e.profile)) - 1
                out.append(((s, self.c.primary, rule_book.STACK.id, f"{leader} + {e.profile} "
                             f"({e.profile} {self.c._d(e.profile):+.2%}): {pred:+.2%} if they "
                             "add up"), pred))
        return out[:rules.STACKS_PER_WAVE]

    def polish(self) -> list[Item]:
        """Endgame on the leader: each numeric part moved to its neighbour values, then each
        other single that measured faster than baseline added (a small flag the noise hid
        from `stacks` is tried where it would count: on top of the leader)."""
        leader = best_recipe(self.c)
        if leader is None:
            return []
        parts = [self.c._profile(n) for n in leader.split("+")]
        out: list[Item] = []
        for i, part in enumerate(parts):
            for nb in self._neighbours(part):
                s = self.c._profile("+".join(sorted(p.name for p in [*parts[:i], nb,
                                                                   *parts[i + 1:]])))
                if self.c._ok(s):
                    out.append((s, self.c.primary, rule_book.POLISH_VALUE.id,
                                f"{leader} with {part.name} -> {nb.name}"))
        singles = sorted((e for e in self.c._candidates() if "+" not in e.profile
                          and self.c._d(e.profile) > rules.POSITIVE),
                         key=lambda e: -self.c._d(e.profile))
        for e in singles:
            stack = self.c._on_top(leader, e.profile)
            if stack is not None:
                out.append((stack, self.c.primary, rule_book.POLISH_ADD.id,
                            f"{leader} + {e.profile} ({self.c._d(e.profile):+.2%} alone)"))
        return out[:rules.POLISH]

    def _neighbours(self, part: Profile) -> list[Profile]:
        if not part.family or part.name not in self.c.table:
            return []
        fam = [p for p in self.c.table.values() if p.family == part.family]
        return [p for p in fam if abs(p.position - part.position) == 1]

    def seeds(self, focus_only: bool) -> list[Item]:
        """The first value of every untried family, mechanisms in the evidence's order."""
        # Two axes: the secondary axis's first mechanism (third in `order`) is seeded too.
        two = secondary_axis(self.c.inp.parallelism, list(self.c.order)) is not None
        focus = (self.c.inp.focus if self.c.inp.stop != "seed"
                 else min(self.c.inp.focus, rules.SEED_FOCUS + two))
        mechs = self.c.order[:focus] if focus_only else self.c.order
        out: list[Item] = []
        for rank, mech in enumerate(mechs):
            if mech is Mechanism.PIPELINE:
                continue
            fams: dict[str, list[Profile]] = {}
            for p in self.c.inp.catalog:
                if mech in p.mechanisms:
                    fams.setdefault(p.family or p.name, []).append(p)
            for fam, members in fams.items():
                members.sort(key=lambda p: p.position)
                for seed in (members[i] for i in rules.seed_positions(len(members))):
                    if self.c._ok(seed):
                        out.append((seed, self.c.primary, rule_book.CATALOG.id,
                                    f"{mech} (mechanism #{rank + 1} for "
                                    f"{self.c.inp.parallelism.text}); {fam} at {seed.name}"))
        return out
