"""Catalog profiles that act on collectives alone, left out of a program that has none
(rule `catalog.no_collectives`).

One device has nothing to gather, reduce, overlap or combine: the combine thresholds, the
async collective fusions, the overlap and data-parallel all-reduce switches change nothing
there, and each run of one costs a job (a minute of compile on a TPU chip) to measure the
baseline again under another name. Two pieces of evidence say a program has none, either
enough:

- the device count a job runs on: nodes x devices per node (`cluster.gpus_per_node`), and
  no parallelism override asking for more (`Inputs.devices`, set by the planner's adapter);
- the evidence run's HLO dump holds no collective op (`Evidence.collectives == 0`), read
  from the dump the job wrote (`evidence/jobfacts.py`), whatever the config said.

A dump that holds collectives wins over the device count (the count was wrong). A profile
the sweep already has a result for stays: its result is read like any other. Only the
catalog's families are left out: a profile the person wrote (`profiles:`) runs as asked. The verdict
names the profiles left out and the evidence (`note`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Evidence
from sweepd.kinds.xla_tuning.catalog.collectives import collective_only
from sweepd.kinds.xla_tuning.evidence.results import Result
from sweepd.kinds.xla_tuning.inputs import Inputs


def none_because(inp: Inputs, evidence: Evidence | None) -> str | None:
    """Why the program has no collectives (the device count, the HLO dump, or both);
    None: it may have some."""
    if evidence is not None and evidence.collectives:
        return None   # the dump shows collectives: the count was wrong
    said = []
    if inp.devices == 1:
        said.append(f"1 device ({inp.devices_how})" if inp.devices_how else "1 device")
    if evidence is not None and evidence.collectives == 0:
        said.append(f"{evidence.source or 'the evidence run'} holds no collective op")
    return "; ".join(said) or None


def without_collectives(inp: Inputs, evidence: Evidence | None,
                        results: Iterable[Result] = ()) -> Inputs:
    """The inputs with the collective-only profiles left out when the program has no
    collectives (named in `no_collectives`, with the evidence); idempotent."""
    why = none_because(inp, evidence)
    if why is None:
        return inp
    ran = {part for r in results for part in r.profile.split("+")}
    dropped = tuple(p.name for p in inp.catalog
                    if p.name not in ran and p.family and collective_only(p))
    return replace(inp, catalog=tuple(p for p in inp.catalog if p.name not in dropped),
                   no_collectives=(*inp.no_collectives, *dropped), no_collectives_why=why)


def note(inp: Inputs) -> str:
    """The verdict's clause for the profiles left out (empty when none were)."""
    if not inp.no_collectives:
        return ""
    return (f"not run ({rule_book.NO_COLLECTIVES.id}), acting on collectives alone in a "
            f"program with none: {', '.join(inp.no_collectives)} "
            f"(evidence: {inp.no_collectives_why})")
