"""A campaign's pre-flight, at submission (and shown by validate), before its first job:
every stage's own pre-flight, made now on the stage's spec as far as it is known before the
earlier stages' results (e.g. the flags stage's xla-tuning pre-flight: no leftover
TUNE_PROFILE block in the toolkit's train_env.sh). A stage that would be refused when it
starts, hours later, refuses the campaign instead. Checked again as each stage starts.
"""

from __future__ import annotations

from sweepd.kinds.campaign.gather import CampaignFacts
from sweepd.kinds.campaign.rules import STAGE_SPEC
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.stages import Step, stage_spec, steps
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import Check, PreflightContext, kind_of
from sweepd.kinds.spec import SpecError


async def checks(spec: CampaignSpec, ctx: PreflightContext) -> list[Check]:
    if ctx.resumed is not None or spec.runs_itself:
        # A resume: the stage under way has its own pre-flight at its resume. A confirm
        # stage that runs itself writes nothing in the person's files.
        return []
    out: list[Check] = []
    for step in steps(spec):
        if step.stage == "confirm":
            continue   # the campaign kind again: its A/B runs take the candidate as given
        for check in await _stage_checks(spec, step, ctx):
            said = Check(check.rule, f"stage {step.key}: {check.text}", check.evidence,
                         check.ok)
            if (said.rule, said.text) not in {(c.rule, c.text) for c in out}:
                out.append(said)
    return out


async def _stage_checks(spec: CampaignSpec, step: Step, ctx: PreflightContext
                        ) -> list[Check]:
    """The stage kind's pre-flight on the stage's spec before any result (the slot's first
    nodes for a parallelism's job, the spec's batch): what it checks of the cluster and the
    person's files does not depend on those results."""
    nodes = spec.node_list[:spec.nodes_of(step.par)] if step.par else spec.node_list
    try:
        draft = parse_spec(stage_spec(spec, step, CampaignFacts(), nodes), ctx.where.repo)
    except SpecError as e:
        return [Check(STAGE_SPEC.id, f"its spec is made from the earlier stages' "
                      f"results; checked when it starts ({e})", str(e))]
    hook = kind_of(draft.kind).preflight
    if hook is None:
        return []
    found: list[Check] = await hook(draft, ctx)
    return found
