"""Chat control through the real PTB client and the Bot API double: commands from the
configured chat, the stop buttons, strangers ignored and logged, unknown ids answered."""

from __future__ import annotations

from structlog.testing import capture_logs

from sweepd.app.service import Service
from sweepd.core.states import SweepState
from sweepd.notify.bot import make_bot
from sweepd.notify.chat import OFFSET_KEY, ChatControl, Command, parse_command
from sweepd.store.outbox import Outbox
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.support.service import poll
from tests.telegram_double import (
    CHAT,
    FAST,
    SPEC,
    STRANGER,
    BotApiDouble,
    Sleeps,
    token,
)


async def stopped_sweep(service: Service) -> int:
    sid = int((await service.submit(SPEC))["id"])
    await service.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await service.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "node fault",
                                                progress="[model-perf STOP] halted")
    return sid


async def test_status_show_and_report_answer_the_configured_chat(service: Service,
                                                                 double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    double.queue_message(CHAT, "/status")
    double.queue_message(CHAT, f"/show {sid}")
    double.queue_message(CHAT, f"/report@sweepd_bot {sid}")
    assert await poll(service, double) == 3
    status, show, report = double.sent
    assert status.chat_id == CHAT
    name = (await service.summary(sid))["name"]
    check_golden_cases(GOLDEN / "chat_control" / "status.txt",
                       {"/status": scrubbed(status.text, name=name)})
    assert show.text.startswith(f"#{sid} ") and "runs: 0, jobs: 0" in show.text
    assert report.parse_mode == "Markdown" and report.text.startswith(f"```\n# Sweep {sid}:")


async def test_abort_and_cancel_act_and_unknown_ids_get_a_clear_answer(
        service: Service, double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    double.queue_message(CHAT, "/abort 99")
    double.queue_message(CHAT, f"/abort {sid}")
    double.queue_message(CHAT, f"/cancel {sid}")
    double.queue_message(CHAT, "/resume")
    double.queue_message(CHAT, "/frobnicate 3")
    await poll(service, double)
    assert (await service.summary(sid))["state"] == SweepState.ABORTED
    unknown, aborted, again, usage, bad = double.texts()
    assert aborted.startswith(f"abort: #{sid} ") and "aborted" in aborted
    check_golden_cases(GOLDEN / "chat_control" / "refusals.txt", {
        "/abort 99": unknown, f"/cancel {sid} (aborted)": again, "/resume": usage,
        "/frobnicate 3": bad})


async def test_a_stranger_is_ignored_and_logged(service: Service, double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    double.queue_message(STRANGER, f"/abort {sid}")
    double.queue_button(STRANGER, 555, f"abort:{sid}")
    with capture_logs() as logs:
        assert await poll(service, double) == 2
    assert double.sent == [] and double.methods("answerCallbackQuery") == []
    assert (await service.summary(sid))["state"] == SweepState.AWAITING_DECISION
    strangers = [e for e in logs if e["event"] == "chat.stranger_ignored"]
    assert [e["chat"] for e in strangers] == [STRANGER, STRANGER]


async def test_resume_button_resumes_and_removes_the_buttons(service: Service,
                                                             double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    stop = await service.current_stop(sid)
    double.queue_button(CHAT, 777, f"resume:{sid}:{stop}")
    await poll(service, double)
    assert (await service.summary(sid))["state"] == SweepState.RUNNING
    [answer] = double.methods("answerCallbackQuery")
    assert answer["callback_query_id"] == "cq1" and f"#{sid}" in answer["text"]
    [edit] = double.methods("editMessageReplyMarkup")
    assert edit["chat_id"] == str(CHAT) and edit["message_id"] == "777"
    assert double.texts() == [answer["text"]]


async def test_a_handled_update_is_not_handled_again_after_restart(
        service: Service, double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    uid = double.queue_message(CHAT, f"/resume {sid}")
    assert await poll(service, double) == 1
    assert await Outbox(service.store).get_state(OFFSET_KEY) == str(uid + 1)
    assert await poll(service, double) == 0  # the next client asks from the stored offset
    assert double.methods("getUpdates")[-1]["offset"] == str(uid + 1)
    assert len(double.sent) == 1


def test_parse_command() -> None:
    assert parse_command("/status") == Command("status")
    assert parse_command("/show 12") == Command("show", 12)
    assert parse_command("/ABORT@sweepd_bot  7 ") == Command("abort", 7)
    assert parse_command("hello") is None
    bad = parse_command("/show twelve")
    assert bad is not None and bad.error is not None and "usage: /show ID" in bad.error
    assert parse_command("/resume 4 chi9999 chi[1-2]") == Command("resume", 4,
                                                                  exclude=("chi9999", "chi[1-2]"))
    extra = parse_command("/abort 4 chi1")
    assert extra is not None and extra.error == "usage: /abort ID"


async def test_resume_from_the_chat_can_exclude_nodes(service: Service,
                                                      double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    double.queue_message(CHAT, f"/resume {sid} zzz9")        # not a node of the sweep
    await poll(service, double)
    assert (await service.summary(sid))["state"] == SweepState.AWAITING_DECISION
    double.queue_message(CHAT, f"/resume {sid} chi[2863,2867]")
    await poll(service, double)
    refused, resumed = double.texts()
    assert refused.startswith(f"Cannot resume sweep {sid}:") and "zzz9" in refused
    assert resumed.startswith(f"resume: #{sid} ")
    excluded = await service.store.exclusions.of_sweep(sid)
    assert [e.node for e in excluded] == ["chi2863", "chi2867"]


async def test_a_resume_button_under_an_older_stop_does_not_resume_a_later_one(
        service: Service, double: BotApiDouble) -> None:
    sid = await stopped_sweep(service)
    first = await service.current_stop(sid)
    await service.resume(sid)                       # answered from the CLI: buttons stay
    await service.store.sweeps.transition(
        sid, SweepState.AWAITING_DECISION, "unhealthy",
        progress="[model-perf STOP] the cluster is unhealthy")
    assert first is not None and await service.current_stop(sid) != first
    double.queue_button(CHAT, 777, f"resume:{sid}:{first}")
    await poll(service, double)
    assert (await service.summary(sid))["state"] == SweepState.AWAITING_DECISION
    [answer] = double.methods("answerCallbackQuery")
    assert "no longer at this stop" in answer["text"]


async def test_a_chat_sees_and_acts_on_only_the_sweeps_that_report_to_it(
        service: Service, double: BotApiDouble) -> None:
    """Two teams' chats on one daemon: a sweep that reports to the other team's chat is
    neither listed nor shown nor aborted from this one (buttons included)."""
    other = CHAT + 1
    service.allowed_chats = frozenset({CHAT, other})
    mine = await stopped_sweep(service)
    theirs = int((await service.submit({**SPEC, "chats": [other]}))["id"])
    bot = make_bot(token(), double.base_url, FAST)
    chat = ChatControl(Outbox(service.store), bot, token(), [CHAT, other], service,
                       poll_timeout_s=0, timing=FAST, sleep=Sleeps())
    double.queue_message(CHAT, "/status")
    double.queue_message(CHAT, f"/show {theirs}")
    double.queue_message(CHAT, f"/abort {theirs}")
    double.queue_button(CHAT, 556, f"abort:{theirs}")
    double.queue_message(other, "/status")
    try:
        await chat.poll_once()
    finally:
        await bot.shutdown()
    status, show, abort, *rest = double.texts()
    assert status.startswith(f"#{mine} ") and f"#{theirs} " not in status
    check_golden_cases(GOLDEN / "chat_control" / "another_chats_sweep.txt",
                       {f"/show {theirs}": show, f"/abort {theirs}": abort})
    assert (await service.summary(theirs))["state"] == SweepState.QUEUED
    assert rest[-1].startswith(f"#{theirs} ") and f"#{mine} " not in rest[-1]
