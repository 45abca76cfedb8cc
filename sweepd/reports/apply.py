"""`sweepd report ID --apply FILE`: write a sweep's optimum into the model's config file
(model perf: one line of `<model>.gpu.yml`; xla-tuning: a marked block of `<model>.env.sh`).

Only when a person asks. The edit is one line: the parameter's line is replaced (comments,
order and every other line kept), or appended when the file does not set it yet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sweepd.kinds.xla_tuning.train_env import TrainEnvError, check_syntax, write_atomic


class ApplyError(ValueError):
    pass


def apply_to_config(path: Path, parameter: str, value: Any) -> str:
    """Set `parameter: value` in a `<model>.gpu.yml`; returns the line written."""
    if parameter.startswith("_env_") or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", parameter):
        raise ApplyError(f"{parameter!r} is not a config key (env variables go in the "
                         "model's .env.sh, not its .gpu.yml)")
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise ApplyError(f"cannot read {path}: {e.strerror}") from None
    line = f"{parameter}: {value}"
    key = re.compile(rf"^{re.escape(parameter)}\s*:.*?(\s+#.*)?$", re.M)
    found = key.search(text)
    if found:
        new = text[:found.start()] + line + (found.group(1) or "") + text[found.end():]
    else:
        new = text + ("" if text.endswith("\n") or not text else "\n") + line + "\n"
    path.write_text(new, "utf-8")
    return line


def _markers(what: str) -> tuple[str, str]:
    return f"# >>> sweepd: {what} >>>", f"# <<< sweepd: {what} <<<"


def apply_env_patch(path: Path, what: str, lines: list[str]) -> str:
    """Write `lines` into a `configs/<model>.env.sh` as one marked block (`what`, e.g.
    `xla-tuning FSDP=8`): the block of the same `what` is replaced, else the block appended;
    every other line kept. The file must exist and the result parse (`bash -n`): every job
    of the checkout sources it. Returns the block written."""
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise ApplyError(f"cannot read {path}: {e.strerror}") from None
    begin, end = _markers(what)
    block = "\n".join([begin, *lines, end])
    found = re.search(rf"^{re.escape(begin)}$.*?^{re.escape(end)}$", text, re.M | re.S)
    if found:
        new = text[:found.start()] + block + text[found.end():]
    elif re.search(rf"^{re.escape(begin)}$", text, re.M):
        raise ApplyError(f"{path}: sweepd's block {begin!r} has no end line {end!r}; "
                         "nothing written (mend the file by hand)")
    else:
        new = text + ("" if text.endswith("\n") or not text else "\n") + block + "\n"
    try:
        check_syntax(new)
    except TrainEnvError as e:
        raise ApplyError(f"{path}: {e}".replace("train_env.sh ", "")) from None
    write_atomic(path, new)
    return block
