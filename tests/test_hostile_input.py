"""Hostile input (issue 16, items 7 and 8): control characters are refused in every spec
field and escaped wherever text from elsewhere is shown; an oversized hostlist is refused
before it is expanded, and every error names node sets compactly and stays small."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sweepd.core.states import RunState, SweepState
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.notify import format as fmt
from sweepd.store.rows import RunParams
from sweepd.util.hostlists import MAX_NODES, count_hostlist, expand_nodes
from sweepd.util.text import compact_nodes, escape
from tests.golden_files import GOLDEN, check_golden
from tests.support.service import NODES, SPEC, Api, Daemon, write_spec

ESC_NAME = "x\x1b[2J\x1b]0;pwned\x07\nfake line\x00\u202e"
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but \n


def _raw_controls(text: str) -> list[str]:
    return RAW.findall(text)


# -- item 7: refused in every free-text field ----------------------------------------------

@pytest.mark.parametrize(("spec", "field"), [
    ({**SPEC, "name": ESC_NAME}, "name"),
    ({**SPEC, "env": {"NCCL_DEBUG": "INFO\x1b[31m"}}, "env.NCCL_DEBUG"),
    ({**SPEC, "env": {"BAD\nKEY": "1"}}, "env"),
    ({**SPEC, "overrides": {"remat_policy": "full\r"}}, "overrides.remat_policy"),
    ({**SPEC, "nodes": "chi[2832,2863]\x1b"}, "nodes"),
    ({**SPEC, "parameter": "remat_policy", "values": ["full", "min\x9b"]}, "values.1"),
    ({"kind": "model-sweep", "nodes": NODES, "commits": ["main", "cand\x1b[0m"]}, "commits.1"),
    ({"kind": "node-perf", "nodes": NODES, "name": "n\u2028p"}, "name"),
    ({"kind": "network", "nodes": NODES, "overrides": {"x": "\x7f"}}, "overrides.x"),
])
def test_control_characters_are_refused_naming_the_field(spec: dict[str, Any],
                                                         field: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(spec)
    assert [".".join(map(str, d["loc"])) for d in e.value.errors] == [field]
    assert "control character" in e.value.errors[0]["msg"]
    assert not _raw_controls(str(e.value)) and "\n" not in str(e.value)


async def test_api_refuses_a_control_character_in_the_name(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "name": ESC_NAME})
    assert status == 422
    assert body["details"][0]["loc"] == ["name"]
    assert "\\x1b" in body["details"][0]["msg"]
    status, sweeps = await api.call("GET", "/sweeps")
    assert sweeps == []   # nothing recorded


async def test_submit_refuses_a_control_character_with_exit_2(daemon: Daemon,
                                                              tmp_path: Path) -> None:
    path = write_spec(tmp_path, json.dumps({**SPEC, "name": ESC_NAME}), "s.json")
    code, out, err = await daemon.run("submit", path)
    assert code == 2 and out == ""
    assert "name: control characters \\x1b, \\x07, \\n, \\x00, \\u202e" in err
    assert not _raw_controls(err)
    assert await daemon.store.sweeps.all() == []


# -- item 7: escaped wherever text from elsewhere is shown ---------------------------------

def test_escape_keeps_text_and_writes_controls_out() -> None:
    assert escape("plain — text ü") == "plain — text ü"
    assert escape("a\x1b[31mb\nc\r") == "a\\x1b[31mb\\nc\\r"
    assert escape("a\x1bb\nc", keep_newlines=True) == "a\\x1bb\nc"
    assert escape(escape("\x1b\u202e")) == "\\x1b\\u202e"   # idempotent


async def _hostile_sweep(d: Daemon) -> int:
    """A sweep whose name came in before names were checked, with a job whose node and
    log evidence came from the scheduler and a log: all carrying escape sequences."""
    sid = await d.store.sweeps.create("model-perf", ESC_NAME, {**SPEC, "name": ESC_NAME})
    run = await d.store.runs.add(sid, "b=8",
                                     RunParams(overrides={"per_device_batch_size": 8}), NODES,
                                     "test")
    await d.store.jobs.create(run, "tok", "job\x1b[1m", "chi1\x1b")
    await d.store.runs.transition(run.id, RunState.ACTIVE, "submitting")
    await d.store.runs.transition(run.id, RunState.FAILED, "oom\x1b[2K", outcome="oom")
    await d.store.events.add(sid, "decision", "failed: \x1b[31mred\x1b[0m", rule="r",
                                 evidence="log: CUDA\x1b[2J out of memory\r\x1b[Kfine")
    await d.store.sweeps.transition(sid, SweepState.RUNNING, "started",
                                        progress=f"sweep {ESC_NAME} started")
    await d.store.sweeps.transition(sid, SweepState.DONE, "done\x1b[0m")
    return sid


async def test_cli_output_escapes_every_control_character(daemon: Daemon) -> None:
    sid = await _hostile_sweep(daemon)
    for argv in (["list"], ["show", str(sid)], ["report", str(sid)], ["explain", str(sid)],
                 ["watch", str(sid)]):
        code, out, err = await daemon.run(*argv)
        assert code == 0, (argv, err)
        assert not _raw_controls(out + err), (argv, out)
        assert "\\x1b" in out, argv
    code, out, _ = await daemon.run("list")
    assert len(out.splitlines()) == 2   # the header and one row: the name's \n is shown


async def test_markdown_report_keeps_the_name_on_its_line(daemon: Daemon) -> None:
    sid = await _hostile_sweep(daemon)
    markdown = (await daemon.service.report(sid))["markdown"]
    assert not _raw_controls(markdown)
    assert markdown.splitlines()[0] == f"# Sweep {sid}: {escape(ESC_NAME)}"
    assert "fake line" not in markdown.splitlines()[1]


def test_telegram_messages_escape_control_characters() -> None:
    for klass, report in ((fmt.Klass.STOP, None), (fmt.Klass.ROUTINE, None),
                          (fmt.Klass.FINAL, f"# Sweep 1: {ESC_NAME}\n| a | b |")):
        parts = fmt.parts(f"[model-perf STOP] {ESC_NAME}", klass, report)
        text = "".join(p.text for p in parts)
        assert not _raw_controls(text) and "\\x1b" in text
    long = fmt.split(("\x1b" * 50 + "\n") * 200)
    assert all(len(c) <= fmt.LIMIT for c in long)   # escaped before the split, not after


# -- item 8: oversized hostlists --------------------------------------------------------------

def test_a_hostlist_is_counted_without_expanding_it() -> None:
    assert count_hostlist("chi[1-100000]") == 100_000
    assert count_hostlist("a[1-3]b[01-02],c,d[1-10,15]") == 6 + 1 + 11
    assert count_hostlist("x[1-99999999999999999999999]") > MAX_NODES
    with pytest.raises(ValueError, match="names 100,000 nodes; at most 4,096"):
        expand_nodes("chi[1-100000]")
    with pytest.raises(ValueError, match="names 200,000 nodes"):
        expand_nodes("a[1-100000],b[1-100000]")   # each part under hostlist's own limit


def test_compact_nodes_is_a_bounded_hostlist() -> None:
    assert compact_nodes(["chi3", "chi1", "chi2", "chi7"]) == "chi[1-3,7]"
    scattered = [f"n{i}x{i}" for i in range(3000)]   # no range to collapse
    shown = compact_nodes(scattered)
    assert len(shown) < 250 and shown.endswith("… (3000 nodes)")


async def test_submit_of_an_oversized_hostlist_is_one_short_refusal(
        daemon: Daemon, tmp_path: Path) -> None:
    path = write_spec(tmp_path, json.dumps({**SPEC, "nodes": "chi[1-100000]"}), "s.json")
    code, out, err = await daemon.run("submit", path)
    assert code == 2 and out == ""
    assert len(err.splitlines()) <= 3 and len(err) < 1000, err
    assert "100,000 nodes" in err
    code, out, err = await daemon.run("submit", path, "--json")
    body = json.loads(out)
    assert code == 2 and body["exit"] == 2 and "100,000 nodes" in body["error"]
    assert err == ""


async def test_api_refusal_of_unknown_nodes_is_compact(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps",
                                  json={**SPEC, "nodes": "chi[2832,5000-9000]"})
    assert status == 422
    # One compact detail, the 4001 unknown nodes as one range.
    assert [d["loc"] for d in body["details"]] == [["nodes"]]
    check_golden(GOLDEN / "hostile_input" / "unknown_nodes_detail.txt",
                 body["details"][0]["msg"] + "\n")
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "nodes": "chi[1-100000]"})
    assert status == 422 and len(json.dumps(body)) < 1000


async def test_resume_exclude_of_an_oversized_hostlist(daemon: Daemon) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    await daemon.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await daemon.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "stop")
    code, out, err = await daemon.run("resume", str(sid), "--exclude", "chi[1-100000]")
    assert code == 2 and len(err.splitlines()) == 2 and "100,000 nodes" in err
    code, out, err = await daemon.run("resume", str(sid), "--exclude", "chi[1-4000]")
    assert code == 2 and len(err) < 1000, err   # not pinned: named compactly
    assert "is not pinned to chi[1-2831," in err
    code, out, err = await daemon.run("resume", str(sid), "--json", "--exclude",
                                      "chi[1-3000]", "chi[3001-6000]")
    assert code == 2 and "more than 4,096 nodes in all" in json.loads(out)["error"]
    code, out, err = await daemon.run("resume", str(sid), "--exclude", "chi2832\x1b[2J")
    assert code == 2 and "exclude.0: control character \\x1b in a node name" in err
    assert (await daemon.store.sweeps.get(sid)).state == SweepState.AWAITING_DECISION


async def test_client_bounds_what_a_daemon_sends(daemon: Daemon,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An older daemon's 422 with 99,993 details: the client prints a bounded answer."""
    import argparse

    from sweepd.cli.output import fail

    details = [{"loc": ["nodes"], "msg": f"not a node of this cluster: chi{i}"}
               for i in range(99_993)]
    capsys.readouterr()
    assert fail(argparse.Namespace(), "not nodes of this cluster: " + "x" * 10_000,
                details) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) <= 22 and "… and 99974 more" in err


async def test_chat_answers_escape_control_characters(service: Any, double: Any) -> None:
    """/status, /show and /report through the real PTB client and the Bot API double."""
    from tests.support.service import poll
    from tests.telegram_double import CHAT

    sid = await service.store.sweeps.create("model-perf", ESC_NAME,
                                                  {**SPEC, "name": ESC_NAME})
    await service.store.sweeps.transition(sid, SweepState.RUNNING, "started\x1b[2K")
    for command in ("/status", f"/show {sid}", f"/report {sid}"):
        double.queue_message(CHAT, command)
    assert await poll(service, double) == 3
    texts = double.texts()
    assert len(texts) == 3
    for text in texts:
        assert not _raw_controls(text) and "\\x1b" in text, text
