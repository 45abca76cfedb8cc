"""`sweepd report ID --apply [FILE]` on an xla-tuning sweep: write the recipe into the
model's env file, a marked block of `<model>.env.sh` (`hooks_client` calls it).

Only when a person asks, and only through `util.person_files` (locked, re-checked right
before the write, written in place, left parsing). The edit is one marked block per model
and parallelism (`kinds.xla_tuning.deploy`): the recipe exactly, guarded by the cell's exact
parallelism, appended after everything else the file sets (last wins).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.deploy import deploy, sourced
from sweepd.util import person_files


class ApplyError(ValueError):
    pass


def _markers(what: str) -> tuple[str, str]:
    return f"# >>> sweepd: {what} >>>", f"# <<< sweepd: {what} <<<"


_BEGIN = re.compile(r"^# >>> sweepd: (.+) >>>$")
_WHAT = re.compile(r"^xla-tuning (\S+) (\S+)$")


@dataclass(frozen=True)
class _Block:
    what: str
    start: int  # line index of the begin marker
    end: int  # line index of the end marker


def _blocks(lines: Sequence[str], path: Path) -> list[_Block]:
    out = []
    i = 0
    while i < len(lines):
        m = _BEGIN.match(lines[i])
        if m is None:
            i += 1
            continue
        end = _markers(m.group(1))[1]
        try:
            j = lines.index(end, i + 1)
        except ValueError:
            raise ApplyError(f"{path}: sweepd's block {lines[i]!r} has no end line {end!r}; "
                             "nothing written (mend the file by hand)") from None
        out.append(_Block(m.group(1), i, j))
        i = j + 1
    return out


def _unwrap(inner: list[str]) -> tuple[list[str], list[str]]:
    """An older block's (comments, settings): its lines without an `if ...; then`/`fi`
    wrapper (the PP-only guard earlier versions wrote, or the parallelism guard without the
    model's condition, whose own comment lines are dropped: `guarded` writes them again),
    dedented."""
    comments = []
    while inner and inner[0].startswith("#"):
        line = inner.pop(0)
        if line.startswith("# only for jobs of exactly"):
            if inner and inner[0].startswith("# passthrough override"):
                inner.pop(0)
            continue
        comments.append(line)
    if inner and inner[0].startswith(f'{deploy.GUARD_VAR}=""'):
        start = next((i for i, ln in enumerate(inner) if ln.startswith("if [[ ")), None)
        end = max((i for i, ln in enumerate(inner) if ln == "fi"), default=None)
        if start is not None and end is not None and start < end:
            inner = inner[start:end + 1]
    if inner and inner[0].startswith("if ") and inner[-1] == "fi":
        inner = [ln[4:] if ln.startswith("    ") else ln for ln in inner[1:-1]]
    return comments, inner


def _reguard(lines: list[str], b: _Block, path: Path) -> list[str]:
    """An earlier sweepd block of another parallelism, guarded by its own exact
    parallelism now that the file holds more than one (its settings unchanged)."""
    inner = lines[b.start + 1:b.end]
    m = _WHAT.match(b.what)
    if m is None or deploy.is_guarded(inner, m.group(1)):
        return inner
    try:
        par = Parallelism.parse(m.group(2))
    except ValueError:
        return inner
    comments, settings = _unwrap(list(inner))
    try:
        return [*comments, *deploy.guarded(m.group(1), par, settings)]
    except deploy.DeployError as e:
        raise ApplyError(f"{path}: sweepd's block {b.what!r} cannot be guarded ({e}); "
                         "nothing written (mend the file by hand)") from None


def env_patch_text(text: str | None, path: Path, model: str, par: Parallelism,
                   comments: Sequence[str], lines: Sequence[str]) -> str:
    """The env file's new text: sweepd's block for (model, par) holding `lines` guarded by
    the cell's exact parallelism, at the end of the file (an older block of the same cell is
    removed, so nothing the file sets later can win over it); sweepd's blocks of other
    parallelisms guarded by theirs. A missing file (None) starts with a comment line."""
    what = f"xla-tuning {model} {par.text}"
    begin, end = _markers(what)
    try:
        block = [begin, *comments, *deploy.guarded(model, par, lines), end]
    except deploy.DeployError as e:
        raise ApplyError(f"{path}: {e}; nothing written") from None
    if text is None:
        head = [f"# Per-model environment overrides for {model}, sourced by _train.sh after "
                "train_env.sh (created by sweepd report --apply)."]
        return "\n".join([*head, *block]) + "\n"
    # Lines as bash reads them: split on "\n" alone, each kept byte for byte (its "\r"
    # too); `plain` is what sweepd's markers are matched on. The block itself ends its
    # lines with "\n" whatever the file's own ending: to bash a "\r" is part of a word
    # (`then\r` is no keyword, a flag's value would carry it), so a CRLF block would not
    # parse or would set other values than the ones measured.
    raw = text.split("\n")
    if raw[-1] == "":
        raw.pop()  # the text ended with a line ending
    plain = [ln.removesuffix("\r") for ln in raw]
    kept: list[str] = []
    at = 0
    for b in _blocks(plain, path):
        kept += raw[at:b.start]
        if b.what != what:
            inner = plain[b.start + 1:b.end]
            again = _reguard(plain, b, path)
            kept += [raw[b.start], *(raw[b.start + 1:b.end] if again == inner else again),
                     raw[b.end]]
        at = b.end + 1
    kept += raw[at:]
    return "\n".join([*kept, *block]) + "\n"


def apply_env_patch(path: Path, model: str, par: Parallelism, comments: Sequence[str],
                    lines: Sequence[str], create: bool = True, *, force: bool = False,
                    jobs: Sequence[sourced.Job] | None = None) -> str:
    """Write the cell's block into a `configs/<model>.env.sh` (see `env_patch_text`);
    the result must parse (`bash -n`): every job of the checkout sources it. A missing
    file is created when its directory exists (`create`); a read-only one is refused unless
    `force`. Then the written file is proven (`sourced.prove`: sourced as the cell's `jobs`
    would, default `sourced.cell_jobs`, the recipe is in effect), else put back as it was.
    Returns the block written."""
    if create and not path.parent.is_dir():
        raise ApplyError(f"cannot write {path}: there is no directory {path.parent}")
    try:
        done = person_files.edit(path, lambda old: env_patch_text(old, path, model, par,
                                                                  comments, lines),
                                 check=person_files.bash_syntax, create=create, force=force)
    except person_files.PersonFileError as e:
        raise ApplyError(str(e)) from None
    begin, end = _markers(f"xla-tuning {model} {par.text}")
    text = done.new.split("\n")  # bash's lines: its line numbers are these
    at = (text.index(begin), text.index(end))
    why = sourced.prove(path, text, at, model, par, lines,
                      jobs if jobs is not None else sourced.cell_jobs(path, model, par))
    if why is not None:
        raise ApplyError(f"{path}: the {par.text} recipe would not take effect: {why}; "
                         + _restore(path, done))
    return "\n".join(text[at[0]:at[1] + 1])


def _restore(path: Path, done: person_files.Edit) -> str:
    """The file back as it was before the write, byte for byte, in place (owner, mode and
    links kept); one created by this apply is removed."""
    if done.old is None:
        path.unlink(missing_ok=True)
        return "the file it created is removed"
    old = done.old
    try:
        back = person_files.edit(path, lambda cur: old if cur == done.new else cur or "",
                                 check=lambda _text: None)
    except person_files.PersonFileError as e:
        return f"putting the file back failed ({e}): restore it by hand"
    if back.new != old:
        return "the file changed since it was written, so it was not put back: check it"
    return "the file is put back as it was"
