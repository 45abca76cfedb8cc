"""Network's rules: the test a run makes in the isolation search (the whole slot, a half,
a cross pairing), and the thresholds the proof reads (pointers to their one definition).
tests/test_rule_registry.py holds the code to this book; scripts/rules_doc.py writes it
into docs/architecture.md."""

from __future__ import annotations

from sweepd.util.rulebook import Rule, RuleBook, Threshold

# Each is decided where `isolation.py` writes its role (`"half"`), the key of ROLES below.
WHOLE = Rule("network.whole", "the whole slot runs first: healthy, no isolation is needed",
             where=("isolation:_plan",))
HALF = Rule("network.half", "a degraded group splits into halves (unknown nodes inside)",
            ("max_block_splits", "tolerance", "scaling"),
            where=("isolation:_plan", "isolation:_search"))
CROSS = Rule("network.cross", "cleared nodes paired across groups to test links only",
             ("all_degraded", "max_block_splits", "tolerance", "scaling"),
             where=("isolation:_search",))
CONFIRM = Rule("network.confirm", "an unproven node runs with a known-good one: a healthy "
               "pair proves both", ("tolerance", "scaling"), where=("isolation:_Wave.confirm",))
VERIFY = Rule("network.verify", "the nodes no search holds run together once to clear them",
              ("tolerance", "scaling"), where=("isolation:_plan",))
ROLES = {"whole": WHOLE, "half": HALF, "cross": CROSS, "confirm": CONFIRM, "verify": VERIFY}

BOOK = RuleBook("network", tuple(ROLES.values()), (
    Threshold("max_block_splits", "sweepd.kinds.network.isolation:MAX_BLOCK_SPLITS",
              "blocks whose halves are tried in every orientation"),
    Threshold("all_degraded", "sweepd.kinds.network.proof:ALL_DEGRADED",
              "disjoint degraded groups, none healthy: the fabric, not a few bad nodes"),
    # The judge's (`judge.py`): whether a group ran degraded, which every later test follows.
    Threshold("tolerance", "sweepd.kinds.network.judge:TOLERANCE",
              "a group this far below its expected TGS is degraded (the spec's default)"),
    Threshold("scaling", "sweepd.kinds.network.judge:SCALING",
              "the expected TGS/device of k nodes: the one-node figure times this per "
              "doubling (the spec's default)"),
))
