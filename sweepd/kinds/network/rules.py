"""Network's rules: the test a run makes in the isolation search (the whole slot, a half,
a cross pairing), and the thresholds the proof reads (pointers to their one definition).
tests/test_rule_registry.py holds the code to this book; scripts/rules_doc.py writes it
into docs/architecture.md."""

from __future__ import annotations

from sweepd.util.rulebook import Rule, RuleBook, Threshold

WHOLE = Rule("network.whole", "the whole slot runs first: healthy, no isolation is needed")
HALF = Rule("network.half", "a degraded group splits into halves (unknown nodes inside)",
            ("max_block_splits",))
CROSS = Rule("network.cross", "cleared nodes paired across groups to test links only",
             ("all_degraded",))
CONFIRM = Rule("network.confirm", "an unproven node runs with a known-good one: a healthy "
               "pair proves both")
VERIFY = Rule("network.verify", "the nodes no search holds run together once to clear them")
ROLES = {"whole": WHOLE, "half": HALF, "cross": CROSS, "confirm": CONFIRM, "verify": VERIFY}

BOOK = RuleBook("network", tuple(ROLES.values()), (
    Threshold("max_block_splits", "sweepd.kinds.network.isolation:MAX_BLOCK_SPLITS",
              "blocks whose halves are tried in every orientation"),
    Threshold("all_degraded", "sweepd.kinds.network.proof:ALL_DEGRADED",
              "disjoint degraded groups, none healthy: the fabric, not a few bad nodes"),
))
