"""`sweepd report`'s kind flags (`--apply`, `--tuning-md`, `--force`, `--commit`) are declared
by the kinds (`ClientHooks.report_flags`), not by the CLI: the CLI adds every kind's, with
each kind's help, and runs the sweep's kind's action on them."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sweepd.cli.report as report_cli
from sweepd.cli.main import UsageError, build_parser
from sweepd.kinds.registry import ClientHooks, ClientOutput, Kind, ReportFlag, kinds
from tests.golden_files import GOLDEN, check_golden

GENERIC = {"-h", "--help", "--socket", "--config", "--json", "--csv", "--state-dir", "--plot",
           "--html"}


def _report_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices["report"]
    return parser


def _option(parser: argparse.ArgumentParser, name: str) -> argparse.Action:
    return next(a for a in parser._actions if name in a.option_strings)


@pytest.fixture
def with_kinds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run the CLI's report flags over these kinds in place of the registered ones."""
    def use(found: dict[str, Kind[Any, Any]]) -> None:
        monkeypatch.setattr(report_cli, "kinds", lambda: found)
        report_cli.kind_flags.cache_clear()

    yield use
    report_cli.kind_flags.cache_clear()


@pytest.mark.parametrize("name", sorted(kinds()))
def test_each_kinds_report_flags_are_the_ones_its_hook_declares(name: str) -> None:
    """Each flag a kind declares is an option of `report`, parsed to the value the kind's
    action reads, its help holding the kind's own part under the kind's name."""
    parser = _report_parser()
    for flag in kinds()[name].client.report_flags:
        action = _option(parser, flag.name)
        assert action.dest == flag.dest
        assert action.help is not None
        assert re.search(rf"(^|; )([a-z-]+, )*{name}(, [a-z-]+)*: {re.escape(flag.help)}",
                         action.help), (flag.name, action.help)
        given = parser.parse_args(["7", flag.name])
        assert getattr(given, flag.dest) == flag.options.get("const", True)


def test_reports_kind_options_are_exactly_the_kinds_declarations() -> None:
    """Nothing beyond the generic options is declared centrally: the rest is the union of
    the kinds' flags, and the acting ones are the kinds' `ClientHooks.flags`."""
    declared = {f.name for k in kinds().values() for f in k.client.report_flags}
    options = {o for a in _report_parser()._actions for o in a.option_strings}
    assert options - GENERIC == declared
    assert {"--apply", "--tuning-md", "--force", "--commit"} <= declared
    assert {n for n, k in kinds().items() if "force" in {f.dest for f in k.client.report_flags}
            } == {"model-perf", "xla-tuning"}


def test_a_flag_no_kind_declares_is_no_option(with_kinds: Any) -> None:
    """Only model perf registered: its `--apply`, `--force` and `--commit` are options,
    xla-tuning's `--tuning-md` is not."""
    with_kinds({"model-perf": kinds()["model-perf"]})
    parser = argparse.ArgumentParser()
    report_cli.report_args(parser)
    args, rest = parser.parse_known_args(["--apply", "m.gpu.yml", "--commit", "--force",
                                          "--tuning-md"])
    assert (args.apply, args.commit, args.force) == (Path("m.gpu.yml"), True, True)
    assert rest == ["--tuning-md"]


def test_a_new_kinds_flag_is_added_and_runs_that_kinds_action(with_kinds: Any) -> None:
    """A kind declaring `--frob` gets it on `report` with its help, and `report --frob` on
    its sweep runs its action; on another kind's sweep it is refused, naming the kind."""
    ran: list[Any] = []

    def action(args: argparse.Namespace, report: dict[str, Any], io: ClientOutput) -> int:
        ran.append((args.frob, report["sweep"]["id"]))
        return 0

    frob = ReportFlag("--frob", "frob the sweep's result", acts=True,
                      options={"nargs": "?", "const": "all", "metavar": "WHAT"})
    fake = dataclasses.replace(kinds()["model-perf"], name="frobber",
                               client=ClientHooks(report_action=action, report_flags=(frob,)))
    with_kinds({"frobber": fake, "model-perf": kinds()["model-perf"]})
    parser = argparse.ArgumentParser()
    report_cli.report_args(parser)
    assert _option(parser, "--frob").help == f"{fake.name}: {frob.help}"   # named by its kind
    args = parser.parse_args(["--frob"])
    args.id, args.json = 3, False
    assert report_cli._report_action(args, {"sweep": {"id": 3, "kind": "frobber"}}) == 0
    assert ran == [("all", 3)]


def test_a_flag_taken_by_another_kind_is_refused_naming_the_kinds_that_take_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(id=4, json=False, apply=None, tuning_md=Path(), force=False,
                              commit=False, plot=None)
    assert report_cli._report_action(args, {"sweep": {"id": 4, "kind": "node-perf"}}) == 2
    check_golden(GOLDEN / "report_flags" / "flag_of_other_kinds.txt", capsys.readouterr().err)


def test_kinds_sharing_a_flag_must_shape_it_alike(with_kinds: Any) -> None:
    """One argparse option serves every kind that declares the name: a kind declaring
    `--apply` as a switch where the others take a FILE is an error, not a silent choice."""
    odd = ReportFlag("--apply", "apply it", acts=True, options={"action": "store_true"})
    fake = dataclasses.replace(kinds()["model-perf"], name="odd",
                               client=ClientHooks(report_flags=(odd,)))
    with_kinds({"model-perf": kinds()["model-perf"], "odd": fake})
    with pytest.raises(ValueError, match="kind odd declares report flag --apply unlike kind "
                                         "model-perf"):
        report_cli.kind_flags()


def test_a_tuning_md_path_ending_in_a_slash_is_a_directory_or_refused(
        tmp_path: Path) -> None:
    """Red team: `report --tuning-md newdir/` wrote a file named `newdir` (a Path drops the
    trailing separator). A directory that exists is written into; one that does not is one
    clear line, before anything is written."""
    report_cli.kind_flags.cache_clear()
    parser = _report_parser()
    there = tmp_path / "out"
    there.mkdir()
    assert parser.parse_args(["1", "--tuning-md", f"{there}/"]).tuning_md == there
    assert parser.parse_args(["1", "--tuning-md", str(tmp_path / "f.md")]).tuning_md == \
        tmp_path / "f.md"  # a file name as given
    with pytest.raises(UsageError, match=f"--tuning-md: {tmp_path / 'newdir'}/: no such dir"):
        parser.parse_args(["1", "--tuning-md", f"{tmp_path / 'newdir'}/"])
    assert not (tmp_path / "newdir").exists()
