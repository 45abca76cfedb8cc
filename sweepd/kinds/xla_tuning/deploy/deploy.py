"""What `report --apply` deploys: the verdict's recipe exactly, for exactly the cell's
parallelism (issue 21, "What is deployed is what was measured").

The recipe as measured is every setting its runs carried: each catalog part's, and a
`restore_default` part's (the env file's own settings put back to the image's defaults by
last-wins appending; its values come from the run's recorded params, not the catalog). In
the env file these become the same last-wins lines, appended after everything the file
already sets, so a job of the cell runs with exactly the settings the recipe was measured
with: image defaults <- the env file <- the recipe.

The guard: the toolkit exports no parallelism variable (the published tuning file's
`MAXTEXT_DCN_PP` was a wish: `submit.sh` passes the axes as MaxText overrides only), but
`_train.sh` sources the env file in the shell that holds `PASSTHROUGH_ARGS`. So the block
reads each axis the way MaxText will: the job's last `key=N` passthrough override, else the
model's `configs/<model>.gpu.yml`, else 1; and applies only when all three match the cell
(FSDP=8 and TP=8 are different cells). It also applies only when the file is sourced under
the measured model's name (`${BASH_SOURCE[0]}`'s base name, which `_train.sh` builds from the
model): an env file that is a link to a file shared by several models carries the block in
the shared file, and another model sourcing it gets none of the recipe. A MaxText part
(Wave 5's pipeline shape) is put in front of the job's own overrides, so a person's explicit
override still wins.

Pure text: `block` renders, `settings_of` reads a run's params back into settings.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import Axis, Layer, Parallelism, Profile, Setting
from sweepd.kinds.xla_tuning.catalog.flags import FAMILIES
from sweepd.kinds.xla_tuning.catalog.tpu_flags import FLAGS_VAR as TPU_FLAGS_VAR
from sweepd.kinds.xla_tuning.catalog.tpu_flags import KNOWN as TPU_KNOWN
from sweepd.kinds.xla_tuning.evidence.results import RESTORE

# MaxText's parallelism overrides, in the order the guard compares them.
AXIS_KEYS: tuple[tuple[str, Axis], ...] = (("dcn_fsdp_parallelism", Axis.FSDP),
                                           ("dcn_pipeline_parallelism", Axis.PP),
                                           ("ici_tensor_parallelism", Axis.TP))
GUARD_VAR = "_sweepd_par"
# `''` is a value too: the image's empty command-buffer list, literal inside double quotes.
_XLA_WORD = re.compile(r"--[A-Za-z0-9_]+=(?:[A-Za-z0-9_.,:+/=-]*|'')")
_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")
_MAXTEXT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.,:+/-]*")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


class DeployError(ValueError):
    """The recipe cannot be written as asked (one line)."""


@dataclass(frozen=True)
class Part:
    """One part of the recipe and the settings its runs carried."""

    name: str
    settings: tuple[Setting, ...]


def parts(recipe: str, table: Mapping[str, Profile],
          recorded: Mapping[str, tuple[Setting, ...]]) -> tuple[Part, ...]:
    """The recipe (`a+b`, parts by profile name) as settings: a catalog part from the table,
    any other (restore_default, whose values are the env file's) as its run recorded it."""
    out = []
    for name in recipe.split("+"):
        got = table[name].settings if name in table else recorded.get(name)
        if got is None:
            raise DeployError(f"recipe part {name!r} is neither in the catalog nor recorded "
                              "by a run: its settings are unknown, nothing to deploy")
        out.append(Part(name, tuple(got)))
    return tuple(out)


def settings_of(xla_flags: Iterable[str], env: Mapping[str, str]) -> tuple[Setting, ...]:
    """A run's recorded params (`--k=v` flags, env vars) as settings."""
    out = []
    for flag in xla_flags:
        key, _, value = flag.removeprefix("--").partition("=")
        out.append(Setting(key, value, Layer.XLA))
    out += [Setting(k, v, Layer.ENV) for k, v in env.items()]
    return tuple(out)


def settings_from_text(text: str) -> tuple[Setting, ...]:
    """Settings from their text as the report shows them (`--k=v` flags, `K=V` env vars)."""
    out = []
    for word in text.split():
        key, _, value = word.removeprefix("--").partition("=")
        out.append(Setting(key, value, Layer.XLA if word.startswith("--") else Layer.ENV))
    return tuple(out)


def key_mechanisms(settings: Iterable[Setting]) -> set[str]:
    """The mechanisms of the catalog families that set these settings' keys (what putting the
    env file's own settings back acts on: restore_default's profile carries none itself)."""
    keys = {s.key for s in settings}
    return {str(f.mechanism) for f in FAMILIES if keys & set(f.keys)}


def shell_line(s: Setting) -> str:
    """One setting as a line of the env file (a value must be one plain shell word)."""
    if s.layer is Layer.XLA and _XLA_WORD.fullmatch(s.text):
        # A TPU flag (the TPU catalog's names) goes where libtpu reads it.
        var = TPU_FLAGS_VAR if s.key in TPU_KNOWN else "XLA_FLAGS"
        return f'export {var}="${{{var}:+${var} }}{s.text}"'
    if s.layer is Layer.ENV and _ENV_KEY.fullmatch(s.key):
        return f"export {s.key}={shlex.quote(s.value)}"
    if s.layer is Layer.MAXTEXT and _MAXTEXT_WORD.fullmatch(s.label):
        # In front of the job's own overrides: an explicit one of the person's still wins.
        return (f"PASSTHROUGH_ARGS=({s.label} "
                '${PASSTHROUGH_ARGS[@]+"${PASSTHROUGH_ARGS[@]}"})')
    raise DeployError(f"setting {s.label!r} is not one plain shell word: sweepd will not "
                      "write it into a file every job sources")


def body(recipe_parts: Sequence[Part]) -> list[str]:
    """The recipe's lines, each part's settings in order (restore_default's named)."""
    out = []
    for p in recipe_parts:
        if p.name == RESTORE and p.settings:
            out.append("# restore_default: the env file's own settings back to the image's")
        out += [shell_line(s) for s in p.settings]
    if not any(not line.startswith("#") for line in out):
        raise DeployError("the recipe holds no setting: nothing to deploy")
    return out


def axis_values(par: Parallelism) -> str:
    return " ".join(str(par.degree(a)) for _, a in AXIS_KEYS)


def guard(model: str, par: Parallelism) -> list[str]:
    """The lines that compute the job's parallelism, then the `if` that opens the block."""
    if not _MODEL.fullmatch(model):
        raise DeployError(f"model {model!r} is not a plain file name")
    keys = " ".join(k for k, _ in AXIS_KEYS)
    return [
        f"# only for jobs of exactly {par.text} ({' '.join(k for k, _ in AXIS_KEYS)} = "
        f"{axis_values(par)}: each the job's last",
        f"# passthrough override, else configs/{model}.gpu.yml, else 1)",
        f'{GUARD_VAR}=""',
        f"for _sweepd_key in {keys}; do",
        # A number may be written quoted (`"8"`): YAML reads it as MaxText does, 8.
        '    _sweepd_val=$(sed -n "s/^${_sweepd_key}:[[:space:]]*[\\"\']\\{0,1\\}'
        '\\([0-9-]*\\).*/\\1/p" \\',
        f'        "$(dirname "${{BASH_SOURCE[0]}}")/{model}.gpu.yml" 2>/dev/null | tail -n 1 '
        "|| true)",
        '    for _sweepd_arg in ${PASSTHROUGH_ARGS[@]+"${PASSTHROUGH_ARGS[@]}"}; do',
        '        if [[ $_sweepd_arg == "$_sweepd_key="* ]]; then _sweepd_val=${_sweepd_arg#*=}; fi',
        "    done",
        f'    {GUARD_VAR}+="${{_sweepd_val:-1}} "',
        "done",
        model_line(model),
        f'if [[ "${GUARD_VAR}" == "{axis_values(par)} " ]]; then',
    ]


def guarded(model: str, par: Parallelism, lines: Sequence[str]) -> list[str]:
    """`lines` inside the cell's guard (never an empty if-block: bash would not parse it)."""
    if not any(ln.strip() and not ln.lstrip().startswith("#") for ln in lines):
        raise DeployError("nothing to guard: the block would be an empty if-block")
    return [*guard(model, par), *("    " + ln if ln else ln for ln in lines), "fi",
            f"unset {GUARD_VAR} _sweepd_key _sweepd_val _sweepd_arg"]


def model_line(model: str) -> str:
    """The guard's model condition: sourced under another name, the parallelism matches
    nothing (kept apart from the `if` so the condition reads as the report names it)."""
    return (f'[[ "${{BASH_SOURCE[0]##*/}}" == "{model}.env.sh" ]] || '
            f'{GUARD_VAR}="not {model}.env.sh"')


def is_guarded(lines: Sequence[str], model: str | None = None) -> bool:
    """The block carries the parallelism guard (and, given `model`, the model's condition:
    blocks written before it had none)."""
    par = any(ln.startswith(f'{GUARD_VAR}=""') for ln in lines)
    return par and (model is None or model_line(model) in lines)


_SHELL_XLA = re.compile(
    r'export (XLA_FLAGS|LIBTPU_INIT_ARGS)="\$\{\1:\+\$\1 \}(.*)"')
_SHELL_MAXTEXT = re.compile(r'PASSTHROUGH_ARGS=\((\S+) ')


def settings_of_lines(lines: Iterable[str]) -> tuple[Setting, ...]:
    """`body`'s lines read back into the settings they set (`shell_line`'s three shapes),
    what a job of the cell must run with once the file is sourced."""
    out = []
    for line in lines:
        line = line.strip()
        if m := _SHELL_XLA.fullmatch(line):
            key, _, value = m.group(2).removeprefix("--").partition("=")
            out.append(Setting(key, value, Layer.XLA))
        elif m := _SHELL_MAXTEXT.match(line):
            key, _, value = m.group(1).partition("=")
            out.append(Setting(key, value, Layer.MAXTEXT))
        elif line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            words = shlex.split(value)
            out.append(Setting(key, words[0] if words else "", Layer.ENV))
    return tuple(out)


def guard_text(par: Parallelism) -> str:
    """The guard's condition, as the report names it."""
    return f'[[ "${GUARD_VAR}" == "{axis_values(par)} " ]]'
