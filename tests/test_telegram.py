"""Telegram delivery with the real python-telegram-bot client against the local Bot API
double: progress lines, stop messages with buttons, chunking, parse-mode fallback, the rate
limit with digests, the final report; and the message formats as pure functions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from sweepd.app.service import Service
from sweepd.config import TelegramConfig
from sweepd.core.states import RunState, SweepState
from sweepd.notify import build_workers
from sweepd.notify import format as fmt
from sweepd.notify.bot import make_bot
from sweepd.notify.logsink import LogSink
from sweepd.notify.secrets import SecretError
from sweepd.notify.telegram import TelegramNotifier
from sweepd.reports.lines import result_line, retry_line
from sweepd.store.outbox import Outbox
from sweepd.store.rows import RunParams
from sweepd.util.columns import aligned_tables
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.telegram_double import (
    CHAT,
    FAST,
    SPEC,
    BotApiDouble,
    Sleeps,
    token,
)

PASS = "llama2-70b 8N per_device_batch_size=12 (job 9801): 2,036 TGS/device, 34.9% MFU — PASS"
FAIL = "llama2-70b 8N per_device_batch_size={} (job 98{:02d}): OOM — FAIL"
RETRY = ("llama2-70b 8N per_device_batch_size=16 (job 9816): FAILED (NCCL WARN Timeout) — "
         "RETRY: a collective timeout, run once more")
# Routine progress (not a result): what the hourly budget holds back.
ROUTINE = ("sweep 1: the Slurm controller does not answer (last answer {} s ago): waiting up "
           "to 15 min")
STOP = ("[model-perf STOP] llama2-70b sweep 1 halted\n\nReason: node chi3 faulted twice\n"
        "Awaiting your decision before resuming.")


async def deliver(service: Service, double: BotApiDouble, per_hour: int | None = None,
                  limit: int = fmt.LIMIT, clock_at: float | None = None) -> TelegramNotifier:
    bot = make_bot(token(), double.base_url, FAST)
    notifier = TelegramNotifier(Outbox(service.store), bot, token(), CHAT, service,
                                routine_per_hour=per_hour, timing=FAST, limit=limit,
                                sleep=Sleeps(),
                                clock=time.time if clock_at is None else lambda: clock_at)
    try:
        await notifier.deliver_pending()
    finally:
        await bot.shutdown()
    return notifier


async def running_sweep(service: Service) -> int:
    sid = int((await service.submit(SPEC))["id"])
    await service.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    return sid


async def test_progress_lines_go_in_order_as_plain_text(service: Service,
                                                        double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    lines = [FAIL.format(16, 2), PASS, f"sweep {sid} resumed"]
    for line in lines:
        await service.store.events.add(sid, "progress", line)
    await deliver(service, double)
    assert double.texts(CHAT) == lines
    assert all(s.parse_mode is None and s.reply_markup is None for s in double.sent)
    await deliver(service, double)  # a second pass sends nothing again
    assert len(double.sent) == 3


async def test_stop_message_carries_resume_and_abort_buttons(service: Service,
                                                            double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    await service.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "node fault",
                                                progress=STOP)
    await deliver(service, double)
    [sent] = double.sent
    assert sent.text == STOP
    stop = await service.current_stop(sid)   # Resume names the stop it answers
    assert sent.reply_markup == {"inline_keyboard": [[
        {"text": "Resume", "callback_data": f"resume:{sid}:{stop}"},
        {"text": "Abort", "callback_data": f"abort:{sid}"}]]}


async def test_long_message_is_split_into_numbered_chunks(service: Service,
                                                          double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    body = "\n".join(f"line {i:04d} " + "x" * 80 for i in range(100))  # ~9,000 chars
    await service.store.events.add(sid, "progress", body)
    await deliver(service, double)
    texts = double.texts()
    assert [t[:6] for t in texts] == ["[1/3] ", "[2/3] ", "[3/3] "]
    assert all(len(t) <= 4096 for t in texts)
    assert "\n".join(t[6:] for t in texts) == body


async def test_final_report_is_monospace_and_falls_back_to_plain(service: Service,
                                                                 double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    run = await service.store.runs.add(sid, "per_device_batch_size=12",
                                           RunParams(overrides={"per_device_batch_size": 12}),
                                           SPEC["nodes"], "plan")
    await service.store.runs.transition(run.id, RunState.ACTIVE, "submitted")
    await service.store.runs.transition(run.id, RunState.PASSED, "ok", outcome="pass",
                                            tgs=2036.0, mfu=30.0)
    summary = "best per_device_batch_size=12 at 2,036 TGS/device"
    await service.store.sweeps.transition(sid, SweepState.DONE, summary, verdict={},
                                                progress=summary)
    double.reject_parse_mode = True  # Telegram refuses the Markdown: the chunk goes plain
    await deliver(service, double)
    rejected = [c for c in double.methods("sendMessage") if c.get("parse_mode")]
    assert rejected and rejected[0]["text"].startswith(fmt.escape_markdown(summary))
    sent, photo = double.sent   # the report, then its plot
    assert sent.parse_mode is None and photo.method == "sendPhoto"
    assert sent.text.startswith(summary + "\n\n```\n# Sweep")
    assert sent.text.endswith("```")
    # The report as the chat shows it: its table in aligned columns, no pipes.
    check_golden(GOLDEN / "telegram" / "final_report_plain.txt", scrubbed(f"{sent.text}\n"))


async def test_final_report_sends_the_plot_as_a_photo(service: Service,
                                                      double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    store = service.store
    for bs, tgs in ((8, 1800.0), (12, 2036.0)):
        run = await store.runs.add(sid, f"per_device_batch_size={bs}",
                                       RunParams(overrides={"per_device_batch_size": bs}),
                                       SPEC["nodes"], "plan")
        await store.runs.transition(run.id, RunState.ACTIVE, "submitted")
        await store.runs.transition(run.id, RunState.PASSED, "ok", outcome="pass", tgs=tgs,
                                        mfu=30.0)
    assert await service.plot(sid) is not None
    await store.sweeps.transition(sid, SweepState.DONE, "best 12", verdict={},
                                        progress="best 12")
    await deliver(service, double)
    assert [s.method for s in double.sent][-2:] == ["sendMessage", "sendPhoto"]
    assert "caption" not in double.methods("sendPhoto")[0]   # the verdict is not repeated
    assert double.sent[-2].parse_mode == "Markdown"
    assert double.methods("sendPhoto")[0]["photo"] == "<file>"


async def test_routine_lines_over_the_hourly_limit_are_digested_before_a_result(
        service: Service, double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    fails = [ROUTINE.format(b) for b in (16, 20, 24, 28, 32)]
    for line in fails:
        await service.store.events.add(sid, "progress", line)
    await deliver(service, double, per_hour=2, clock_at=1_000_000.0)
    assert double.texts() == fails[:2]  # the other three are held
    await service.store.events.add(sid, "progress", PASS)  # a positive result goes at once
    await service.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "x",
                                                progress=STOP)
    await deliver(service, double, per_hour=2, clock_at=1_000_010.0)
    texts = double.texts()
    assert texts[:2] == fails[:2] and texts[3:] == [PASS, STOP]
    assert texts[2] == fmt.digest_text(fails[2:])  # held lines first, in order


async def test_failure_lines_go_at_once_however_many_in_the_hour(
        service: Service, double: BotApiDouble) -> None:
    """Issue 21 item 7: the seed says "When a job fails, report it immediately"; failures
    were routine lines, so past two an hour they waited for an hourly digest."""
    sid = await running_sweep(service)
    first = ROUTINE.format(60)
    await service.store.events.add(sid, "progress", first)   # spends the hour's budget
    held = ROUTINE.format(120)
    await service.store.events.add(sid, "progress", held)    # over it: held
    fails = [FAIL.format(b, b) for b in (16, 20, 24, 28, 32)]
    for line in [*fails, RETRY]:
        await service.store.events.add(sid, "progress", line)
    await deliver(service, double, per_hour=1, clock_at=1_000_000.0)
    texts = double.texts()
    # Every failure went out now, each on its own, in order; the held routine line went
    # first as the digest (the person reads things in the order they happened).
    assert texts == [first, fmt.digest_text([held]), *fails, RETRY]
    # Failures do not use up the routine budget: an hour later one routine line goes alone.
    later = ROUTINE.format(3700)
    await service.store.events.add(sid, "progress", later)
    await deliver(service, double, per_hour=1, clock_at=1_003_700.0)
    assert double.texts()[-1] == later


async def test_held_lines_go_as_a_digest_when_the_hour_has_passed(service: Service,
                                                                  double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    fails = [ROUTINE.format(b) for b in (16, 20, 24)]
    for line in fails:
        await service.store.events.add(sid, "progress", line)
    await deliver(service, double, per_hour=1, clock_at=1_000_000.0)
    assert double.texts() == fails[:1]
    await deliver(service, double, per_hour=1, clock_at=1_000_100.0)
    assert double.texts() == fails[:1]  # still within the hour
    await deliver(service, double, per_hour=1, clock_at=1_003_700.0)
    assert double.texts() == [fails[0], fmt.digest_text(fails[1:])]


async def test_without_telegram_messages_go_to_the_structured_log(service: Service) -> None:
    sid = await running_sweep(service)
    await service.store.events.add(sid, "progress", PASS)
    sink = LogSink(Outbox(service.store))
    with capture_logs() as logs:
        assert await sink.deliver_pending() == 1
        assert await sink.deliver_pending() == 0  # logged once
    assert [e["text"] for e in logs if e["event"] == "notify.message"] == [PASS]


async def test_telegram_off_gives_the_log_sink_and_on_without_token_refuses(
        service: Service, tmp_path: Path) -> None:
    workers = build_workers(TelegramConfig(), service.store, service, env={})
    assert [name for name, _ in workers.runners] == ["notify"]
    config = TelegramConfig(enabled=True, token_file=None, chat_ids=[CHAT])
    with pytest.raises(SecretError, match="TG_BOT_TOKEN"):
        build_workers(config, service.store, service, env={})


# -- pure formats -----------------------------------------------------------------------------


def test_classes() -> None:
    assert fmt.classify(STOP, final=False) == fmt.Klass.STOP
    assert fmt.classify(PASS, final=False) == fmt.Klass.POSITIVE
    assert fmt.classify(FAIL.format(1, 1), final=False) == fmt.Klass.FAILURE
    assert fmt.classify(RETRY, final=False) == fmt.Klass.FAILURE
    assert fmt.classify(ROUTINE.format(60), final=False) == fmt.Klass.ROUTINE
    # A cancel outside sweepd is no failure: the run goes again (reports/lines.py).
    cancelled = result_line("llama2-70b", 8, "per_device_batch_size=12", "9801", "cancelled",
                            None, None)
    assert fmt.classify(retry_line(cancelled, "scancel by root"), final=False) \
        == fmt.Klass.ROUTINE
    assert fmt.classify("best 12", final=True) == fmt.Klass.FINAL
    assert fmt.routine_allowed(1, 2) and not fmt.routine_allowed(2, 2)
    assert fmt.routine_allowed(99, None)


def test_chunks_reopen_a_code_fence_cut_in_the_middle() -> None:
    table = "\n".join(f"| {i:3d} | {'y' * 60} |" for i in range(40))
    text = fmt.report_markdown("best per_device_batch_size=12", table)
    chunks = fmt.split(text, limit=1000)
    assert len(chunks) > 2 and all(len(c) <= 1000 for c in chunks)
    for n, c in enumerate(chunks, 1):
        assert c.startswith(f"[{n}/{len(chunks)}] ")
        assert c.count("```") % 2 == 0, c  # every chunk's fences are balanced
    assert chunks[1].startswith(f"[2/{len(chunks)}] ```\n")
    body = "".join(c.split("] ", 1)[1] for c in chunks).replace("```\n", "").replace("\n```", "")
    assert all(f"{i:<2}  {'y' * 60}" in body for i in range(40))


def test_report_tables_are_aligned_columns_without_pipes() -> None:
    table = "Runs:\n\n| Batch | TGS | Status |\n|---|---|---|\n| 8 | 1,800 | works |\n" \
            "| 12 | 2,036 | works ← optimum |\n\nafter"
    assert aligned_tables("a | b\n|x|") == "a | b\nx"
    check_golden_cases(GOLDEN / "telegram" / "aligned_tables.txt",
                       {"a Markdown table between text": aligned_tables(table)})


def test_one_overlong_line_is_cut_hard() -> None:
    chunks = fmt.split("z" * 10_000)
    assert len(chunks) == 3 and all(len(c) <= 4096 for c in chunks)
    assert "".join(c.split("] ", 1)[1] for c in chunks) == "z" * 10_000


def test_markdown_escape_round_trips_through_plain() -> None:
    text = "per_device_batch_size=12 *bold* `code` [link"
    check_golden(GOLDEN / "telegram" / "markdown_escape.txt", f"{fmt.escape_markdown(text)}\n")
    assert fmt.plain(fmt.escape_markdown(text)) == text


async def test_an_abort_goes_at_once_even_over_the_hourly_limit(service: Service,
                                                                double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    fails = [ROUTINE.format(b) for b in (16, 20)]
    for line in fails:
        await service.store.events.add(sid, "progress", line)
    await service.abort(sid)   # nothing after it would ever flush a held line
    await deliver(service, double, per_hour=1, clock_at=1_000_000.0)
    texts = double.texts()
    assert texts[0] == fails[0] and texts[1] == fmt.digest_text(fails[1:])
    assert any(f"sweep {sid}: aborted by a person" in t for t in texts[2:])


async def test_a_resume_is_answered_at_once_even_over_the_hourly_limit(
        service: Service, double: BotApiDouble) -> None:
    sid = await running_sweep(service)
    fails = [ROUTINE.format(b) for b in (16, 20)]
    for line in fails:
        await service.store.events.add(sid, "progress", line)
    await service.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "x",
                                                progress=STOP)
    await service.resume(sid)
    await deliver(service, double, per_hour=1, clock_at=1_000_000.0)
    texts = double.texts()
    assert texts[-1] == f"sweep {sid} resumed"   # not held for a digest
