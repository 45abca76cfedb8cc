"""What the next wave may hold, each with its rule and reason (see search.py for the order,
`next_wave.py` for a wave filled in it; the numbers behind each rule are `wave_rules.py`'s):
`Candidates`, what every rule reads (`candidates_base.py`) with the rules in three parts: the
search's steps (`search_steps.py`), the catalog's fill (`catalog_fill.py`) and Waves 5 and 6
(`later_waves.py`), each reading the same `CandidatesBase`."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase
from sweepd.kinds.xla_tuning.waves.catalog_fill import CatalogFill
from sweepd.kinds.xla_tuning.waves.later_waves import LaterWaves
from sweepd.kinds.xla_tuning.waves.search_steps import SearchSteps


class Candidates(CandidatesBase):
    """Every rule of a wave over one board: what they read (`CandidatesBase`), and the rules
    as parts over it: `steps`, `fill` and `later`."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.steps = SearchSteps(self)
        self.fill = CatalogFill(self)
        self.later = LaterWaves(self)

    def plateaued(self) -> bool:
        return not (self.steps.confirmations() or self.steps.refinements()
                    or self.steps.stacks() or self.steps.seeds(focus_only=True)
                    or self.steps.polish())

    def settled(self, best: str) -> bool:
        return self.plateaued() and not self.later.wave5(best)
