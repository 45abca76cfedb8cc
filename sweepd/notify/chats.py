"""Which Telegram chats a sweep's messages go to.

A spec may name its chats (`chats: [...]`); each must be one the daemon allows (its
configured chats). Without it, messages go to the first configured chat, as before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sweepd.kinds.spec import SpecError


def refuse_unknown_chats(chats: Sequence[int] | None, allowed: Collection[int] | None) -> None:
    """At submit: a chat the daemon does not allow would never see the sweep (and must not:
    it is not the team's). `allowed` None: this process sends to no chat (`sweepd run`)."""
    if not chats or allowed is None:
        return
    if not allowed:
        what = "this daemon sends no Telegram messages (telegram.enabled is off): drop chats"
        raise SpecError(what, [{"loc": ["chats"], "msg": what}])
    unknown = [c for c in chats if c not in allowed]
    if unknown:
        what = (f"not a chat this daemon may send to: {', '.join(map(str, unknown))} "
                f"(allowed: {', '.join(map(str, sorted(allowed)))})")
        raise SpecError(what, [{"loc": ["chats"], "msg": what}])


def sweep_chats(spec: Mapping[str, Any], configured: Sequence[int]) -> list[int]:
    """The chats of a stored spec, in its order: those still configured, else the first
    configured chat (a chat removed from the config since the submit no longer gets
    anything)."""
    named = [c for c in spec.get("chats") or [] if c in configured]
    return named or list(configured[:1])
