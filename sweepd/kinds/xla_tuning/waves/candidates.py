"""What the next wave may hold, each with its rule and reason (see search.py for the order,
`next_wave.py` for a wave filled in it; the numbers behind each rule are `wave_rules.py`'s):
`Candidates`, the search's steps (`search_steps.py`), the catalog's fill (`catalog_fill.py`)
and Waves 5 and 6 (`later_waves.py`) over what they all read (`candidates_base.py`)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.waves.catalog_fill import CatalogFill
from sweepd.kinds.xla_tuning.waves.later_waves import LaterWaves
from sweepd.kinds.xla_tuning.waves.search_steps import SearchSteps


class Candidates(SearchSteps, CatalogFill, LaterWaves):
    """Every rule of a wave over one board (`CandidatesBase` holds what they read)."""

    def plateaued(self) -> bool:
        return not (self.confirmations() or self.refinements() or self.stacks()
                    or self.seeds(focus_only=True) or self.polish())

    def settled(self, best: str) -> bool:
        return self.plateaued() and not self.wave5(best)
