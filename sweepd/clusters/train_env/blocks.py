"""The two TUNE_PROFILE blocks sweepd writes into `train_env.sh` (pure text in, text out):
a checked arm, the arms read back from a text (a block edited by hand, or a foreign
TUNE_PROFILE block, refused), an arm added, the blocks removed, and what is left described.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

XLA_HEADER = "# ---- TUNE_PROFILE ----"
ENV_HEADER = "# ---- TUNE_PROFILE: post-NCCL overrides ----"
XLA_END = "# ---- end TUNE_PROFILE (written by sweepd) ----"
ENV_END = "# ---- end TUNE_PROFILE: post-NCCL overrides (written by sweepd) ----"
BASELINE = "baseline"
SELECTOR = "TUNE_PROFILE"

# Names and values go into the file unquoted or inside double quotes, into case patterns,
# into the job name and its log path: only characters that are literal in all of them.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")
_VALUE = r"[A-Za-z0-9_.,:+/@%=-]*"
_FLAG = re.compile(rf"--[A-Za-z][A-Za-z0-9_]*(=(?:{_VALUE}|''))?")
_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")
_ENV_VALUE = re.compile(_VALUE)
_RESERVED = frozenset({"XLA_FLAGS", SELECTOR, "TUNE_FLAGS", "EXTRACTED_ENV_MAP"})
# `esac)` as a case pattern ends the case block: the file would no longer parse.
_BAD_NAMES = frozenset({"esac"})
_FOREIGN_CASE = re.compile(r"^\s*case\s+\"?\$\{?TUNE_PROFILE", re.MULTILINE)

_XLA_TOP = [
    XLA_HEADER,
    'TUNE_PROFILE="${TUNE_PROFILE:-${EXTRACTED_ENV_MAP[TUNE_PROFILE]:-baseline}}"',
    'TUNE_FLAGS=""',
    'case "${TUNE_PROFILE}" in',
    "    baseline) ;;  # no-op; inherits configs/<MODEL_TAG>.env.sh as-is",
]
_XLA_BOTTOM = [
    "    *)",
    "        echo \"[train_env.sh] WARNING: unknown TUNE_PROFILE='$TUNE_PROFILE'\" >&2",
    "        ;;",
    "esac",
    'if [[ -n "$TUNE_FLAGS" ]]; then',
    '    XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }${TUNE_FLAGS# }"',
    "    export XLA_FLAGS",
    "fi",
    XLA_END,
]
_ENV_TOP = [ENV_HEADER, 'case "${TUNE_PROFILE:-}" in']
_ENV_BOTTOM = ["esac", ENV_END]

_ARM_EMPTY = re.compile(r"    (\S+)\) ;;")
_ARM_OPEN = re.compile(r"    (\S+)\)")
_ARM_FLAG = re.compile(r'        TUNE_FLAGS\+=" (\S+)"')
_ARM_EXPORT = re.compile(r"        export ([A-Z_][A-Z0-9_]*)=(\S*)")
_ARM_CLOSE = "        ;;"


class TrainEnvError(ValueError):
    """train_env.sh cannot take this arm as asked; nothing was written."""


@dataclass(frozen=True)
class Arm:
    """One profile's arms: the XLA flags it appends and the env vars it exports."""

    name: str
    xla_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        parts = [*self.xla_flags, *(f"{k}={v}" for k, v in self.env)]
        return f"{self.name}: {' '.join(parts) or '(no-op)'}"


def arm(name: str, xla_flags: Sequence[str] = (), env: Mapping[str, str] | None = None) -> Arm:
    """A checked arm: a name, flags and env vars that are literal in the file, the case
    pattern, the job name and its log path; anything else is refused, naming it."""
    if not _NAME.fullmatch(name) or name in _BAD_NAMES:
        raise TrainEnvError(
            f"profile name {name!r} is not usable as a TUNE_PROFILE: use 1-100 characters "
            "of A-Z a-z 0-9 _ . + - (starting with a letter or digit), not 'esac'")
    for flag in xla_flags:
        if not _FLAG.fullmatch(flag):
            raise TrainEnvError(
                f"profile {name}: XLA flag {flag!r} is refused: a flag is --name[=value] with "
                "a value of A-Z a-z 0-9 _ . , : + / @ % = - (or '')")
    pairs = tuple((env or {}).items())
    for key, value in pairs:
        _check_env(name, key, value)
    if name == BASELINE and (xla_flags or pairs):
        # The block's default: every job that names no profile runs it, so it stays a no-op.
        raise TrainEnvError("profile baseline is the config as deployed and the arm of every "
                            "job that names no TUNE_PROFILE: it takes no XLA flags or env vars "
                            "(pass a run-wide env var as _env_K=V)")
    return Arm(name, tuple(xla_flags), pairs)


def _check_env(name: str, key: str, value: str) -> None:
    if not _ENV_KEY.fullmatch(key) or key in _RESERVED:
        raise TrainEnvError(
            f"profile {name}: env var {key!r} is refused: use an UPPER_CASE name other "
            f"than {', '.join(sorted(_RESERVED))}")
    if not _ENV_VALUE.fullmatch(value):
        raise TrainEnvError(
            f"profile {name}: {key}={value!r} is refused: a value is A-Z a-z 0-9 "
            "_ . , : + / @ % = -")


# ---- reading the file ----------------------------------------------------------------


@dataclass(frozen=True)
class _Blocks:
    """sweepd's two blocks in a text: their line spans [start, end] and their arms."""

    xla: tuple[int, int]
    env: tuple[int, int]
    arms: tuple[Arm, ...]


def _span(lines: list[str], header: str, end: str) -> tuple[int, int] | None:
    starts = [i for i, line in enumerate(lines) if line == header]
    ends = [i for i, line in enumerate(lines) if line == end]
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise TrainEnvError(
            f"train_env.sh: sweepd's block {header!r} is not whole (its header or its end "
            f"line {end!r} is missing or repeated): edited by hand? sweepd will not touch it")
    return starts[0], ends[0]


def _parse_arms(body: list[str], what: str) -> list[tuple[str, list[str]]]:
    """The arms of one block body as (name, body lines)."""
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(body):
        if m := _ARM_EMPTY.fullmatch(body[i]):
            out.append((m.group(1), []))
            i += 1
            continue
        m = _ARM_OPEN.fullmatch(body[i])
        close = body.index(_ARM_CLOSE, i) if _ARM_CLOSE in body[i:] else -1
        if m is None or close < 0:
            raise TrainEnvError(f"train_env.sh: {what} line {body[i]!r} is not an arm sweepd "
                                "wrote: edited by hand? sweepd will not touch it")
        out.append((m.group(1), body[i + 1:close]))
        i = close + 1
    return out


def _xla_arms(lines: list[str], span: tuple[int, int]) -> dict[str, tuple[str, ...]]:
    body = lines[span[0] + len(_XLA_TOP):span[1] + 1 - len(_XLA_BOTTOM)]
    out: dict[str, tuple[str, ...]] = {}
    for name, rows in _parse_arms(body, "the TUNE_PROFILE block's"):
        flags = [_ARM_FLAG.fullmatch(r) for r in rows]
        if not all(flags):
            raise TrainEnvError(f"train_env.sh: arm {name} of the TUNE_PROFILE block holds "
                                "lines sweepd did not write: edited by hand?")
        out[name] = tuple(f.group(1) for f in flags if f)
    return out


def _env_arms(lines: list[str], span: tuple[int, int]) -> dict[str, tuple[tuple[str, str], ...]]:
    body = lines[span[0] + len(_ENV_TOP):span[1] + 1 - len(_ENV_BOTTOM)]
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for name, rows in _parse_arms(body, "the post-NCCL block's"):
        exports = [_ARM_EXPORT.fullmatch(r) for r in rows]
        if not all(exports):
            raise TrainEnvError(f"train_env.sh: arm {name} of the post-NCCL block holds lines "
                                "sweepd did not write: edited by hand?")
        out[name] = tuple((e.group(1), e.group(2)) for e in exports if e)
    return out


def _blocks(lines: list[str]) -> _Blocks | None:
    xla = _span(lines, XLA_HEADER, XLA_END)
    env = _span(lines, ENV_HEADER, ENV_END)
    if xla is None and env is None:
        return None
    if xla is None or env is None or env[0] < xla[1]:
        raise TrainEnvError("train_env.sh: sweepd's TUNE_PROFILE blocks are not both there, "
                            "XLA block first: edited by hand? sweepd will not touch them")
    flags, envs = _xla_arms(lines, xla), _env_arms(lines, env)
    if strays := sorted(set(envs) - set(flags)):
        raise TrainEnvError(f"train_env.sh: post-NCCL arms without an XLA-block arm: {strays}")
    arms = tuple(Arm(n, f, envs.get(n, ())) for n, f in flags.items())
    if _render(arms) != lines[xla[0]:xla[1] + 1] + lines[env[0]:env[1] + 1]:
        raise TrainEnvError("train_env.sh: sweepd's TUNE_PROFILE blocks were edited by hand; "
                            "sweepd will not rewrite them")
    return _Blocks(xla, env, arms)


def _check_foreign(lines: list[str], found: _Blocks | None) -> None:
    """A TUNE_PROFILE case block outside sweepd's own is a person's: refuse to add to it."""
    own: set[int] = set()
    if found is not None:
        own = {*range(found.xla[0], found.xla[1] + 1), *range(found.env[0], found.env[1] + 1)}
    for i, line in enumerate(lines):
        if i not in own and _FOREIGN_CASE.match(line):
            raise TrainEnvError(
                f"train_env.sh line {i + 1} has a TUNE_PROFILE block sweepd did not write "
                f"({line.strip()!r}): remove it or finish that sweep first")


def arms(text: str) -> tuple[Arm, ...]:
    """sweepd's arms in a train_env.sh text, in the order they were added (the built-in
    no-op baseline arm left out)."""
    found = _blocks(text.splitlines())
    return () if found is None else found.arms


# ---- writing the blocks ----------------------------------------------------------------


def _render(all_arms: Sequence[Arm]) -> list[str]:
    xla = list(_XLA_TOP)
    env = list(_ENV_TOP)
    for a in all_arms:
        xla += _arm_lines(a.name, [f'TUNE_FLAGS+=" {f}"' for f in a.xla_flags])
        if a.env:
            env += _arm_lines(a.name, [f"export {k}={v}" for k, v in a.env])
    return xla + _XLA_BOTTOM + env + _ENV_BOTTOM


def _arm_lines(name: str, rows: list[str]) -> list[str]:
    if not rows:
        return [f"    {name}) ;;"]
    return [f"    {name})", *(f"        {r}" for r in rows), _ARM_CLOSE]


def add_arm(text: str, new: Arm) -> str:
    """`text` with `new`'s arms in sweepd's blocks, creating both at the end of the file when
    absent (the XLA block, then the post-NCCL block after every NCCL export). The same arm
    already there leaves the text as it is; the same name with other content is refused."""
    lines = text.splitlines()
    found = _blocks(lines)
    _check_foreign(lines, found)
    old = list(found.arms) if found else []
    same = next((a for a in old if a.name == new.name), None)
    if same == new or new == Arm(BASELINE):
        return text
    if same is not None:
        raise TrainEnvError(
            f"train_env.sh already has an arm {new.name!r} with other content "
            f"({same.describe()}; asked: {new.describe()}): arms of pending jobs must not "
            "change, so give the new profile another name")
    rendered = _render([*old, new])
    if found is None:  # no blank line before them: removing them gives the file back
        return "\n".join([*lines, *rendered]) + "\n"
    cut = rendered.index(XLA_END) + 1
    (xs, xe), (es, ee) = found.xla, found.env
    out = lines[:xs] + rendered[:cut] + lines[xe + 1:es] + rendered[cut:] + lines[ee + 1:]
    return "\n".join(out) + "\n"


def remove_arms(text: str) -> str:
    """`text` without sweepd's two blocks, the rest of the file line for line; a file without
    them comes back unchanged."""
    lines = text.splitlines()
    found = _blocks(lines)
    if found is None:
        return text
    (xs, xe), (es, ee) = found.xla, found.env
    out = lines[:xs] + lines[xe + 1:es] + lines[ee + 1:]
    return "\n".join(out) + ("\n" if out else "")


def without_arms(text: str, names: Sequence[str]) -> str:
    """`text` without the named arms; when no arm is left, without sweepd's two blocks (the
    file as it was before them, line for line). Other arms (another sweep's) stay as they
    were; a name not there changes nothing."""
    lines = text.splitlines()
    found = _blocks(lines)
    if found is None:
        return text
    kept = [a for a in found.arms if a.name not in set(names)]
    if not kept:
        return remove_arms(text)
    if len(kept) == len(found.arms):
        return text
    rendered = _render(kept)
    cut = rendered.index(XLA_END) + 1
    (xs, xe), (es, ee) = found.xla, found.env
    out = lines[:xs] + rendered[:cut] + lines[xe + 1:es] + rendered[cut:] + lines[ee + 1:]
    return "\n".join(out) + "\n"


def describe(text: str, path: str = "train_env.sh") -> str:
    """What sweepd left in the file, for the person at the end of a sweep."""
    left = arms(text)
    if not left and _blocks(text.splitlines()) is None:
        return f"{path}: no TUNE_PROFILE blocks of sweepd's"
    lines = [f"{path} still holds sweepd's two TUNE_PROFILE blocks ({len(left)} arms); they "
             "do nothing unless a job passes _env_TUNE_PROFILE=<name>, and the next sweep's "
             "pre-flight refuses them until they are removed:"]
    lines += [f"  {a.describe()}" for a in left]
    return "\n".join(lines)
