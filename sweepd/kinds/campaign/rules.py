"""The campaign's rules: its confirm runs, the stops it raises between stages, and its
pre-flight. tests/test_rule_registry.py holds the code to this book; scripts/rules_doc.py
writes it into docs/architecture.md."""

from __future__ import annotations

from sweepd.util.rulebook import Rule, RuleBook

CONFIRM = Rule("campaign.confirm", "a confirm stage: the deployed baseline and the candidate "
               "interleaved on one nodelist; the claim is the Welch interval of these runs")
TOO_FEW_NODES = Rule("campaign.too_few_nodes", "the health stage left fewer healthy nodes "
                     "than the largest parallelism needs: stop and ask")
STAGE_STOPPED = Rule("campaign.stage_stopped", "a stage's sweep stopped to ask: the campaign "
                     "waits for the person's word on it (one id per stage sweep)", family=True)
STAGE_SPEC = Rule("preflight.stage_spec", "a later stage's spec cannot be made before the "
                  "earlier stages' results: checked when it starts")

BOOK = RuleBook("campaign", (CONFIRM, TOO_FEW_NODES, STAGE_STOPPED, STAGE_SPEC))
