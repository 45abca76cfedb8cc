"""A verdict and a report in a user's words: each of the planner's own terms that reaches a
person (a rule's name, a profile's internal name) is explained where it first appears, and
the verdict's headline says what to deploy and the gain it expects with one figure and its
interval (the confirmation's: other figures in the text are earlier readings, each said as
such), the recipe's flags beside its name."""

from __future__ import annotations

import re

# Term -> what it means to a person who never read the SKILL.md (said once, at first use).
GLOSSARY: dict[str, str] = {
    "restore_default": "the env file's settings put back to their default values",
    "baseline-deployed": "the job as the model's env file runs it today",
    "family_gaps": "untried values of flags already tried",
    "arms": "train_env.sh blocks, one per profile",
    "arm": "a train_env.sh block for one profile",
    "cell": "this model and parallelism",
    "Wave 6": "the recipe re-run on the other config tags",
}


def explained(text: str) -> str:
    """`text` with each glossary term explained in brackets at its first use (a term
    already followed by an explanation in brackets is left as it is)."""
    for term, meaning in GLOSSARY.items():
        m = re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text)
        if m is None or text[m.end():m.end() + 2].startswith(" ("):
            continue
        text = f"{text[:m.end()]} ({meaning}){text[m.end():]}"
    return text


def headline(kind: str, recipe: str | None, gain: float | None,
             interval: tuple[float, float] | None, n: int, flags: str, flags_var: str) -> str:
    """`proposal: R +x% vs baseline-deployed (95 % interval ..., n runs ...); deploy R: <flags>
    (in VAR)`: the one figure a person acts on; no recipe: the verdict's kind alone."""
    if recipe is None:
        return f"{kind}: no change to deploy"
    said = f"{kind}: {recipe} {gain or 0:+.2%} vs baseline-deployed"
    if interval is not None:
        said += (f" (expected gain; 95 % interval {interval[0]:+.2%} to {interval[1]:+.2%}, "
                 f"from {n} run{'s' if n != 1 else ''} made to confirm it)")
    where = f" (in {flags_var})" if flags_var != "XLA_FLAGS" else ""
    return said + f"; deploy {recipe}: {flags or 'its settings as the report lists them'}{where}"
