"""Chat control: long-poll `getUpdates`, answer commands and the stop buttons.

Only the configured chat ids are obeyed; anything else is logged and ignored (never
answered: a stranger learns nothing, not even that the bot is alive). The update offset is
stored, so a restart neither loses nor repeats a command already handled.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from telegram import Bot, CallbackQuery, Message, Update
from telegram.error import TelegramError

from sweepd.notify import format as fmt
from sweepd.notify.bot import DEFAULT_TIMING, Backoff, Timing, describe, send_text
from sweepd.notify.chats import sweep_chats
from sweepd.notify.secrets import Token
from sweepd.store.outbox import Outbox
from sweepd.store.store import InvalidTransition, NotFound
from sweepd.util.hostlists import expand_nodes
from sweepd.util.text import escape

log = structlog.get_logger("sweepd.chat")

OFFSET_KEY = "telegram.update_offset"
_COMMAND = re.compile(r"^/(\w+)(?:@\w+)?(?:\s+(.*))?$", re.S)
USAGE = ("Commands: /status, /show ID, /report ID, /resume ID [NODE to exclude ...], "
         "/abort ID, /cancel ID")
WITH_ID = frozenset({"show", "report", "resume", "abort", "cancel"})
# A stop message's buttons: `resume:SWEEP:STOP_EVENT` (older ones without the stop), `abort:SWEEP`.
_BUTTON = re.compile(r"(resume|abort):(\d+)(?::(\d+))?")


class Operations(Protocol):
    """What chat control needs from the service (sweepd.app.service.Service fits)."""

    async def list_sweeps(self) -> list[dict[str, Any]]: ...

    async def show(self, sweep_id: int) -> dict[str, Any]: ...

    async def report(self, sweep_id: int) -> dict[str, Any]: ...

    async def resume(self, sweep_id: int, exclude: Sequence[str] = ()) -> dict[str, Any]: ...

    async def abort(self, sweep_id: int) -> dict[str, Any]: ...

    async def cancel(self, sweep_id: int) -> dict[str, Any]: ...

    async def current_stop(self, sweep_id: int) -> int | None: ...


@dataclass(frozen=True)
class Command:
    name: str
    sweep_id: int | None = None
    error: str | None = None  # set when the command cannot run as written
    exclude: tuple[str, ...] = ()   # /resume ID NODE...: nodes to add to its exclusions


def parse_command(text: str) -> Command | None:
    """`/show 3` → Command("show", 3); not a command → None. Pure."""
    m = _COMMAND.match(text.strip())
    if not m:
        return None
    name, arg = m.group(1).lower(), (m.group(2) or "").strip()
    if name == "status":
        return Command(name)
    if name in WITH_ID:
        first, *rest = arg.split() or [""]
        if not first.isdigit():
            return Command(name, error=f"usage: /{name} ID (a sweep id, e.g. /{name} 3)")
        if rest and name != "resume":
            return Command(name, error=f"usage: /{name} ID")
        return Command(name, int(first), exclude=tuple(rest))
    return Command(name, error=f"unknown command /{name}. {USAGE}")


def status_line(s: dict[str, Any]) -> str:
    reason = f" — {str(s['reason']).splitlines()[0]}" if s.get("reason") else ""
    return f"#{s['id']} {s['kind']} {s['name']}: {s['state']}{reason}"


def show_text(d: dict[str, Any]) -> str:
    lines = [status_line(d), f"runs: {d['runs']}, jobs: {len(d.get('jobs', []))}"]
    for r in d.get("run_list", []):
        tgs = f" {r['tgs']:,.0f} TGS" if r.get("tgs") is not None else ""
        lines.append(f"  {r['label']}: {r['state']}{tgs}"
                     + (f" ({r['outcome']})" if r.get("outcome") else ""))
    active = [e["node"] for e in d.get("exclusions", []) if e.get("active")]
    if active:
        lines.append(f"excluded: {', '.join(active)}")
    return "\n".join(lines)


class ChatControl:
    def __init__(self, outbox: Outbox, bot: Bot, token: Token, chat_ids: Sequence[int],
                 ops: Operations, *, poll_timeout_s: int = 30, timing: Timing = DEFAULT_TIMING,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.outbox = outbox
        self.bot = bot
        self.token = token
        self.chat_ids = frozenset(chat_ids)
        self.ops = ops
        self._chat_list = list(chat_ids)
        self.poll_timeout_s = poll_timeout_s
        self._sleep = sleep
        self._backoff = Backoff(timing)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.poll_once()
                self._backoff.reset()
            except Exception as e:  # chat trouble must not stop sweeps
                log.warning("chat.poll_failed", error=describe(e, self.token))
                await self._sleep(self._backoff.next())

    async def poll_once(self) -> int:
        await self.bot.initialize()
        offset = int(await self.outbox.get_state(OFFSET_KEY) or 0)
        updates = await self.bot.get_updates(
            offset=offset or None, timeout=self.poll_timeout_s,
            allowed_updates=["message", "callback_query"])
        for update in updates:
            try:
                await self.handle(update)
            except TelegramError as e:  # the answer failed; the command itself ran
                log.warning("chat.answer_failed", error=describe(e, self.token))
            # Stored after handling each: a crash repeats at most the one in hand.
            await self.outbox.set_state(OFFSET_KEY, str(update.update_id + 1))
        return len(updates)

    def _allowed(self, chat_id: int | None, update: Update) -> bool:
        if chat_id in self.chat_ids:
            return True
        user = update.effective_user
        log.warning("chat.stranger_ignored", chat=chat_id, user=user.id if user else None,
                    update=update.update_id)
        return False

    async def handle(self, update: Update) -> None:
        if update.callback_query is not None:
            await self._button(update, update.callback_query)
            return
        msg = update.message
        if msg is None or msg.text is None:
            return
        if not self._allowed(msg.chat.id, update):
            return
        cmd = parse_command(msg.text)
        if cmd is None:
            await self._reply(msg.chat.id, f"Not a command. {USAGE}")
            return
        log.info("chat.command", chat=msg.chat.id, command=cmd.name, sweep=cmd.sweep_id)
        text, parse_mode = await self.execute(cmd, msg.chat.id)
        for chunk in fmt.split(text):
            await self._reply(msg.chat.id, chunk, parse_mode)

    async def chats_of(self, sweep_id: int) -> list[int]:
        """The chats the sweep reports to (raises NotFound): its stored spec's, one row."""
        return sweep_chats((await self.outbox.store.sweeps.get(sweep_id)).spec, self._chat_list)

    async def execute(self, cmd: Command, chat_id: int) -> tuple[str, str | None]:
        """The answer to a command from a chat, as (text, parse mode). A chat sees and acts
        on the sweeps that report to it only: a team's chat is no remote control for
        another team's sweeps."""
        if cmd.error:
            return cmd.error, None
        if cmd.name == "status":
            sweeps = [s for s in await self.ops.list_sweeps()
                      if chat_id in await self.chats_of(int(s["id"]))]
            return ("\n".join(status_line(s) for s in sweeps) or "No sweeps."), None
        assert cmd.sweep_id is not None
        sid = cmd.sweep_id
        try:
            if chat_id not in await self.chats_of(sid):
                return (f"Sweep {sid} reports to another chat: ask there, or use the "
                        "sweepd CLI.", None)
            if cmd.name == "show":
                return show_text(await self.ops.show(sid)), None
            if cmd.name == "report":
                return fmt.fenced(str((await self.ops.report(sid))["markdown"])), fmt.MARKDOWN
            if cmd.name == "resume":
                nodes = [n for expr in cmd.exclude for n in expand_nodes(expr)]
                s = await self.ops.resume(sid, nodes)
            elif cmd.name == "abort":
                s = await self.ops.abort(sid)
            else:
                s = await self.ops.cancel(sid)
        except NotFound:
            return f"No sweep {sid}: /status lists the sweeps.", None
        except InvalidTransition as e:
            return f"Cannot {cmd.name} sweep {sid}: {e}", None
        except ValueError as e:   # a node not of the sweep (SpecError), a bad hostlist
            return f"Cannot {cmd.name} sweep {sid}: {e}", None
        return f"{cmd.name}: {status_line(s)}", None

    async def _button(self, update: Update, query: CallbackQuery) -> None:
        message = query.message if isinstance(query.message, Message) else None
        chat_id = message.chat.id if message else None
        if not self._allowed(chat_id, update):
            return
        button = _BUTTON.fullmatch(query.data or "")
        if button is None:
            await query.answer("Unknown button")
            return
        action, sid, stop = button.group(1), int(button.group(2)), button.group(3)
        if stop is not None and not await self._at_stop(sid, int(stop)):
            text = (f"Sweep {sid} is no longer at this stop (it was answered, and the sweep may "
                    "have stopped again since): answer its latest stop message.")
        else:
            text, _ = await self.execute(Command(action, sid), chat_id or 0)
        log.info("chat.button", chat=chat_id, action=action, sweep=sid)
        await query.answer(text[:200])
        if message is not None:
            # The decision is made: take the buttons away so nobody presses them twice.
            await self.bot.edit_message_reply_markup(message.chat.id, message.message_id,
                                                     reply_markup=None)
            await self._reply(message.chat.id, text)

    async def _at_stop(self, sweep_id: int, stop_event: int) -> bool:
        try:
            return await self.ops.current_stop(sweep_id) == stop_event
        except NotFound:
            return False

    async def _reply(self, chat_id: int, text: str, parse_mode: str | None = None) -> None:
        await send_text(self.bot, chat_id, escape(text, keep_newlines=True), parse_mode)
